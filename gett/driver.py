"""The CUDA driver library (``libcuda.so.1``) through ctypes, for the few calls CuPy does not expose
(``cuTensorMapEncodeTiled``, ``cuLaunchKernelEx``); loaded once, on first use."""
from __future__ import annotations

import ctypes
import functools
import threading

_lock = threading.Lock()


@functools.cache
def _library():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def function(name: str, argtypes: list, restype=ctypes.c_int):
    """The driver function ``name`` with its ctypes signature, or None where there is no driver or it
    lacks the function (an older CUDA)."""
    with _lock:
        lib = _library()
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            fn.argtypes, fn.restype = argtypes, restype
    return fn


def error_name(status: int) -> str:
    """cuda.h's name of a ``CUresult``, e.g. ``CUDA_ERROR_INVALID_VALUE (1)``."""
    get = function("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])
    name = ctypes.c_char_p()
    if get is not None and get(status, ctypes.byref(name)) == 0 and name.value:
        return f"{name.value.decode()} ({status})"
    return f"CUresult {status}"
