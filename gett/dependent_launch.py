"""Launching a kernel right behind the kernel before it on a stream: programmatic dependent launch (sm_90).

A plan runs as a chain of kernels on one stream (staging copies, the contraction, the split-K reduction).
Launched with cuda.h's ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``, a kernel of the chain is
launched while the one before it drains, and its CTAs start as that one's leave, without the gap of a
plain launch (H100, f16: #13 -2.3 us, #14 -3.9, #17 -1.0, #19 -2.0; session 35). The chain's first kernel
is launched so too, behind whatever kernel the stream ran before it (another call's, anyone's). Each
kernel calls ``gett::wait_for_prior_kernels`` (kernels/grid_dependency.cuh) before touching global memory,
so its results are those of a plain launch. CuPy does not expose ``cuLaunchKernelEx``, hence ctypes.
"""
from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

from . import driver

_PROGRAMMATIC_STREAM_SERIALIZATION = 6   # cuda.h CUlaunchAttributeID


class _Attribute(ctypes.Structure):
    """cuda.h ``CUlaunchAttribute``: the id, padding to 8 bytes, then a 64-byte value union whose first
    int is ``programmaticStreamSerializationAllowed``."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]


class _Config(ctypes.Structure):
    """cuda.h ``CUlaunchConfig``."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_Attribute)), ("num_attrs", ctypes.c_uint)]


@functools.cache
def _launch_kernel_ex():
    """The driver's ``cuLaunchKernelEx`` (CUDA 12.0 and later), or None where the driver lacks it."""
    return driver.function("cuLaunchKernelEx", [ctypes.POINTER(_Config), ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_void_p])


def supported(device: int) -> bool:
    """Whether kernels on ``device`` can be launched behind the one before them (sm_90 and later, a
    driver with ``cuLaunchKernelEx``)."""
    import cupy
    return int(cupy.cuda.Device(device).compute_capability) >= 90 and _launch_kernel_ex() is not None


class ByValue:
    """A kernel argument passed by value: the bytes of a numpy array (alpha, beta, a tensor map), kept
    alive with the address the launch reads them from."""
    __slots__ = ("array", "address")

    def __init__(self, array: np.ndarray):
        self.array = np.ascontiguousarray(array)
        self.address = self.array.ctypes.data


class DependentLaunch:
    """One kernel function (``function``: a loaded ``CUfunction`` handle) with its launch shape, launched
    behind the kernel before it on a stream. Its arguments are ``pointers`` device addresses (ints, passed
    as 64-bit pointers), then ``by_value`` :class:`ByValue` arguments, in the kernel's order."""
    __slots__ = ("_config", "_attribute", "_function", "_launch", "_lock", "_params", "_pointers", "_first_value")

    def __init__(self, function: int, grid: tuple, block: tuple, shared: int, pointers: int, by_value: int):
        self._launch = _launch_kernel_ex()
        self._function = function
        self._attribute = _Attribute(id=_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        self._config = _Config((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), shared, None,
                               ctypes.pointer(self._attribute), 1)
        self._pointers = (ctypes.c_uint64 * pointers)()     # where the pointer arguments are read from
        base = ctypes.addressof(self._pointers)
        # cuLaunchKernelEx's kernelParams: a pointer argument's slot above, then the ByValues' bytes (set per call)
        self._params = (ctypes.c_void_p * (pointers + by_value))(*(base + 8 * i for i in range(pointers)))
        self._first_value = pointers
        self._lock = threading.Lock()                         # the buffers above are shared by calls

    def __call__(self, stream: int, pointers: tuple, by_value: tuple) -> None:
        """Launch on ``stream`` (a handle) with ``pointers`` (ints) and ``by_value`` (ByValues), as many of
        each as the launch was made for."""
        params = self._params
        with self._lock:
            self._pointers[:] = pointers   # one copy in C: a loop over the arguments cost ~1 us more a call
            for i, value in enumerate(by_value, self._first_value):
                params[i] = value.address
            self._config.stream = stream
            status = self._launch(ctypes.byref(self._config), self._function, params, None)
        if status:
            raise RuntimeError(f"cuLaunchKernelEx failed: {driver.error_name(status)}")
