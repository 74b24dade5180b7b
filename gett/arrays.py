"""Adapters for the array types gett accepts: numpy (reference executor), CuPy and PyTorch (GPU).

One function, :func:`describe`, reads what a plan and a launch need from any of them without importing a
library the user doesn't use; :func:`kind_of` gives the per-library object behind the cached call paths of
:func:`gett.einsum` and :func:`gett.contract` (signatures, allocation).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

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
    if array.is_conj() or array.is_neg():   # lazy views: the memory holds the unconjugated/unnegated values
        raise TypeError("torch tensor is a lazy conjugate or negative view; call .resolve_conj() / "
                        ".resolve_neg() first (or use op_a/op_b=gett.ops.conj / neg)")
    if array.is_conj() or array.is_neg():   # lazy views: the memory holds the unconjugated/unnegated values
        raise TypeError("torch tensor is a lazy conjugate or negative view; call .resolve_conj() / "
                        ".resolve_neg() first (or use op_a/op_b=gett.ops.conj / neg)")
    ptr = array.data_ptr()
    strides = tuple(s if e > 1 else 0 for s, e in zip(array.stride(), array.shape))
    return ArrayInfo(kind, tuple(array.shape), strides, dtype, ptr, alignment_of(ptr),
                     array.device.index, not array.requires_grad or not array.is_leaf)


# Array kinds: what the einsum and contract fast paths need of an array type, one object per library ------
class _NumpyKind:
    """Host arrays, run by the reference executor (a check, not a fast path)."""
    name = NUMPY

    @staticmethod
    def signature(x) -> tuple:
        return (NUMPY, x.shape, x.strides, x.dtype)

    @staticmethod
    def out_signature(x) -> tuple:
        return (NUMPY, x.shape, x.strides, x.dtype, x.flags.writeable)

    @staticmethod
    def allocator(shape: tuple, dtype, device: int):
        return partial(np.empty, shape, dtype)

    @staticmethod
    def constant_one(dtype, device: int):
        return np.ones((), dtype)

    @staticmethod
    def capturing(device: int) -> int:
        """0: host arrays are never captured."""
        return 0


class _CupyKind:
    """CuPy arrays. Work goes to CuPy's current stream of the arrays' device, and so do allocations:
    CuPy's memory pool hands a block back to the stream it was last used on only."""
    name = CUPY

    def __init__(self):
        import cupy
        self._cupy = cupy

    @staticmethod
    def signature(x) -> tuple:
        d = x.data
        return (CUPY, x.shape, x.strides, x.dtype, d.ptr & 255, d.device_id)

    out_signature = signature   # CuPy arrays are always writable

    def allocator(self, shape: tuple, dtype, device: int):
        """A function of no arguments that makes a row-major ``shape`` array on ``device``."""
        cupy = self._cupy
        new = partial(cupy.ndarray, shape, dtype)   # cupy.empty without its Python frame
        if cupy.cuda.runtime.getDeviceCount() == 1:   # the current device is the only one
            return new

        def on_device():
            if cupy.cuda.runtime.getDevice() == device:
                return new()
            with cupy.cuda.Device(device):   # the pool and the current stream are per device
                return new()
        return on_device

    def constant_one(self, dtype, device: int):
        with self._cupy.cuda.Device(device) as dev:
            one = self._cupy.ones((), dtype)
            dev.synchronize()   # made once per program; later calls may read it from any stream
        return one

    def capturing(self, device: int) -> int:
        """The handle of CuPy's current stream on ``device`` while it is being captured into a CUDA graph,
        else 0. Arrays a captured call makes and drops must not come from the pool then: it would hand
        them on at once, while every replay of the graph still writes them."""
        cupy = self._cupy
        if cupy.cuda.runtime.getDevice() == device:   # the common case, without switching devices
            handle = cupy.cuda.get_current_stream().ptr
        else:
            with cupy.cuda.Device(device):   # CuPy's current stream is per device
                handle = cupy.cuda.get_current_stream().ptr
        return handle if handle and cupy.cuda.runtime.streamIsCapturing(handle) else 0

    def graph_array(self, shape: tuple, dtype, stream: int, device: int):
        """(array, free): a row-major ``shape`` array on ``device`` in memory that the graph ``stream`` is
        captured into allocates (:class:`gett.launch.Scratch`); ``free()`` frees it in stream order, to be
        called once the last kernel reading it is enqueued."""
        from .launch import Scratch
        cupy = self._cupy
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        scratch = Scratch(cupy, max(nbytes, 1), stream, captured=True)   # capturing() asked already
        memory = cupy.cuda.UnownedMemory(scratch.ptr, nbytes, owner=None, device_id=device)
        return cupy.ndarray(shape, dtype, memptr=cupy.cuda.MemoryPointer(memory, 0)), partial(scratch.release, cupy)


