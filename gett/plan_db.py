"""Tuned kernel configurations: shipped databases per GPU architecture and per GPU model, and the user's on top.

Three layers, each a json file named after the architecture (``arch`` as :func:`gett.nvrtc.normalize_arch`
spells it, less a compile target's ``a``/``f`` suffix: ``sm_90`` for "sm_90a" too, since the database
describes the GPU):

- shipped, read-only, in ``gett/plans/`` in a wheel, ``plans/`` in the repository (:func:`shipped_dir`):
  ``<arch>.json`` for every GPU of the architecture (``sm_90.json``: tuned on an H100), and
  ``<arch>-<model>.json`` (:func:`model_of`) for the one model it was measured on, over the first: where the
  same architecture's GPUs move memory at other rates, another tile can win (H200 against H100:
  TCCG #6 and #7, session 64);
- user, written by :func:`record` (the tuner): ``<arch>.json`` in ``<gett.kernel_cache.cache_dir()>/plans/``,
  one for every model of the architecture.

An entry of a later layer overrides one with the same key in an earlier. :func:`lookup` reads the model's
layer only when given the model (:func:`gett.kernel.current_model` gives the current device's; a plan keeps
the kernel it compiled first, per architecture, so in a process with GPUs of two models of one architecture a
plan runs on both with the configuration of the one it was first compiled on). File format::

    {"version": 1, "entries": {<key>: {"config": {<KernelConfig fields>}, "ms": 0.0123, "date": "2026-11-23",
                                       "gett": "0.1.0", "family": <family key>, "gemm": [M, N, K, L]}}}

(and ``"reads_c": true`` in an entry tuned by a plan that reads C; see :func:`lookup`.)

The key (:func:`plan_key`) is the sha256 of a canonical json of everything about a plan a configuration
depends on: architecture, dtypes of A, B, C/D, compute type, the ops' keys, the descriptors' alignments and
the index tables (each GEMM dimension's extents and every tensor's strides). No ``hash()``, so keys are the
same in every process and Python version.

Near-identical shapes: with no entry under a plan's key, :func:`lookup` reuses the entry of the same
*family* (:func:`family_key`: the key with the extents left out and each stride reduced to 0, 1, -1, "+" or
"-") whose GEMM M, N, K and batch are each within a factor of 2 of the plan's; of several, the one
closest in the sum of |log(ratio)|, then the smallest key.

bf16 plans: with no entry of its own (nor of its family), a plan with bfloat16 tensors takes the entry of its
*twin*, the same plan with float16 in their place (``twin=True`` in the keys): the two types are moved and
multiplied alike (two bytes an element, one tensor-core rate), so a configuration tuned for one suits the
other, and the shipped database, tuned in f16, serves bf16 too.

Files are replaced atomically, under an ``fcntl.flock`` lock file for read-modify-write (without fcntl,
concurrent writers may lose each other's entries). A file or entry that can't be read or doesn't check out
(bad json, wrong schema, an invalid :class:`KernelConfig`) is ignored with a warning, never an error.
Parsed files are kept in memory and re-read only when the file changes (inode, mtime or size).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import math
import os
import threading
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .config import KernelConfig, for_load_ops, loads_have_ops, wide_warps_over_one_k_tile
from .modes import GROUPS

__all__ = ["FORMAT", "Entry", "clear_memory_cache", "family_key", "lookup", "model_of", "plan_key", "record",
           "shipped_dir", "shipped_path", "user_path"]

FORMAT = 1
_TENSORS = "ABCD"
_INT_FIELDS = tuple(f.name for f in fields(KernelConfig) if f.type in ("int", int))

_files: dict = {}       # path -> (stat signature, {key: Entry})
_merged: dict = {}      # (arch, model) -> ((paths, the layers' signatures), entries, entries by family)
_memo_lock = threading.Lock()


@dataclass(frozen=True)
class Entry:
    """One tuned configuration: its measured median time, when and by which gett version, and the
    family and GEMM extents (M, N, K, L) that the near-identical-shape rule compares, and whether the
    tuned plan read C (its beta hint was true; absent in the file: no, as in the shipped database)."""
    config: KernelConfig
    ms: float
    date: str
    version: str
    family: str
    gemm: tuple
    reads_c: bool = False

    def to_json(self) -> dict:
        return {"config": asdict(self.config), "ms": self.ms, "date": self.date, "gett": self.version,
                "family": self.family, "gemm": list(self.gemm), **({"reads_c": True} if self.reads_c else {})}

    @classmethod
    def from_json(cls, raw) -> Entry:
        """Raises ValueError or TypeError when ``raw`` is not a valid entry."""
        if not isinstance(raw, dict) or not isinstance(raw.get("config"), dict):
            raise TypeError("an entry must be an object with a 'config' object")
        cfg = raw["config"]
        if not isinstance(cfg.get("math"), str) or any(type(cfg.get(f, 0)) is not int for f in _INT_FIELDS) \
                or any(type(cfg.get(f, False)) is not bool for f in ("ws", "swap")):
            raise TypeError(f"config {cfg} must have a string 'math', integer sizes and booleans 'ws', 'swap'")
        config = KernelConfig(**cfg)   # unknown or missing fields: TypeError
        config.validate()
        gemm = raw.get("gemm")
        if not (isinstance(gemm, list) and len(gemm) == 4 and all(type(x) is int for x in gemm)):
            raise TypeError(f"'gemm' must be a list of 4 integers, got {gemm!r}")
        ms = raw.get("ms")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not isinstance(raw.get("family"), str) \
                or type(raw.get("reads_c", False)) is not bool:
            raise TypeError("'ms' must be a number, 'family' a string and 'reads_c' a boolean")
        return cls(config, float(ms), str(raw.get("date", "")), str(raw.get("gett", "")), raw["family"],
                   tuple(gemm), raw.get("reads_c", False))


# Keys ------------------------------------------------------------------------------------------------------
def _arch(arch) -> str:
    """The GPU's ``sm_XY``: a plan made for "sm_90a" runs on the same H100 as one made for "sm_90"."""
    from .nvrtc import normalize_arch
    return normalize_arch(arch).rstrip("af")


