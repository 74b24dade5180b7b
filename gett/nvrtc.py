"""A small ctypes binding to NVRTC: CUDA C++ source in, SASS cubin (or PTX) and a resource report out.

No CUDA Python package is needed: the shared library comes from the ``nvidia-cuda-nvrtc`` wheel (or a
CUDA toolkit) and is loaded on first use. Every NVRTC status code is checked, every program is destroyed,
and a source NVRTC rejects is kept on disk so the :class:`~gett.errors.CompileError` can point at it.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import importlib.util
import os
import re
import site
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from gett.errors import CompileError, DeviceError

__all__ = [
    "CompileResult",
    "ResourceUsage",
    "compile_cubin",
    "compile_ptx",
    "cuda_include_dirs",
    "normalize_arch",
    "nvrtc_version",
    "parse_ptxas_log",
    "toolchain_fingerprint",
]

_INSTALL_HINT = 'pip install "nvidia-cuda-nvrtc==13.*"'


@dataclass(frozen=True)
class ResourceUsage:
    """What ptxas reported for one kernel: registers per thread and bytes of spills, stack, smem, cmem[0]."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int
    constant_bytes: int


@dataclass(frozen=True)
class CompileResult:
    """A compiled cubin, the full NVRTC log, and ptxas resources per kernel (keyed by mangled name)."""

    cubin: bytes
    log: str
    resources: dict[str, ResourceUsage]
    compile_seconds: float
    arch: str


# --------------------------------------------------------------------------------------------------
# Locating and loading the library
# --------------------------------------------------------------------------------------------------

_lib: ctypes.CDLL | None = None
_lib_path: str | None = None  # the candidate _lib was loaded from: a path, or a bare soname from find_library
_lib_lock = threading.Lock()


def _nvidia_dirs() -> list[Path]:
    """Directories of the ``nvidia`` namespace package (pip wheels), found without importing anything."""
    dirs: list[Path] = []
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        dirs.extend(Path(p) for p in spec.submodule_search_locations)
    # find_spec misses wheels outside sys.path (e.g. a user site not yet on the path), so look there too.
    roots = list(sys.path)
    try:
        roots += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # some embedded/virtualenv builds lack these
        pass
    dirs.extend(Path(r) / "nvidia" for r in roots if r)
    seen: set[Path] = set()
    out = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in seen:
            seen.add(d.resolve())
            out.append(d)
    return out


def _toolkit_roots() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    return [Path(r) for r in roots if r]


def _library_candidates() -> Iterator[str]:
    """Paths to try, best first: wheel (new then old layout), toolkit lib64/lib, then the linker's search.

    A generator, deduplicated: the linker's search (``ctypes.util.find_library``, which runs ``ldconfig``
    or a compiler in a subprocess, ~10 ms) only happens when no wheel or toolkit library loaded."""
    seen: set[str] = set()

    def fresh(cands):
        for c in cands:
            if c and c not in seen:
                seen.add(c)
                yield c

    for d in _nvidia_dirs():
        yield from fresh([str(d / "cu13" / "lib" / "libnvrtc.so.13")])
        # Newest soname first, so an old wheel next to a new one does not win.
        yield from fresh(sorted(glob.glob(str(d / "cu13" / "lib" / "libnvrtc.so*")), reverse=True))
        yield from fresh(sorted(glob.glob(str(d / "cuda_nvrtc" / "lib" / "libnvrtc.so*")), reverse=True))
    for root in _toolkit_roots():
        for sub in ("lib64", "lib"):
            yield from fresh(sorted(glob.glob(str(root / sub / "libnvrtc.so*")), reverse=True))
    import ctypes.util   # here, not at the top: it imports subprocess, which a warm start never needs

    yield from fresh([ctypes.util.find_library("nvrtc")])