class _TorchKind:
    """PyTorch CUDA tensors. Work goes to PyTorch's current stream of the tensors' device, and so do
    allocations (PyTorch's caching allocator is stream-ordered)."""
    name = TORCH

    def __init__(self):
        import torch
        self._torch = torch

    @staticmethod
    def signature(x) -> tuple:
        if not x.is_cuda:
            raise TypeError("torch tensors must live on a CUDA device (use numpy arrays for the CPU reference)")
        # lazy conjugate/negative views share the memory of plain ones: they must not share a memo entry
        return (TORCH, x.shape, x.stride(), x.dtype, x.data_ptr() & 255, x.get_device(), x.is_conj(), x.is_neg())

    @staticmethod
    def out_signature(x) -> tuple:
        """The signature and whether ``x`` may be written (not a leaf that requires grad)."""
        return _TorchKind.signature(x) + (not x.requires_grad or not x.is_leaf,)

    def allocator(self, shape: tuple, dtype, device: int):
        return partial(self._torch.empty, shape, dtype=dtype, device=self._torch.device("cuda", device))

    def constant_one(self, dtype, device: int):
        one = self._torch.ones((), dtype=dtype, device=self._torch.device("cuda", device))
        self._torch.cuda.synchronize(device)   # made once per program; later calls may read it from any stream
        return one

    @staticmethod
    def capturing(device: int) -> int:
        """0: under ``torch.cuda.graph`` PyTorch's allocator serves a captured call from the graph's own
        pool, which no array made outside the graph shares."""
        return 0


NUMPY_KIND = _NumpyKind()
KINDS: dict = {}            # array type -> kind object, filled on first sight of a type
SIGNATURES: dict = {}       # array type -> its kind's signature function
OUT_SIGNATURES: dict = {}   # array type -> its kind's out_signature function


def kind_of(x):
    """The kind object of ``x``'s type (registering the type), or None for a type gett doesn't run natively.

    A kind has ``name`` ("numpy", "cupy", "torch"), ``signature(x)``: a hashable summary of all a plan
    depends on (kind, shape, strides, dtype, pointer alignment, device; equal summaries mean either array
    may run a plan made for the other), ``out_signature(x)``: that and whether ``x`` may be written,
    ``allocator(shape, dtype, device)``: a function making new row-major arrays, and
    ``constant_one(dtype, device)``: a 0-d array holding 1, and ``capturing(device)``: the handle of the
    current stream while it is captured into a CUDA graph that the kind's allocator cannot serve safely
    (CuPy's pool; ``graph_array`` serves it then), else 0."""
    t = type(x)
    kind = KINDS.get(t)
    if kind is None:
        try:
            name = array_kind(x)
        except TypeError:
            return None
        if (name == CUPY and not hasattr(x, "data")) or (name == TORCH and not hasattr(x, "data_ptr")):
            return None   # something else from those libraries (a scalar type, a device object)
        kind = NUMPY_KIND if name == NUMPY else _device_kind(name)
        KINDS[t], SIGNATURES[t], OUT_SIGNATURES[t] = kind, kind.signature, kind.out_signature
    return kind


_DEVICE_KINDS: dict = {}


def _device_kind(name: str):
    """The one kind object of CuPy or PyTorch (made on first use: it imports its library)."""
    kind = _DEVICE_KINDS.get(name)
    if kind is None:
        kind = _DEVICE_KINDS.setdefault(name, _CupyKind() if name == CUPY else _TorchKind())
    return kind