def _stride_class(s: int):
    return s if s in (0, 1, -1) else ("+" if s > 0 else "-")


_TWIN_DTYPES = {"bf16": "f16"}   # a bf16 plan's twin: see the module docstring


def _signature(plan, arch, exact: bool, unary_ops: bool = True, twin: bool = False) -> dict:
    """The json-able description a key hashes; without ``exact``, extents and stride magnitudes are left out;
    without ``unary_ops``, the plan's elementwise ops on A, B, C and the output are (the semiring stays);
    with ``twin``, bfloat16 tensors read as float16."""
    d = plan.descriptors
    tables = {}
    for g in GROUPS:
        t = plan.tables[g]
        strides = {x: [s if exact else _stride_class(s) for s in t.strides_of(x)] for x in _TENSORS}
        tables[g] = {"extents": list(t.extents) if exact else len(t.extents), "strides": strides}
    names = [d[x].dtype.name for x in _TENSORS]
    dtypes = [_TWIN_DTYPES.get(n, n) for n in names] if twin else names
    return {"format": FORMAT, "arch": _arch(arch), "dtypes": dtypes,
            "compute": plan.compute_type.name,
            "ops": list(plan.ops.key if unary_ops else plan.ops.semiring_key),
            "alignment": [d[x].alignment for x in _TENSORS], "tables": tables}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def plan_key(plan, arch, unary_ops: bool = True, twin: bool = False) -> str:
    """The exact key of ``plan`` on ``arch`` (``twin``: of its f16 twin): stable across processes, machines
    and Python versions."""
    return _digest(_signature(plan, arch, exact=True, unary_ops=unary_ops, twin=twin))


def family_key(plan, arch, unary_ops: bool = True, twin: bool = False) -> str:
    """The key of ``plan``'s family: plans that differ only in extents (and stride magnitudes)."""
    return _digest(_signature(plan, arch, exact=False, unary_ops=unary_ops, twin=twin))


def _has_twin(plan) -> bool:
    return any(plan.descriptors[x].dtype.name in _TWIN_DTYPES for x in _TENSORS)


def _gemm(plan) -> tuple:
    return (plan.m, plan.n, plan.k, plan.batch)


