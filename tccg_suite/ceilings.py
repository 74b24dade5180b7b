"""The machine's ceilings, measured: device memory bandwidth and the precision's GEMM rate.

Roofline time of a contraction = max(flops / GEMM rate, minimal bytes / copy bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

import cupy

from .data import random_tensor
from .precision import Precision, library_math
from .report import first_line
from .timing import median_ms


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings: bytes/s (read + written) of a device copy, flop/s of a large GEMM."""

    bandwidth: float
    peak_flops: float
    gemm_library: str  # which library's GEMM gave peak_flops

    def roofline_ms(self, flops: int, nbytes: int) -> float:
        """Milliseconds a kernel at the ceilings would take: the slower of compute and traffic."""
        return max(flops / self.peak_flops, nbytes / self.bandwidth) * 1e3


def copy_bandwidth(nbytes: int = 1 << 30, runs: int = 20) -> float:
    """Bytes/s of a device-to-device copy of ``nbytes``, counting bytes read plus bytes written."""
    src = cupy.ones(nbytes, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    ms = median_ms(lambda i: dst.data.copy_from_device_async(src.data, nbytes), runs=runs, warmup=3)
    return 2 * nbytes / (ms * 1e-3)


def _cupy_gemm(precision: Precision, n: int, runs: int) -> float:
    rng = cupy.random.default_rng(0)
    # all row-major, so that cuBLAS writes straight into c without a layout copy
    a, b = (cupy.ascontiguousarray(random_tensor(rng, (n, n), precision.dtype)) for _ in range(2))
    c = cupy.empty((n, n), dtype=precision.dtype)
    return median_ms(lambda i: cupy.matmul(a, b, out=c), runs=runs, warmup=3)


def _torch_gemm(precision: Precision, n: int, runs: int) -> float:
    import torch

    dtype = getattr(torch, precision.dtype_name)
    a, b = (torch.rand((n, n), device="cuda", dtype=dtype) * 2 - 1 for _ in range(2))
    c = torch.empty((n, n), device="cuda", dtype=dtype)
    return median_ms(lambda i: torch.matmul(a, b, out=c), runs=runs, warmup=3)


def gemm_rate(precision: Precision, n: int = 8192, runs: int = 20) -> tuple[float, str]:
    """Flop/s of an ``n``³ GEMM through cuBLAS in ``precision`` (TF32 only for tf32, f32 accumulation
    for 16-bit data), and the library used: CuPy, else PyTorch (e.g. for bf16 where CuPy's matmul
    does not run). RuntimeError naming both failures when neither runs."""
    failures = []
    with library_math(precision):
        for library, gemm in (("cupy", _cupy_gemm), ("torch", _torch_gemm)):
            try:
                ms = gemm(precision, n, runs)
            except Exception as exc:  # try the next library
                failures.append(f"{library}: {first_line(exc)}")
                continue
            return 2 * n**3 / (ms * 1e-3), library
    raise RuntimeError(f"no GEMM ran in {precision.name} ({'; '.join(failures)})")


def measure(precision: Precision) -> Ceilings:
    """Both ceilings for ``precision`` on the current device."""
    bandwidth = copy_bandwidth()
    peak, library = gemm_rate(precision)
    cupy.get_default_memory_pool().free_all_blocks()
    return Ceilings(bandwidth, peak, library)
