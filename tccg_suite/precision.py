"""The benchmark's precisions: data type, compute type per library, and correctness tolerance.

``f16`` and ``bf16`` mean 16-bit data for A, B, C and D with f32 accumulation; ``tf32`` means f32 data
multiplied on TF32 tensor cores; ``f32`` is exact f32; ``f64`` is f64 throughout.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy


@dataclass(frozen=True)
class Precision:
    """How one ``--dtype`` choice is run by every implementation."""

    name: str
    dtype_name: str  # numpy name of the data of A, B, C and D
    gett_compute: str | None  # compute_type passed to gett.plan_contraction (None: gett's default)
    cutensor_compute: str  # name of cuTENSOR's global compute descriptor
    tolerance: float  # largest relative Frobenius error accepted against the f64 reference
    description: str

    @property
    def dtype(self) -> numpy.dtype:
        """The numpy dtype of the data; bfloat16 needs the ``ml_dtypes`` package (as CuPy does)."""
        if self.dtype_name == "bfloat16":
            try:
                import ml_dtypes
            except ImportError:
                raise RuntimeError("--dtype bf16 needs the ml_dtypes package (CuPy's bfloat16)") from None
            return numpy.dtype(ml_dtypes.bfloat16)
        return numpy.dtype(self.dtype_name)

    @property
    def itemsize(self) -> int:
        """Bytes per element of the data."""
        return {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[self.dtype_name]


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("f16", "float16", None, "CUTENSOR_COMPUTE_DESC_32F", 5e-3, "f16 data, f32 accumulation"),
        Precision("bf16", "bfloat16", None, "CUTENSOR_COMPUTE_DESC_32F", 1e-2, "bf16 data, f32 accumulation"),
        Precision("tf32", "float32", "tf32", "CUTENSOR_COMPUTE_DESC_TF32", 5e-3, "f32 data, TF32 tensor cores"),
        Precision("f32", "float32", None, "CUTENSOR_COMPUTE_DESC_32F", 1e-5, "f32 data, exact f32"),
        Precision("f64", "float64", None, "CUTENSOR_COMPUTE_DESC_64F", 1e-12, "f64 data, f64 compute"),
    )
}


@contextmanager
def library_math(precision: Precision) -> Iterator[None]:
    """Set CuPy's and (if installed) PyTorch's cuBLAS math to ``precision`` for the duration: TF32
    only for tf32, f32 accumulation for f16 and f32 data whatever ``CUPY_TF32`` says, no reduced
    precision reductions in PyTorch. Restores the previous settings on exit."""
    from cupy._core import _routines_linalg as cupy_linalg

    cupy_modes = {
        "f16": (numpy.float16, cupy_linalg.COMPUTE_TYPE_FP32),
        "f32": (numpy.float32, cupy_linalg.COMPUTE_TYPE_FP32),
        "tf32": (numpy.float32, cupy_linalg.COMPUTE_TYPE_TF32),
        "f64": (numpy.float64, cupy_linalg.COMPUTE_TYPE_DEFAULT),
    }
    restore = []
    if precision.name in cupy_modes:  # CuPy keeps no compute-type setting for bfloat16
        dtype, mode = cupy_modes[precision.name]
        previous = cupy_linalg.get_compute_type(dtype)
        cupy_linalg.set_compute_type(dtype, mode)
        restore.append(lambda: cupy_linalg.set_compute_type(dtype, previous))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        matmul = torch.backends.cuda.matmul
        wanted = {
            "allow_tf32": precision.name == "tf32",
            "allow_fp16_reduced_precision_reduction": False,
            "allow_bf16_reduced_precision_reduction": False,
        }
        for attr, value in wanted.items():
            if hasattr(matmul, attr):  # older PyTorch lacks some of these switches
                old = getattr(matmul, attr)
                setattr(matmul, attr, value)
                restore.append(lambda attr=attr, old=old: setattr(matmul, attr, old))
    try:
        yield
    finally:
        for undo in reversed(restore):
            undo()
