"""Launching a plan's kernel on CuPy or PyTorch arrays, on the caller's current stream."""
from __future__ import annotations

import contextlib
import threading
import weakref

import numpy as np

_ACC_NUMPY = {"f32": np.float32, "tf32": np.float32, "3xtf32": np.float32, "f64": np.float64,
              "c64": np.complex64, "c128": np.complex128, "i32": np.int32, "i64": np.int64}
_MAX_GRID_X = 2**31 - 1
_modules: dict = {}      # (cubin path, device) -> cupy.RawModule
_functions: dict = {}    # (cubin path, function name, device) -> kernel function
_functions_lock = threading.Lock()


def _function(kernel, name: str, device: int):
    """Function ``name`` of ``kernel``'s cubin on ``device`` (one module load per cubin and device)."""
    key = (str(kernel.cubin_path), name, device)
    fn = _functions.get(key)
    if fn is None:
        import cupy
        with _functions_lock, cupy.cuda.Device(device):
            if key not in _functions:
                module = _modules.get((str(kernel.cubin_path), device))
                if module is None:
                    module = _modules[(str(kernel.cubin_path), device)] = cupy.RawModule(path=str(kernel.cubin_path))
                f = module.get_function(name)
                if name == kernel.name and kernel.shared_bytes > 48 * 1024:   # beyond 48 KB: opt in
                    f.max_dynamic_shared_size_bytes = kernel.shared_bytes
                _functions[key] = f
            fn = _functions[key]
    return fn


class Launcher:
    """``plan``'s kernel bound to one device and array kind, everything but the pointers and scalars
    decided once: a call costs a few argument conversions and the launch (two with split-K), on the
    caller's current stream (PyTorch's for torch tensors, CuPy's otherwise), with no synchronisation.

    Arguments go to CuPy as its own argument objects (an address, a size-1 array passed by value), which
    it forwards untouched; numpy scalars would cost a conversion each per launch."""
    __slots__ = ("_fn", "_grid", "_block", "_shared", "_acc", "_device", "_torch_stream", "_cupy",
                 "_partials", "_reduce", "_reduce_grid", "_reduce_block", "_address", "_by_value",
                 "_null", "_scalars")

    def __init__(self, plan, device: int, kind: str):
        import cupy
        from cupy.cuda.function import CIntptr, CNumpyArray
        from .kernel import current_arch
        self._device, self._cupy, self._fn = device, cupy, None
        self._address, self._by_value, self._null, self._scalars = CIntptr, CNumpyArray, CIntptr(0), {}
        self._torch_stream = _torch_stream_getter() if kind == "torch" else None
        if plan.m * plan.n * plan.batch == 0:
            return   # nothing to write
        with cupy.cuda.Device(device):
            kernel = plan.kernel(plan.device_arch or current_arch())
            self._fn = _function(kernel, kernel.name, device)
            cfg = kernel.config
            outputs = plan.m * plan.n * plan.batch
            self._partials = cfg.split_k * outputs if cfg.split_k > 1 else 0
            if self._partials:
                from .codegen import REDUCE_NAME, REDUCE_THREADS
                self._reduce = _function(kernel, REDUCE_NAME, device)
                self._reduce_grid = (min(-(-outputs // REDUCE_THREADS), 65536), 1, 1)
                self._reduce_block = (REDUCE_THREADS, 1, 1)
        self._grid = _grid(-(-plan.m // cfg.bm) * -(-plan.n // cfg.bn) * plan.batch * cfg.split_k)
        self._block = (kernel.threads, 1, 1)
        self._shared = kernel.shared_bytes
        self._acc = _ACC_NUMPY[plan.compute_type.name]

    def __call__(self, a: int, b: int, c: int, d: int, alpha, beta) -> None:
        """Launch on the tensors at device addresses ``a``, ``b``, ``c``, ``d``."""
        if self._fn is None:
            return
        stream = None if self._torch_stream is None else _external_stream(self._torch_stream(self._device),
                                                                          self._device)
        if self._cupy.cuda.runtime.getDevice() == self._device:
            self._launch(a, b, c, d, alpha, beta, stream)
        else:   # the module is loaded in that device's context, and CuPy's current stream is per device
            with self._cupy.cuda.Device(self._device):
                self._launch(a, b, c, d, alpha, beta, stream)

    def _launch(self, a, b, c, d, alpha, beta, stream):
        address = self._address
        alpha, beta, c, d = self._scalar(alpha), self._scalar(beta), address(c), address(d)
        if not self._partials:
            self._fn(self._grid, self._block, (address(a), address(b), c, d, self._null, alpha, beta),
                     shared_mem=self._shared, stream=stream)
            return
        with stream if stream is not None else contextlib.nullcontext():
            partials = self._cupy.empty(self._partials, dtype=self._acc)   # CuPy's pool, on the stream using it
            p = address(partials.data.ptr)
            self._fn(self._grid, self._block, (address(a), address(b), c, d, p, alpha, beta),
                     shared_mem=self._shared)
            self._reduce(self._reduce_grid, self._reduce_block, (p, c, d, alpha, beta))

    def _scalar(self, value):
        """``value`` (alpha or beta) as a by-value kernel argument of the accumulator type; the few values
        a program uses are converted once."""
        try:
            arg = self._scalars.get(value)
        except TypeError:   # unhashable, e.g. a 0-d array
            arg = None
        if arg is None:
            arg = self._by_value(np.full(1, value, dtype=self._acc))
            if len(self._scalars) < 16 and not isinstance(value, np.ndarray):
                self._scalars[value] = arg
        return arg


def _torch_stream_getter():
    """device -> handle of PyTorch's current stream there; the private call skips a Stream object."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda device: torch.cuda.current_stream(device).cuda_stream)


class _StreamHandle:
    """A raw stream handle in the CUDA stream protocol."""
    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


_streams: dict = {}


def _external_stream(handle: int, device: int):
    """A CuPy view of a foreign stream, made once per handle (0 is the legacy default stream)."""
    stream = _streams.get((handle, device))
    if stream is None:
        import cupy
        with cupy.cuda.Device(device):
            view = cupy.cuda.Stream.null if handle == 0 else cupy.cuda.Stream.from_external(_StreamHandle(handle))
        stream = _streams.setdefault((handle, device), view)
    return stream


_launchers: dict = {}


def launcher(plan, device: int, kind: str) -> Launcher:
    """The :class:`Launcher` of ``plan`` on ``device``, made on first use and kept while the plan lives."""
    key = (id(plan), device, kind)
    entry = _launchers.get(key)
    if entry is None or entry[0]() is not plan:
        ref = weakref.ref(plan, lambda _, key=key: _launchers.pop(key, None))
        entry = _launchers[key] = (ref, Launcher(plan, device, kind))
    return entry[1]


def launch(plan, alpha, beta, infos) -> None:
    """Run ``plan`` on the arrays described by ``infos`` ("A", "B", "C", "D" → ArrayInfo)."""
    d = infos["D"]
    launcher(plan, d.device, d.kind)(infos["A"].pointer, infos["B"].pointer, infos["C"].pointer, d.pointer,
                                     alpha, beta)


def _grid(ctas: int) -> tuple:
    return (ctas, 1, 1) if ctas <= _MAX_GRID_X else (_MAX_GRID_X, -(-ctas // _MAX_GRID_X), 1)
