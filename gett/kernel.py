"""build_kernel: render, compile (NVRTC → cubin, disk-cached) and describe a plan's kernel.

Compiling needs NVRTC but no GPU, so kernels can be built ahead for a named architecture.
Loading and launching is in :mod:`gett.launch`.
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .codegen import KERNEL_NAME, ctas_per_sm, render_kernel
from .config import KernelConfig, default_config, has_wgmma
from .errors import DeviceError
from .nvrtc import ResourceUsage
from .staging import COPY_KERNEL_NAME, render_copy
from .tiling import tile_plan

# Dynamic shared memory a CTA may opt into, per compute capability (CUDA programming guide).
_MAX_SHARED = {80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024,
               100: 227 * 1024, 120: 99 * 1024}


def kernels_dir() -> Path:
    """The folder holding the device headers: ``gett/kernels`` in a wheel, ``kernels/`` in the repo."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / "gett.cuh").is_file():
            return candidate
    raise FileNotFoundError("gett's device headers (gett.cuh) are missing from the installation")


@lru_cache(maxsize=1)
def headers_digest() -> str:
    """Hash of every device header: part of each kernel's source, so the disk cache never serves a
    cubin built from older headers."""
    h = hashlib.sha256()
    for path in sorted(kernels_dir().glob("*.cuh")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def arch_number(arch: str) -> int:
    digits = "".join(ch for ch in str(arch) if ch.isdigit())
    if not digits:
        raise DeviceError(f"cannot read an architecture from {arch!r}; use e.g. 'sm_90'")
    return int(digits)


def current_arch() -> str:
    """``sm_XY`` of the current CUDA device; raises DeviceError without one."""
    try:
        import cupy
        major, minor = cupy.cuda.Device().compute_capability[:1], cupy.cuda.Device().compute_capability[1:]
    except Exception as e:  # no CuPy, no driver, or no device
        raise DeviceError(f"no CUDA device is available ({type(e).__name__}: {e}); pass device_arch= to "
                          f"compile ahead, or use numpy arrays for the reference executor") from None
    return f"sm_{major}{minor}"


def current_model(arch: str) -> str | None:
    """The model (:func:`gett.plan_db.model_of`) of the current CUDA device where its architecture is ``arch``:
    whose shipped plan database goes over the architecture's; None otherwise, or without a device."""
    try:
        import cupy
        device = cupy.cuda.Device().id
    except Exception:  # no CuPy, no driver, or no device
        return None
    return _device_model(device, arch_number(arch))


@lru_cache(maxsize=None)
def _device_model(device: int, arch: int) -> str | None:
    from .plan_db import model_of
    try:
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(device)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        matches = props["major"] * 10 + props["minor"] == arch
    except Exception:  # a CuPy without a driver behind it
        return None
    return model_of(name) if matches else None


def compile_arch(arch: str, cfg: KernelConfig) -> str:
    """The target NVRTC compiles for: wgmma exists only on sm_90a, whose cubins run on every sm_90 GPU."""
    if cfg.math == "wgmma":
        if not has_wgmma(arch):
            raise DeviceError(f"configuration {cfg.key()} uses wgmma, which only sm_90 (Hopper) has; got {arch}")
        return "sm_90a"
    return arch


@dataclass(frozen=True)
class KernelReport:
    """What the compiler made of a kernel: resources per thread and CTA, and how long it took."""
    arch: str
    config: str
    threads: int
    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int       # dynamic shared memory per CTA
    compile_seconds: float
    from_cache: bool

    def __str__(self) -> str:
        return (f"{self.arch} {self.config}: {self.threads} threads, {self.registers} registers, "
                f"spills {self.spill_stores}/{self.spill_loads} B, stack {self.stack_bytes} B, "
                f"smem {self.shared_bytes} B, compiled in {self.compile_seconds:.2f} s"
                f"{' (cache)' if self.from_cache else ''}")


@dataclass(frozen=True)
class CompiledKernel:
    source: str
    cubin_path: Path
    config: KernelConfig
    shared_bytes: int
    threads: int
    report: KernelReport
    tma: tuple | None = None   # the views of the tensor maps the kernel takes (gett.codegen.tma_views)
    name: str = KERNEL_NAME


@dataclass(frozen=True)
class KernelSource:
    """A rendered translation unit, ready for NVRTC: everything compiling needs, and nothing of the plan."""
    source: str
    name: str
    config: KernelConfig
    shared_bytes: int
    threads: int
    tma: tuple | None = None   # see CompiledKernel


@dataclass(frozen=True)
class CompiledCopy:
    """A staging copy kernel (:mod:`gett.staging`), compiled, with its launch shape."""
    cubin_path: Path
    grid: tuple
    block: tuple
    name: str = COPY_KERNEL_NAME
    shared_bytes: int = 0   # static only


def build_copy(staging, arch: str) -> CompiledCopy:
    """Compile the copy kernel of one :class:`gett.staging.Staging` for ``arch`` (disk-cached)."""
    from .kernel_cache import compile_cached
    copy = render_copy(staging)
    cached = compile_cached(f"// device headers {headers_digest()}\n{copy.source}", arch=arch,
                            name="gett_stage_copy.cu", include_dirs=[str(kernels_dir())])
    return CompiledCopy(cached.path, copy.grid, copy.block)


# Spill stores (bytes a thread) a kernel capped for several CTAs per SM may keep: measured faster than
# the uncapped kernel without them (H100, TCCG K = 24, NVRTC 13.0: #31 57 -> 47 us with 32 bytes, #42
# and #48 56 -> 46 with 80; #45 56 -> 63 with 80, the one loss), as they are read once per tile.
CAPPED_SPILL_BYTES = 128


def build_kernel(plan, arch: str, config: KernelConfig = None) -> CompiledKernel:
    """Compile ``plan``'s kernel for ``arch`` (see :func:`kernel_source` for the configuration chosen).
    Where the kernel spills, it is rebuilt asking less of the registers until one does not (or nothing
    is left to relax): first without the cap for several CTAs per SM (:func:`gett.codegen.ctas_per_sm`;
    a capped kernel may keep up to CAPPED_SPILL_BYTES of spill stores), then also with ops applied in
    shared memory instead of staging an operand through registers (:func:`gett.codegen.operand_layouts`).
    Unknown resources (-1: NVRTC answered from the CUDA driver's compute cache, which skips ptxas and its
    report) count as no spills."""
    kernel = None
    for relaxed in ({}, {"cap_registers": False}, {"cap_registers": False, "stage_ops": False}):
        ks = kernel_source(plan, arch, config, **relaxed)
        if kernel is not None and ks.source == kernel.source:
            continue
        kernel = compile_source(ks, arch)
        allowed = CAPPED_SPILL_BYTES if not relaxed and ctas_per_sm(plan, ks.config) > 1 else 0
        if max(kernel.report.spill_stores, kernel.report.spill_loads) <= allowed:
            break
    return kernel


def kernel_source(plan, arch: str, config: KernelConfig = None, stage_ops: bool = True,
                  cap_registers: bool = True) -> KernelSource:
    """Render ``plan``'s kernel for ``arch`` with the first of: ``config``, the plan's override, the plan
    database's entry (:func:`gett.plan_db.lookup`; the current device's model's where it is an ``arch``
    GPU), the heuristic; lowering the pipeline depth until the shared memory fits the architecture
    (``stage_ops``, ``cap_registers``: see :func:`gett.codegen.render_kernel`)."""
    from .plan_db import lookup
    tuned = None if config or plan.config_override else lookup(plan, arch, model=current_model(arch))
    cfg = config or plan.config_override or tuned or default_config(plan, arch)
    limit = _MAX_SHARED.get(arch_number(arch), 99 * 1024)
    tiled = tile_plan(plan, cfg)
    try:
        source, smem, threads, tma = render_kernel(tiled, cfg, stage_ops, cap_registers, arch)
    except ValueError as e:   # an entry of a near-identical shape this plan's layouts can't take
        if not tuned:
            raise
        warnings.warn(f"gett: tuned configuration {tuned.key()} does not apply ({e}); using the heuristic")
        return kernel_source(plan, arch, default_config(plan, arch), stage_ops, cap_registers)
    while smem > limit and cfg.stages > cfg.min_stages:
        cfg = KernelConfig(**{**cfg.__dict__, "stages": cfg.stages - 1})
        source, smem, threads, tma = render_kernel(tiled, cfg, stage_ops, cap_registers, arch)
    if smem > limit and tuned:   # a database entry that doesn't fit here must not break the plan
        warnings.warn(f"gett: tuned configuration {tuned.key()} does not fit {arch}; using the heuristic")
        return kernel_source(plan, arch, default_config(plan, arch), stage_ops, cap_registers)
    if smem > limit:
        raise DeviceError(f"kernel {cfg.key()} needs {smem} B of shared memory, {arch} allows {limit}")
    return KernelSource(f"// device headers {headers_digest()}\n{source}", f"gett_{cfg.key()}.cu", cfg, smem,
                        threads, tma)


def compile_source(ks: KernelSource, arch: str) -> CompiledKernel:
    """NVRTC (through the disk cache) and the resource report of a rendered kernel."""
    from .kernel_cache import compile_cached
    cached = compile_cached(ks.source, arch=compile_arch(arch, ks.config), name=ks.name,
                            include_dirs=[str(kernels_dir())])
    cfg, smem, threads, source = ks.config, ks.shared_bytes, ks.threads, ks.source
    usage = cached.resources.get(KERNEL_NAME)
    if usage is None:   # no ptxas report (e.g. a hit in the driver's compute cache): resources unknown (-1)
        usage = ResourceUsage(-1, -1, -1, -1, 0, 0)
    report = KernelReport(cached.arch, cfg.key(), threads, usage.registers, usage.spill_stores,
                          usage.spill_loads, usage.stack_bytes, smem + usage.shared_bytes,
                          cached.compile_seconds, cached.from_cache)
    return CompiledKernel(source, cached.path, cfg, smem, threads, report, ks.tma)
