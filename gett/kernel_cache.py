"""Compiled cubins that survive the process: a content-addressed disk cache in front of NVRTC.

Layout under :func:`cache_dir`::

    kernels/<key>.cubin   the SASS cubin
    kernels/<key>.json    resources, compile time, arch, NVRTC version, toolchain, cubin size and sha256
    failed/<sha[:16]>_<name>   sources NVRTC rejected (written by gett.nvrtc)

Both files are written to a temp file in the same directory and ``os.replace``d, cubin first and json last,
so a json present means its cubin is complete; concurrent processes compiling the same kernel only ever
see whole files. A pair that does not check out is warned about and recompiled, never a crash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gett import nvrtc
from gett.nvrtc import ResourceUsage

__all__ = ["CachedKernel", "cache_dir", "clear_memory_cache", "compile_cached", "kernel_key"]

# Bump when the json layout or what goes into the key changes, so old entries are simply not found.
# 2: the key holds nvrtc.toolchain_fingerprint() (NVRTC's library file, the CUDA headers) instead of NVRTC's
#    (major, minor) version, so a patch release or other CUDA headers miss, and a hit needs no NVRTC loaded.
_FORMAT = 2

_memo: dict[str, "CachedKernel"] = {}
_memo_lock = threading.Lock()


@dataclass(frozen=True)
class CachedKernel:
    """A cubin on disk (``path``) with its ptxas report; ``from_cache`` is False only when this call compiled."""

    path: Path
    resources: dict[str, ResourceUsage]
    compile_seconds: float
    from_cache: bool
    arch: str
    key: str


def cache_dir() -> Path:
    """``$GETT_CACHE_DIR``, else ``$XDG_CACHE_HOME/gett``, else ``~/.cache/gett``; created if missing."""
    explicit = os.environ.get("GETT_CACHE_DIR")
    if explicit:
        path = Path(explicit).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        path = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "gett"
    path.mkdir(parents=True, exist_ok=True)
    return path


def clear_memory_cache() -> None:
    """Forget the in-process memo, so the next compile_cached call looks at the disk again (for tests)."""
    with _memo_lock:
        _memo.clear()


def kernel_key(
    source: str,
    *,
    arch: str | int,
    name: str = "gett_kernel.cu",
    options: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
) -> str:
    """sha256 hex of everything that determines the cubin: source, arch, name, options, include paths, NVRTC.

    Header *contents* are not read here: :func:`gett.kernel.kernel_source` puts the digest of gett's own
    headers (``kernels/*.cuh``) in the first line of ``source``, and :func:`gett.nvrtc.toolchain_fingerprint`
    (NVRTC's library file, the CUDA headers) stands for NVRTC. Both are computed once per process, so a
    look-up hashes the source once, reads no header and does not load NVRTC.
    """
    ident = {
        "format": _FORMAT,
        "source": source,
        "arch": nvrtc.normalize_arch(arch),
        "name": name,  # ends up in line info and error messages
        "options": list(options),
        "include_dirs": [str(d) for d in include_dirs],
        "toolchain": nvrtc.toolchain_fingerprint(),   # NVRTC's library file and the CUDA headers
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory and rename, so readers never see a partial file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a shared GETT_CACHE_DIR should stay readable
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _load_entry(cubin_path: Path, json_path: Path, key: str) -> CachedKernel | None:
    """The cached kernel if its json/cubin pair is complete and consistent; None (after a warning) if not."""
    try:
        meta = json.loads(json_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None  # plain miss (or another process has not finished): no warning
    except (OSError, ValueError) as exc:
        warnings.warn(f"gett: ignoring unreadable kernel cache entry {json_path}: {exc}", stacklevel=3)
        return None
    try:
        cubin = cubin_path.read_bytes()
        if meta["format"] != _FORMAT or meta["key"] != key:
            raise ValueError("entry belongs to another key or cache format")
        if len(cubin) != meta["cubin_size"] or hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"]:
            raise ValueError("cubin does not match its json (size or sha256)")
        resources = {k: ResourceUsage(**v) for k, v in meta["resources"].items()}
        return CachedKernel(
            path=cubin_path,
            resources=resources,
            compile_seconds=float(meta["compile_seconds"]),
            from_cache=True,
            arch=str(meta["arch"]),
            key=key,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        warnings.warn(f"gett: ignoring corrupt kernel cache entry {json_path}: {exc!r}; recompiling", stacklevel=3)
        return None


def compile_cached(
    source: str,
    *,
    arch: str | int,
    name: str = "gett_kernel.cu",
    options: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
) -> CachedKernel:
    """Compile ``source`` to a cubin with :func:`gett.nvrtc.compile_cubin`, unless memo or disk has it.

    Order: in-process memo (no disk access), then ``kernels/<key>.json`` + ``.cubin``, then NVRTC (result
    written atomically). Raises CompileError exactly as compile_cubin does; failures are not cached.
    """
    key = kernel_key(source, arch=arch, name=name, options=options, include_dirs=include_dirs)
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None:
        return hit if hit.from_cache else dataclasses.replace(hit, from_cache=True)

    folder = cache_dir() / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    cubin_path, json_path = folder / f"{key}.cubin", folder / f"{key}.json"

    kernel = _load_entry(cubin_path, json_path, key)
    if kernel is None:
        result = nvrtc.compile_cubin(source, arch=arch, name=name, options=options, include_dirs=include_dirs)
        meta = {
            "format": _FORMAT,
            "key": key,
            "arch": result.arch,
            "nvrtc": list(nvrtc.nvrtc_version()),
            "toolchain": nvrtc.toolchain_fingerprint(),
            "compile_seconds": result.compile_seconds,
            "cubin_size": len(result.cubin),
            "cubin_sha256": hashlib.sha256(result.cubin).hexdigest(),
            "resources": {k: dataclasses.asdict(v) for k, v in result.resources.items()},
            "name": name,
            "options": list(options),
            "log": result.log,
        }
        # Cubin before json: the json is the commit marker readers look for.
        _atomic_write(cubin_path, result.cubin)
        _atomic_write(json_path, json.dumps(meta, indent=1, sort_keys=True).encode())
        kernel = CachedKernel(
            path=cubin_path,
            resources=result.resources,
            compile_seconds=result.compile_seconds,
            from_cache=False,
            arch=result.arch,
            key=key,
        )
    with _memo_lock:
        _memo[key] = kernel
    return kernel