def _declare(lib: ctypes.CDLL) -> None:
    """Give every NVRTC entry point we call its C signature (ctypes defaults to int args otherwise)."""
    c_int_p = ctypes.POINTER(ctypes.c_int)
    c_size_p = ctypes.POINTER(ctypes.c_size_t)
    prog_p = ctypes.POINTER(ctypes.c_void_p)
    sigs = {
        "nvrtcGetErrorString": ([ctypes.c_int], ctypes.c_char_p),
        "nvrtcVersion": ([c_int_p, c_int_p], ctypes.c_int),
        "nvrtcCreateProgram": (
            [prog_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
             ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)],
            ctypes.c_int,
        ),
        "nvrtcDestroyProgram": ([prog_p], ctypes.c_int),
        "nvrtcCompileProgram": ([ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)], ctypes.c_int),
        "nvrtcGetProgramLogSize": ([ctypes.c_void_p, c_size_p], ctypes.c_int),
        "nvrtcGetProgramLog": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
        "nvrtcGetCUBINSize": ([ctypes.c_void_p, c_size_p], ctypes.c_int),
        "nvrtcGetCUBIN": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
        "nvrtcGetPTXSize": ([ctypes.c_void_p, c_size_p], ctypes.c_int),
        "nvrtcGetPTX": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
    }
    for fname, (argtypes, restype) in sigs.items():
        fn = getattr(lib, fname)
        fn.argtypes = argtypes
        fn.restype = restype


def _load() -> ctypes.CDLL:
    """Load libnvrtc once per process; raise CompileError naming the package to install if it is missing."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried: list[str] = []
        for cand in _library_candidates():
            if os.path.isabs(cand) and not os.path.exists(cand):
                continue
            try:
                lib = ctypes.CDLL(cand)
                _declare(lib)
            except (OSError, AttributeError) as exc:  # wrong arch / not really NVRTC: try the next one
                tried.append(f"{cand} ({exc})")
                continue
            _lib, _lib_path = lib, cand
            return lib
        detail = ("; tried: " + ", ".join(tried)) if tried else ""
        raise CompileError(
            f"NVRTC (libnvrtc) was not found. Install it with: {_INSTALL_HINT} "
            f"(or point CUDA_HOME at a CUDA 13 toolkit){detail}"
        )


def _check(status: int, what: str) -> None:
    if status != 0:
        msg = _load().nvrtcGetErrorString(status)
        text = msg.decode(errors="replace") if msg else f"status {status}"
        raise CompileError(f"{what} failed: {text}")


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the loaded NVRTC, e.g. (13, 5)."""
    lib = _load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


_fingerprint: str | None = None


def toolchain_fingerprint() -> str:
    """Hash of what decides a cubin besides the source and options; computed once per process, and without
    loading NVRTC where its library file can be found, so a kernel-cache hit never needs NVRTC.

    It hashes the name (symlinks resolved), size and mtime of the NVRTC library file and of the
    ``libnvrtc-builtins`` beside it (an NVRTC of another version or patch release is another file), and
    the name, size and mtime of every file at the top of each :func:`cuda_include_dirs` directory
    (``cuda_fp16.h``, ``cuda_bf16.h`` and friends, which come in another wheel than NVRTC; subfolders such
    as ``cuda/std`` are left out, which keeps this at about a millisecond). Only when the library is known
    by the linker's search alone (no path) is NVRTC loaded and its version hashed instead. Only stat calls:
    reinstalling the same version changes the mtimes and so misses once, the safe way.
    """
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = _toolchain_fingerprint()
    return _fingerprint


def clear_toolchain_fingerprint() -> None:
    """Forget the memoised :func:`toolchain_fingerprint` (for tests, or after installing another NVRTC)."""
    global _fingerprint
    _fingerprint = None


def _library_file() -> str | None:
    """Path of the NVRTC library loaded, else of the one :func:`_load` tries first; None when only the
    linker's search (a bare soname) would find it."""
    if _lib_path is not None:
        return _lib_path if os.path.isabs(_lib_path) else None
    for cand in _library_candidates():
        if not os.path.isabs(cand):
            return None
        if os.path.exists(cand):
            return cand
    return None


def _stat_line(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path.name} -"
    return f"{path.name} {st.st_size} {st.st_mtime_ns}"


