"""TensorDescriptor: what a plan needs to know about one tensor, without its data."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dtypes import DType, as_dtype
from .errors import ModeError, StrideError

# CuPy and PyTorch allocations are 256-byte aligned; a descriptor built by hand assumes the same.
DEFAULT_ALIGNMENT = 256


@dataclass(frozen=True)
class TensorDescriptor:
    """Shape, strides (in elements, may be negative or 0), dtype, pointer alignment and an optional op.

    ``op`` is an elementwise function (a Python lambda, a named op from :mod:`gett.ops`) applied to each
    element when it is read (A, B, C); it is part of the plan's signature. ``alignment`` is the largest
    power of two (≤ 256) that divides the data pointer in bytes; it decides whether wide vector loads
    are legal, so arrays passed to :func:`gett.contract` must be at least this aligned.
    """
    shape: tuple
    strides: tuple
    dtype: DType
    op: Any = None
    alignment: int = DEFAULT_ALIGNMENT

    def __init__(self, shape, strides=None, dtype="f32", op=None, alignment=DEFAULT_ALIGNMENT):
        shape = tuple(int(e) for e in shape)
        if any(e < 0 for e in shape):
            raise ModeError(f"shape {shape} has a negative extent")
        if strides is None:
            strides, step = [], 1
            for e in reversed(shape):   # row-major (C order), like numpy's default
                strides.append(step)
                step *= max(e, 1)
            strides = tuple(reversed(strides))
        if len(strides) != len(shape):
            raise StrideError(f"{len(strides)} strides given for a shape of {len(shape)} dimensions")
        # A dimension of extent 0 or 1 is never stepped along: its stride carries no meaning.
        strides = tuple(int(s) if e > 1 else 0 for s, e in zip(strides, shape))
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "dtype", as_dtype(dtype))
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "alignment", min(int(alignment), DEFAULT_ALIGNMENT))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for e in self.shape:
            n *= e
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def offset_range(self) -> tuple:
        """(lowest, highest) element offset from element (0, ..., 0): negative strides reach below it."""
        lo = sum(min(0, (e - 1) * s) for e, s in zip(self.shape, self.strides))
        hi = sum(max(0, (e - 1) * s) for e, s in zip(self.shape, self.strides))
        return lo, hi

    @classmethod
    def from_array(cls, array, op=None) -> "TensorDescriptor":
        """Describe a numpy, CuPy or PyTorch array (or anything with ``__cuda_array_interface__``)."""
        from .arrays import describe
        info = describe(array)
        return cls(info.shape, info.strides, info.dtype, op=op, alignment=info.alignment)

    def __repr__(self) -> str:
        op = "" if self.op is None else f", op={getattr(self.op, '__name__', self.op)!s}"
        return f"TensorDescriptor(shape={self.shape}, strides={self.strides}, dtype={self.dtype.name}{op})"


def alignment_of(address: int) -> int:
    """Largest power of two (capped at 256) that divides ``address``."""
    if address == 0:
        return DEFAULT_ALIGNMENT
    return min(address & -address, DEFAULT_ALIGNMENT)