# Files -----------------------------------------------------------------------------------------------------
def shipped_dir() -> Path | None:
    """The shipped database's folder: ``gett/plans`` in a wheel, ``plans/`` in the repository."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "plans", here.parent / "plans"):
        if candidate.is_dir():
            return candidate
    return None


def model_of(device_name: str) -> str | None:
    """The GPU model a CUDA device's name gives, as a model's database file spells it: the name's first word
    with a digit in it, lower case, up to any '-' ("NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100",
    "Tesla V100-SXM2-16GB" -> "v100"); None where no word has a digit."""
    word = next((w for w in device_name.split() if any(ch.isdigit() for ch in w)), None)
    return None if word is None else word.split("-")[0].lower()


def shipped_path(arch, model: str | None = None) -> Path | None:
    """The shipped database of ``arch``, or with ``model`` that of the one GPU model (module docstring)."""
    folder = shipped_dir()
    return None if folder is None else folder / f"{_arch(arch)}{'-' + model if model else ''}.json"


def user_path(arch) -> Path:
    from .kernel_cache import cache_dir
    return cache_dir() / "plans" / f"{_arch(arch)}.json"


def _stat(path: Path | None):
    """What identifies one version of a file (os.replace gives a new inode); None when there is none."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read(path: Path) -> dict:
    """``{key: Entry}`` of the file at ``path``: {} when missing; bad files and entries are warned about."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        warnings.warn(f"gett: ignoring the plan database {path}: {e}", stacklevel=4)
        return {}
    return _entries(data, path, stacklevel=5)


def _entries(data, source, stacklevel: int) -> dict:
    """``{key: Entry}`` of a database's json object ``data`` (read from ``source``, named in warnings, which
    point ``stacklevel`` frames up: at :func:`lookup`, as those of a file's read do)."""
    if not isinstance(data, dict) or data.get("version") != FORMAT or not isinstance(data.get("entries"), dict):
        warnings.warn(f"gett: ignoring the plan database {source}: not a version-{FORMAT} "
                      f'{{"version": ..., "entries": {{...}}}} object', stacklevel=stacklevel)
        return {}
    entries = {}
    for key, raw in data["entries"].items():
        try:
            entries[key] = Entry.from_json(raw)
        except (TypeError, ValueError) as e:
            warnings.warn(f"gett: ignoring entry {key[:16]} of the plan database {source}: {e}",
                          stacklevel=stacklevel)
    return entries


def _load(path: Path | None) -> tuple:
    """(stat signature, entries) of ``path``, parsed again only when the file changed."""
    sig = _stat(path)
    if sig is None:
        return None, {}
    with _memo_lock:
        memo = _files.get(path)
    if memo is not None and memo[0] == sig:
        return memo
    memo = (sig, _read(path))
    with _memo_lock:
        _files[path] = memo
    return memo


def _database(arch: str, model: str | None) -> tuple:
    """(entries, entries by family) of the layers together: shipped, the model's (with ``model``), user; a
    later layer's entry winning."""
    paths = (shipped_path(arch), shipped_path(arch, model) if model else None, user_path(arch))
    layers = [_load(path) for path in paths]
    version = (paths, *(sig for sig, _ in layers))   # the paths too: GETT_CACHE_DIR may change between calls
    with _memo_lock:
        memo = _merged.get((arch, model))
    if memo is not None and memo[0] == version:
        return memo[1], memo[2]
    entries, families = _indexed({key: e for _, layer in layers for key, e in layer.items()})
    with _memo_lock:
        _merged[(arch, model)] = (version, entries, families)
    return entries, families


def _indexed(entries: dict) -> tuple:
    """(entries, entries by family: [(key, Entry)] in key order)."""
    families: dict = {}
    for key, entry in sorted(entries.items()):
        families.setdefault(entry.family, []).append((key, entry))
    return entries, families


def clear_memory_cache() -> None:
    """Forget parsed files, so the next lookup reads the disk (for tests)."""
    with _memo_lock:
        _files.clear()
        _merged.clear()


# Lookup and record -----------------------------------------------------------------------------------------
def _within_2x(a: tuple, b: tuple) -> bool:
    return all(x > 0 and y > 0 and max(x, y) <= 2 * min(x, y) for x, y in zip(a, b))


def _distance(a: tuple, b: tuple) -> float:
    return sum(abs(math.log(x / y)) for x, y in zip(a, b))


