"""A stand-in for CuPy on machines without a GPU, for testing and timing gett's host-side call path.

Arrays carry a shape, byte strides, a dtype, a made-up device address and a device number; kernels
are real (compiled by NVRTC into the test's kernel cache) but their launches are recorded instead of
run. ``installed()`` puts the fake in ``sys.modules`` for the duration of a ``with`` block and, on the
way out, forgets everything gett cached while it was there (plans, einsum programs, launchers), so no
cached launcher of the fake ever serves a real CuPy array.
"""
from __future__ import annotations

import contextlib
import itertools
import sys
import types

import numpy as np

_addresses = itertools.count(1 << 32, 1 << 20)   # 1 MiB apart, 256-byte aligned like CuPy's pool


class MemoryPointer:
    __slots__ = ("ptr", "device_id")

    def __init__(self, ptr: int, device_id: int):
        self.ptr, self.device_id = ptr, device_id


class _DeviceId:
    __slots__ = ("id",)

    def __init__(self, device: int):
        self.id = device


class ndarray:
    """An array without data: what gett reads of a CuPy array, nothing more."""
    __module__ = "cupy"

    def __init__(self, shape, dtype=np.float32, strides=None, offset=0, device=None):
        self.shape = tuple(int(e) for e in shape)
        self.dtype = np.dtype(dtype)
        self.itemsize = self.dtype.itemsize
        if strides is None:
            strides, step = [], self.itemsize
            for e in reversed(self.shape):
                strides.append(step)
                step *= max(e, 1)
            strides = tuple(reversed(strides))
        self.strides = tuple(strides)
        device = _state.device if device is None else device
        self.data = MemoryPointer(next(_addresses) + offset, device)
        self.device = _DeviceId(device)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape))

    def view_as(self, shape, strides, offset=0):
        """A view of this array's memory: other shape and byte strides, ``offset`` bytes further on."""
        v = ndarray.__new__(ndarray)
        v.__dict__.update(self.__dict__)
        v.shape, v.strides, v.ndim = tuple(shape), tuple(strides), len(shape)
        v.size = int(np.prod(v.shape))
        v.data = MemoryPointer(self.data.ptr + offset, self.data.device_id)
        return v


class _State:
    """The current device, the number of devices, and the launches made."""
    def __init__(self):
        self.device, self.count, self.launches, self.record = 0, 1, [], True


_state = _State()


class Device:
    def __init__(self, device=None):
        self.id = _state.device if device is None else device
        self.compute_capability = "90"
        self.attributes = {"MultiProcessorCount": 132}
        self._previous = []

    def __enter__(self):
        self._previous.append(_state.device)
        _state.device = self.id
        return self

    def __exit__(self, *exc):
        _state.device = self._previous.pop()

    def synchronize(self):
        pass


class Stream:
    null = None   # set below

    def __init__(self, ptr=0):
        self.ptr = ptr

    @classmethod
    def from_external(cls, handle):
        return cls(handle.__cuda_stream__()[1])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


Stream.null = Stream(0)


class CIntptr:
    __slots__ = ("value",)

    def __init__(self, value: int):
        self.value = value


class CNumpyArray:
    __slots__ = ("value",)

    def __init__(self, array):
        self.value = array


class _Function:
    """A kernel function of a loaded module; a call records (name, device, grid, block, args, stream)."""

    def __init__(self, name: str):
        self.name, self.ptr = name, next(_addresses)   # ptr: a CUfunction handle, for the driver's queries
        self.max_dynamic_shared_size_bytes = 0
        self.preferred_shared_memory_carveout = -1

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        if _state.record:
            _state.launches.append((self.name, _state.device, grid, block, args, shared_mem, stream))


class _RawKernel:
    """What CuPy's RawModule.get_function returns: ``kernel`` is the function loaded on the current device."""

    num_regs = 64   # what the loaded function reports

    def __init__(self, name: str):
        self.kernel = _Function(name)

    def __call__(self, grid, block, args, **kwargs):
        self.kernel(grid, block, args, **kwargs)

    @property
    def max_dynamic_shared_size_bytes(self):
        return self.kernel.max_dynamic_shared_size_bytes

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value):
        self.kernel.max_dynamic_shared_size_bytes = value

    @property
    def preferred_shared_memory_carveout(self):
        return self.kernel.preferred_shared_memory_carveout

    @preferred_shared_memory_carveout.setter
    def preferred_shared_memory_carveout(self, value):
        self.kernel.preferred_shared_memory_carveout = value


class RawModule:
    def __init__(self, path=None, code=None):
        self.path = path

    def get_function(self, name: str):
        return _RawKernel(name)


def empty(shape, dtype=np.float32):
    return ndarray(shape if isinstance(shape, tuple) else (shape,), dtype)


def ones(shape, dtype=np.float32):
    return ndarray(shape, dtype)


def launched_pointers(launch) -> tuple:
    """The addresses of A, B, C, D a recorded launch was given (arrays go as themselves, as to CuPy)."""
    return tuple(a.data.ptr if isinstance(a, ndarray) else getattr(a, "value", a) for a in launch[4][:4])


def _module():
    cupy = types.ModuleType("cupy")
    cupy.ndarray, cupy.empty, cupy.ones, cupy.RawModule = ndarray, empty, ones, RawModule
    cuda = types.ModuleType("cupy.cuda")
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDevice = lambda: _state.device
    runtime.getDeviceCount = lambda: _state.count
    function = types.ModuleType("cupy.cuda.function")
    function.CIntptr, function.CNumpyArray = CIntptr, CNumpyArray
    driver = types.ModuleType("cupy.cuda.driver")
    driver.funcGetAttribute = lambda attribute, function: _RawKernel.num_regs   # the registers a thread
    cuda.runtime, cuda.function, cuda.Device, cuda.Stream = runtime, function, Device, Stream
    cuda.driver = driver
    cuda.get_current_stream = lambda: Stream.null
    cuda.alloc = lambda nbytes: MemoryPointer(next(_addresses), _state.device)   # the pool's memory, no array
    cupy.cuda = cuda
    return {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.runtime": runtime, "cupy.cuda.function": function,
            "cupy.cuda.driver": driver}


def forget_gett_state() -> None:
    """Drop every cache of gett that may hold a CuPy module or something made with one: plans, einsum
    programs, the contract memo, launchers, loaded kernels, streams and the GPU array kinds."""
    import gett
    from gett import arrays, launch
    gett.clear_cache()
    sys.modules["gett.contract"]._ACCEPTED.clear()   # the module: gett.contract is the function
    for cache in (launch._modules, launch._functions, launch._launchers, launch._streams, arrays._DEVICE_KINDS):
        cache.clear()
    for t in [t for t, kind in arrays.KINDS.items() if kind is not arrays.NUMPY_KIND]:
        for table in (arrays.KINDS, arrays.SIGNATURES, arrays.OUT_SIGNATURES):
            del table[t]


@contextlib.contextmanager
def installed(devices: int = 1, record: bool = True):
    """The fake as ``cupy`` (``devices`` devices, launches recorded if ``record``) inside the block."""
    saved = {name: sys.modules.get(name) for name in _module()}
    forget_gett_state()
    sys.modules.update(_module())
    _state.device, _state.count, _state.launches, _state.record = 0, devices, [], record
    try:
        yield _state
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        forget_gett_state()
