"""The element types gett knows, and which (data, compute) combinations it implements.

A :class:`DType` names a storage type once for every layer: numpy (reference executor), CUDA C++ (the
generated kernel) and the short names users pass (``"f16"``, ``"float32"``, ``numpy.float64``, ...).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DTypeError


@dataclass(frozen=True)
class DType:
    name: str            # short canonical name: "f16", "f32", "c64", "i32", ...
    itemsize: int        # bytes
    kind: str            # "f" real float, "c" complex, "i" signed integer
    ctype: str           # CUDA C++ storage type in generated kernels
    numpy_name: str      # numpy dtype name, or "" where numpy has none (bf16)

    @property
    def numpy(self) -> np.dtype:
        if not self.numpy_name:
            raise DTypeError(f"dtype {self.name} has no numpy equivalent; use CuPy or PyTorch arrays")
        return np.dtype(self.numpy_name)

    def __repr__(self) -> str:
        return self.name


F16 = DType("f16", 2, "f", "__half", "float16")
BF16 = DType("bf16", 2, "f", "__nv_bfloat16", "")
F32 = DType("f32", 4, "f", "float", "float32")
F64 = DType("f64", 8, "f", "double", "float64")
C64 = DType("c64", 8, "c", "gett::complex<float>", "complex64")
C128 = DType("c128", 16, "c", "gett::complex<double>", "complex128")
I32 = DType("i32", 4, "i", "int", "int32")
I64 = DType("i64", 8, "i", "long long", "int64")

ALL = (F16, BF16, F32, F64, C64, C128, I32, I64)
_BY_NAME = {d.name: d for d in ALL}
_ALIASES = {
    "float16": F16, "half": F16, "bfloat16": BF16, "float32": F32, "float64": F64,
    "double": F64, "complex64": C64, "complex128": C128, "int32": I32, "int64": I64,
}


def as_dtype(value) -> DType:
    """Map a user spelling (DType, short name, numpy/CuPy/torch dtype) to a :class:`DType`."""
    if isinstance(value, DType):
        return value
    text = str(value)
    text = text[len("torch."):] if text.startswith("torch.") else text
    if text in _BY_NAME:
        return _BY_NAME[text]
    if text in _ALIASES:
        return _ALIASES[text]
    try:
        name = np.dtype(value).name
    except TypeError:
        name = None
    if name in _ALIASES:
        return _ALIASES[name]
    raise DTypeError(f"unsupported dtype {value!r}; gett supports {', '.join(d.name for d in ALL)}")


@dataclass(frozen=True)
class ComputeType:
    """How products are formed and summed.

    ``accumulator`` is the type partial sums live in; ``mma`` names the tensor-core instruction family
    (or "" for the SIMT path of plain multiply-adds).
    """
    name: str
    accumulator: DType
    mma: str

    def __repr__(self) -> str:
        return self.name


COMPUTE_TYPES = {
    "f32": ComputeType("f32", F32, ""),            # exact f32 SIMT (or f32 accumulation of f16/bf16 MMA)
    "tf32": ComputeType("tf32", F32, "tf32"),
    "3xtf32": ComputeType("3xtf32", F32, "3xtf32"),
    "f64": ComputeType("f64", F64, ""),
    "c64": ComputeType("c64", C64, ""),
    "c128": ComputeType("c128", C128, ""),
    "i32": ComputeType("i32", I32, ""),
    "i64": ComputeType("i64", I64, ""),
}

# data dtype -> (default compute type, compute types allowed, output dtypes allowed)
_RULES = {
    "f16": ("f32", ("f32",), ("f16", "f32")),
    "bf16": ("f32", ("f32",), ("bf16", "f32")),
    "f32": ("f32", ("f32", "tf32", "3xtf32"), ("f32",)),
    "f64": ("f64", ("f64",), ("f64",)),
    "c64": ("c64", ("c64",), ("c64",)),
    "c128": ("c128", ("c128",), ("c128",)),
    "i32": ("i32", ("i32",), ("i32",)),
    "i64": ("i64", ("i64",), ("i64",)),
}


def resolve_compute_type(a: DType, b: DType, c: DType, d: DType, compute_type=None) -> ComputeType:
    """Check a dtype combination and return the compute type, raising DTypeError naming the culprit."""
    if a != b:
        raise DTypeError(f"A and B must have the same dtype, got A {a.name} and B {b.name}")
    if c != d:
        raise DTypeError(f"C and D must have the same dtype, got C {c.name} and D {d.name}")
    default, allowed, outputs = _RULES[a.name]
    if c.name not in outputs:
        raise DTypeError(
            f"output dtype {c.name} is not supported with {a.name} inputs (supported: {', '.join(outputs)})")
    if compute_type is None:
        name = default
    else:
        name = compute_type.name if isinstance(compute_type, ComputeType) else str(compute_type)
        name = {"float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128",
                "int32": "i32", "int64": "i64"}.get(name, name)
    if name not in allowed:
        raise DTypeError(
            f"compute_type {name!r} is not supported for {a.name} inputs (supported: {', '.join(allowed)})")
    return COMPUTE_TYPES[name]
