"""gett — tensor contractions on NVIDIA GPUs with generated GETT kernels.

Two steps, as in cuTENSOR::

    plan = gett.plan_contraction(A, "ecbfa", B, "fd", C, "abcde")   # once: analysis, tables, kernel
    gett.contract(plan, 1.0, A, B, 0.0, C, D)                     # every call: one kernel launch

or numpy's einsum, planned and cached per signature: ``gett.einsum("ij,jk->ik", A, B)``.

CuPy and PyTorch arrays run on the GPU; numpy arrays run the reference executor (for tests and
development without a GPU — not a fast path).
"""
from . import ops
from .contract import contract
from .descriptor import TensorDescriptor
from .dtypes import DType
from .einsum import einsum, tensordot, transpose
from .errors import (CompileError, DeviceError, DTypeError, ExtentMismatchError, GettError, ModeError,
                     OutputNotWritableError, PlanMismatchError, StrideError, UnsupportedOperation)
from .layout import IndexTable
from .plan import ContractionPlan, clear_plan_cache, plan_contraction
from .plan_cache import cache_info, clear_cache, set_cache_size

__version__ = "0.1.0"

__all__ = [
    "plan_contraction", "contract", "einsum", "tensordot", "transpose", "cache_info", "clear_cache",
    "set_cache_size", "ops", "ContractionPlan", "TensorDescriptor", "IndexTable", "DType",
    "clear_plan_cache", "GettError", "ModeError", "ExtentMismatchError", "StrideError", "DTypeError",
    "PlanMismatchError", "DeviceError", "OutputNotWritableError", "UnsupportedOperation", "CompileError",
]