def lookup(plan, arch, exact: bool = False, data: dict | None = None, model: str | None = None) -> KernelConfig | None:
    """The tuned configuration of ``plan`` on ``arch`` (on a GPU of ``model``, :func:`model_of`, where given:
    its database over the architecture's, module docstring): its own entry, else (unless ``exact``) the nearest
    entry of its family within a factor of 2 in M, N, K and batch (module docstring), else for a plan with
    elementwise ops the same two look-ups for the plan without them (an op changes the work per element
    loaded, not which tile suits the shape; but where A or B has an op, the borrowed tile is adapted to
    it: see config.for_load_ops); None without one. Failing all of these, a plan with bf16 tensors makes the
    same look-ups for its f16 twin (module docstring). A plan that reads C passes over some entries tuned
    without reading C (_unfit_for_reading_c). ``data``: a database's json object (a file's format) to look
    in instead of the files (benchmarks/tune_tccg.py asks what a database it is about to ship would lend)."""
    arch = _arch(arch)
    entries, families = _database(arch, model) if data is None else _indexed(_entries(data, "given to lookup", 2))

    def usable(e: Entry | None) -> Entry | None:
        return None if e is None or _unfit_for_reading_c(plan, e) else e
    hit = usable(entries.get(plan_key(plan, arch)))
    if hit is not None or exact:
        return None if hit is None else hit.config
    gemm = _gemm(plan)

    def nearest(unary_ops: bool, twin: bool):
        family = families.get(family_key(plan, arch, unary_ops, twin), ())
        near = [(_distance(e.gemm, gemm), key, e) for key, e in family if _within_2x(e.gemm, gemm) and usable(e)]
        return min(near, key=lambda x: x[:2])[2].config if near else None

    def borrowed(twin: bool):
        hit = usable(entries.get(plan_key(plan, arch, twin=twin))) if twin else None
        config = hit.config if hit is not None else nearest(unary_ops=True, twin=twin)
        if config is None and plan.ops.has_unary_ops:
            hit = usable(entries.get(plan_key(plan, arch, unary_ops=False, twin=twin)))
            config = hit.config if hit is not None else nearest(unary_ops=False, twin=twin)
            if config is not None and loads_have_ops(plan):
                config = for_load_ops(plan, config)
        return config
    config = borrowed(twin=False)
    return config if config is not None or not _has_twin(plan) else borrowed(twin=True)


def _unfit_for_reading_c(plan, entry: Entry) -> bool:
    """Whether ``entry`` was tuned for a plan that did not read C, ``plan`` reads C, and the entry's kernel
    is one the heuristic keeps from plans that read C, which then take the heuristic's tile instead:
    - CTAs over several tiles (persistent: a producer warpgroup's, or mma.sync box tiles'): one CTA an SM
      waits for C in every epilogue (config._producer_tile). H100, fusion.py (beta = 1): TCCG #10/#11 with
      the entry of #10 (tuned with beta = 0) 0.0807/0.0752 -> 0.0928/0.0820 ms, with leaky ReLU on A, B and
      C 0.0866/0.0825 -> 0.1188/0.1128. The 768-row box tiles of #6/#8 were not measured reading C.
    - mma.sync warps of 64 x 64 over all of K in one tile (config._tile_config): reading C takes them past
      their registers. H100, fusion.py's plans without ops (beta = 1), session 39: #32/#38 with #32's
      entry 105.8/105.2 us against 81.9/81.1 on the heuristic's 128 x 192 (session 35)."""
    if not plan.beta_hint or entry.reads_c:
        return False
    return entry.config.persistent or wide_warps_over_one_k_tile(plan, entry.config)


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``<path>.lock`` (a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # closing releases the lock


def record(plan, arch, config: KernelConfig, ms: float) -> None:
    """Store ``config`` (measured at ``ms`` milliseconds) as ``plan``'s tuned configuration on ``arch`` in the
    user database. Safe with concurrent writers; raises OSError when the file can't be written."""
    from . import __version__
    from .kernel_cache import _atomic_write
    config.validate()
    arch = _arch(arch)
    entry = Entry(config, float(ms), datetime.date.today().isoformat(), __version__, family_key(plan, arch),
                  _gemm(plan), bool(plan.beta_hint))
    path = user_path(arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        entries = _read(path)   # fresh from disk under the lock: other writers' entries are kept
        entries[plan_key(plan, arch)] = entry
        data = {"version": FORMAT, "entries": {k: e.to_json() for k, e in sorted(entries.items())}}
        _atomic_write(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
