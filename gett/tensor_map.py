"""Encoding the tensor maps TMA kernels take (``cuTensorMapEncodeTiled``, CUDA driver API, by ctypes).

A tensor map holds the operand's address, so a launcher encodes one per address it meets and keeps
them (:class:`TensorMaps`). Encoding needs the driver, not a context or a device.
"""
from __future__ import annotations

import ctypes
import functools
import operator

import numpy as np

from . import driver
from .errors import DeviceError
from .tma import TMA_DATA_TYPES, TmaBox, TmaOperand, TmaStoreBox

_MAP_BYTES, _MAP_ALIGN = 128, 64
# The L2 fetch size each tensor's map asks (CU_TENSOR_MAP_L2_PROMOTION_*: 2 = 128 bytes, 3 = 256 as CUTLASS's
# Hopper GEMMs ask). A's at 128: H100, f16, runner A/B (session 36, medians of three runs) #13 ``ab-acd-dbc``
# (A's K rows 184 KB apart) 68.4 -> 62.6 us, #4 (a box tile of A) 44.4 -> 41.3, #3 40.9 -> 39.6, #14 even;
# B's at 128 as well cost #14 1%.
L2_PROMOTION = {"A": 2, "B": 3, "D": 3}


@functools.cache
def _encode_function():
    u32, u64p, u32p = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    fn = driver.function("cuTensorMapEncodeTiled", [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, u64p, u64p,
                                                    u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int])
    if fn is None:
        raise DeviceError("TMA kernels need a CUDA 12+ driver with cuTensorMapEncodeTiled (libcuda.so.1)")
    return fn


def encode(view: TmaOperand | TmaBox | TmaStoreBox, address: int) -> np.ndarray:
    """The 128-byte tensor map of ``view`` at device ``address``, as a numpy array to pass by value."""
    if address % 16:
        raise DeviceError(f"{view.tensor}: a TMA copy needs a 16-byte aligned address, got {address:#x}")
    buffer = np.zeros(_MAP_BYTES + _MAP_ALIGN, dtype=np.uint8)
    start = -buffer.ctypes.data % _MAP_ALIGN
    out = buffer[start:start + _MAP_BYTES]
    rank = len(view.extents)
    dims = (ctypes.c_uint64 * rank)(*view.extents)
    strides = (ctypes.c_uint64 * (rank - 1))(*view.byte_strides)
    box = (ctypes.c_uint32 * rank)(*view.box)
    element_strides = (ctypes.c_uint32 * rank)(*(1,) * rank)
    status = _encode_function()(out.ctypes.data, TMA_DATA_TYPES[view.dtype], rank, address, dims, strides, box,
                                element_strides, 0, view.swizzle, L2_PROMOTION[view.tensor], 0)
    if status:
        raise DeviceError(f"cuTensorMapEncodeTiled failed ({status}) for {view.tensor}: {view}, address {address:#x}")
    return out


class TensorMaps:
    """The tensor maps of the tensors a kernel copies through the TMA (A and B, A, or D: ``views``) at
    the addresses met so far, encoded once each (a bounded number: a program cycles through a few
    buffers; past that the oldest is dropped)."""
    __slots__ = ("_by_value", "_key", "_maps", "_views")
    LIMIT = 64

    def __init__(self, views: tuple, by_value):
        self._views, self._maps, self._by_value = views, {}, by_value
        # keyed by the addresses of the views' tensors only: a new D does not re-encode A's and B's maps
        self._key = operator.itemgetter(*("ABD".index(v.tensor) for v in views))

    def __call__(self, a: int, b: int, d: int) -> tuple:
        """The maps of ``views`` (of A at ``a``, B at ``b``, D at ``d``) as kernel arguments passed by value."""
        key = self._key((a, b, d))
        maps = self._maps.get(key)
        if maps is None:
            if len(self._maps) >= self.LIMIT:
                self._maps.pop(next(iter(self._maps)))
            address = {"A": a, "B": b, "D": d}
            maps = self._maps[key] = tuple(self._by_value(encode(v, address[v.tensor])) for v in self._views)
        return maps