def _toolchain_fingerprint() -> str:
    lib = _library_file()
    if lib is not None:
        real = Path(os.path.realpath(lib))
        lines = [f"lib {Path(lib).name} -> " + _stat_line(real)]
        builtins = sorted(glob.glob(str(real.parent / "libnvrtc-builtins*")))
        lines.extend("lib " + _stat_line(Path(p)) for p in builtins)
    else:  # found by the linker's search: only NVRTC itself can say what it is
        major, minor = nvrtc_version()
        lines = [f"nvrtc {major}.{minor}", f"lib {_lib_path}"]
    for d in cuda_include_dirs():
        lines.append(f"include {d}")
        try:
            names = sorted(e.name for e in os.scandir(d) if e.is_file())
        except OSError:
            continue
        lines.extend("  " + _stat_line(Path(d) / name) for name in names)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def cuda_include_dirs() -> list[str]:
    """Existing directories with cuda_fp16.h / cuda_bf16.h / cuda_runtime.h: the wheel's, else a toolkit's."""
    wheel: list[str] = []
    for d in _nvidia_dirs():
        for sub in (("cu13", "include"), ("cuda_runtime", "include")):
            p = d.joinpath(*sub)
            if p.is_dir():
                wheel.append(str(p))
    if wheel:
        return list(dict.fromkeys(wheel))
    toolkit = [str(r / "include") for r in _toolkit_roots() if (r / "include").is_dir()]
    return list(dict.fromkeys(toolkit))


# --------------------------------------------------------------------------------------------------
# Architecture names
# --------------------------------------------------------------------------------------------------

_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{2,3})([af]?)$")


def normalize_arch(arch: str | int) -> str:
    """Canonical ``sm_XX[a|f]`` for "sm_90", "90", "sm_90a", "compute_90" or 90; DeviceError otherwise."""
    if isinstance(arch, bool) or not isinstance(arch, (str, int)):
        raise DeviceError(f"architecture must be like 'sm_90' or 90, got {arch!r}")
    m = _ARCH_RE.match(str(arch).strip().lower())
    if not m:
        raise DeviceError(f"architecture must be like 'sm_90', 'sm_90a' or 90, got {arch!r}")
    return f"sm_{m.group(1)}{m.group(2)}"


# --------------------------------------------------------------------------------------------------
# ptxas log parsing
# --------------------------------------------------------------------------------------------------

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CMEM0_RE = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas_log(log: str) -> dict[str, ResourceUsage]:
    """Resources of each *entry* function (kernel) in a ``--ptxas-options=-v`` log, keyed by mangled name.

    The NVRTC 13.5 format, per kernel::

        ptxas info    : Compiling entry function 'foo' for 'sm_90'
        ptxas info    : Function properties for foo
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem[, 360 bytes cmem[0]]

    ``cmem[0]`` is printed for sm_75/sm_80 but not for sm_90 and newer, where ``constant_bytes`` is 0.
    Non-entry (``__noinline__``) functions get "Function properties" too; they are not kernels and are left
    out. Missing fields count as 0.
    """
    entries: list[str] = []
    frames: dict[str, tuple[int, int, int]] = {}
    used: dict[str, tuple[int, int, int]] = {}
    current_entry: str | None = None  # kernel the next "Used N registers" line belongs to
    current_props: str | None = None  # function the next stack-frame line belongs to
    for line in log.splitlines():
        if m := _ENTRY_RE.search(line):
            current_entry = m.group(1)
            if current_entry not in entries:
                entries.append(current_entry)
        elif m := _PROPS_RE.search(line):
            current_props = m.group(1)
        elif (m := _FRAME_RE.search(line)) and current_props is not None:
            frames[current_props] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED_RE.search(line)) and current_entry is not None:
            smem = _SMEM_RE.search(line)
            cmem = _CMEM0_RE.search(line)
            used[current_entry] = (
                int(m.group(1)),
                int(smem.group(1)) if smem else 0,
                int(cmem.group(1)) if cmem else 0,
            )
    out: dict[str, ResourceUsage] = {}
    for name in entries:
        stack, spill_st, spill_ld = frames.get(name, (0, 0, 0))
        regs, smem, cmem = used.get(name, (0, 0, 0))
        out[name] = ResourceUsage(regs, spill_st, spill_ld, stack, smem, cmem)
    return out


# --------------------------------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------------------------------


