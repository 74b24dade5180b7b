"""Adapters for the array types gett accepts: numpy (reference executor), CuPy and PyTorch (GPU).

One function, :func:`describe`, reads what a plan and a launch need from any of them without importing a
library the user doesn't use.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .descriptor import DEFAULT_ALIGNMENT, alignment_of
from .dtypes import DType, as_dtype
from .errors import StrideError, DTypeError

NUMPY, CUPY, TORCH = "numpy", "cupy", "torch"


@dataclass(frozen=True)
class ArrayInfo:
    kind: str            # "numpy", "cupy" or "torch"
    shape: tuple
    strides: tuple       # elements
    dtype: DType
    pointer: int         # address of element (0, ..., 0)
    alignment: int
    device: int          # CUDA device ordinal, -1 for host memory
    writable: bool


def array_kind(array) -> str:
    module = type(array).__module__.split(".")[0]
    if isinstance(array, np.ndarray):
        return NUMPY
    if module == "cupy":
        return CUPY
    if module == "torch":
        return TORCH
    raise TypeError(f"unsupported array type {type(array).__name__}; use numpy, CuPy or PyTorch arrays")


def _element_strides(byte_strides, itemsize, shape) -> tuple:
    out = []
    for s, e in zip(byte_strides, shape):
        if s % itemsize:
            raise StrideError(f"stride of {s} bytes is not a multiple of the element size {itemsize}")
        out.append(s // itemsize if e > 1 else 0)
    return tuple(out)


def describe(array) -> ArrayInfo:
    """Shape, element strides, dtype, pointer, alignment, device and writability of ``array``."""
    kind = array_kind(array)
    if kind == NUMPY:
        dtype = as_dtype(array.dtype)
        ptr = array.__array_interface__["data"][0]
        # host arrays never meet a vector load: their alignment must not split the plan cache
        return ArrayInfo(kind, array.shape, _element_strides(array.strides, array.itemsize, array.shape),
                         dtype, ptr, DEFAULT_ALIGNMENT, -1, bool(array.flags.writeable))
    if kind == CUPY:
        try:
            dtype = as_dtype(array.dtype)
        except DTypeError:
            raise
        ptr = array.data.ptr
        return ArrayInfo(kind, array.shape, _element_strides(array.strides, array.itemsize, array.shape),
                         dtype, ptr, alignment_of(ptr), array.device.id, True)
    # torch: strides are already in elements
    dtype = as_dtype(str(array.dtype))
    if array.device.type != "cuda":
        raise TypeError("torch tensors must live on a CUDA device (use numpy arrays for the CPU reference)")
    ptr = array.data_ptr()
    strides = tuple(s if e > 1 else 0 for s, e in zip(array.stride(), array.shape))
    return ArrayInfo(kind, tuple(array.shape), strides, dtype, ptr, alignment_of(ptr),
                     array.device.index, not array.requires_grad or not array.is_leaf)