def _keep_failed_source(source: str, name: str) -> str:
    """Save a rejected source under <cache_dir>/failed/ and return the path (or a note why it could not)."""
    from gett.kernel_cache import cache_dir  # lazy: kernel_cache imports this module

    safe = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(name)) or "gett_kernel.cu"
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    try:
        folder = cache_dir() / "failed"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{digest}_{safe}"
        # Atomic, so two processes failing on the same source never leave a torn file.
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the user may open it from another account/tool
        os.replace(tmp, path)
        return str(path)
    except OSError as exc:
        return f"<not saved: {exc}>"


def _program_log(lib: ctypes.CDLL, prog: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    _check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
    buf = ctypes.create_string_buffer(max(size.value, 1))
    _check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.value.decode(errors="replace")


def _compile(
    source: str, name: str, opts: list[str], want: str, arch: str
) -> tuple[bytes, str, float]:
    """Run one NVRTC program; return (cubin or PTX bytes, log, seconds). ``want`` is "cubin" or "ptx"."""
    lib = _load()
    prog = ctypes.c_void_p()
    _check(
        lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
        "nvrtcCreateProgram",
    )
    try:
        encoded = [o.encode() for o in opts]
        argv = (ctypes.c_char_p * len(encoded))(*encoded)
        t0 = time.perf_counter()
        status = lib.nvrtcCompileProgram(prog, len(encoded), argv)
        seconds = time.perf_counter() - t0
        log = _program_log(lib, prog)  # read even on success: it carries the ptxas report
        if status != 0:
            err = lib.nvrtcGetErrorString(status)
            err_text = err.decode(errors="replace") if err else f"status {status}"
            kept = _keep_failed_source(source, name)
            raise CompileError(
                f"NVRTC could not compile {name} for {arch} ({err_text}).\n"
                f"Source kept at: {kept}\n"
                f"Options: {' '.join(opts)}\n"
                f"NVRTC log:\n{log}"
            )
        get_size, get = (
            (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if want == "cubin" else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
        )
        size = ctypes.c_size_t()
        _check(get_size(prog, ctypes.byref(size)), f"nvrtcGet{want.upper()}Size")
        if size.value == 0:
            raise CompileError(f"NVRTC produced no {want} for {name} ({arch}); log:\n{log}")
        buf = ctypes.create_string_buffer(size.value)
        _check(get(prog, buf), f"nvrtcGet{want.upper()}")
        return buf.raw[: size.value], log, seconds
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))  # status ignored: nothing useful to do if it fails


def _options(
    arch_flag: str, options: Sequence[str], include_dirs: Sequence[str], ptxas_verbose: bool
) -> list[str]:
    opts = [f"--gpu-architecture={arch_flag}"]
    if not any(o.startswith(("-std=", "--std=")) for o in options):  # let the caller pick another standard
        opts.append("-std=c++17")
    if ptxas_verbose:
        opts.append("--ptxas-options=-v")
    # The caller's headers first, so they can shadow the toolkit's.
    opts.extend(f"-I{d}" for d in list(include_dirs) + cuda_include_dirs())
    opts.extend(options)
    return opts


def compile_cubin(
    source: str,
    *,
    arch: str | int = "sm_90",
    name: str = "gett_kernel.cu",
    options: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
) -> CompileResult:
    """Compile CUDA C++ to a SASS cubin (``--gpu-architecture=sm_XX``, never PTX) with ptxas resources.

    Raises CompileError (NVRTC log and the path of the kept source in the message) when NVRTC rejects the
    source or cannot be loaded, and DeviceError for an arch that is not like "sm_90"/"90"/90.
    """
    sm = normalize_arch(arch)
    opts = _options(sm, options, include_dirs, ptxas_verbose=True)
    cubin, log, seconds = _compile(source, name, opts, "cubin", sm)
    return CompileResult(cubin=cubin, log=log, resources=parse_ptxas_log(log), compile_seconds=seconds, arch=sm)


def compile_ptx(
    source: str,
    *,
    arch: str | int = "sm_90",
    name: str = "gett_kernel.cu",
    options: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
) -> str:
    """Compile CUDA C++ to PTX text for ``compute_XX`` (for inspecting generated code); errors as compile_cubin."""
    sm = normalize_arch(arch)
    compute = "compute_" + sm[len("sm_"):]
    opts = _options(compute, options, include_dirs, ptxas_verbose=False)
    ptx, _log, _seconds = _compile(source, name, opts, "ptx", compute)
    return ptx.rstrip(b"\0").decode()
