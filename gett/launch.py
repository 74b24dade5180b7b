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
    decided once: a call costs a few argument conversions and the launch, on the caller's current
    stream (PyTorch's for torch tensors, CuPy's otherwise), with no synchronisation."""
    __slots__ = ("_fn", "_grid", "_block", "_shared", "_acc", "_device", "_torch_stream", "_cuda")

    def __init__(self, plan, device: int, kind: str):
        import cupy
        from .kernel import current_arch
        self._device = device
        self._cuda = cupy.cuda
        self._torch_stream = _torch_stream_getter() if kind == "torch" else None
        self._fn = None
        if plan.m * plan.n * plan.batch == 0:
            return   # nothing to write
        with cupy.cuda.Device(device):
            kernel = plan.kernel(plan.device_arch or current_arch())
            self._fn = _function(kernel, device)
        cfg = kernel.config
        tiles = -(-plan.m // cfg.bm) * -(-plan.n // cfg.bn) * plan.batch
        self._grid = (tiles, 1, 1) if tiles <= _MAX_GRID_X else (_MAX_GRID_X, -(-tiles // _MAX_GRID_X), 1)
        self._block = (kernel.threads, 1, 1)
        self._shared = kernel.shared_bytes
        self._acc = _ACC_NUMPY[plan.compute_type.name]

    def __call__(self, a: int, b: int, c: int, d: int, alpha, beta) -> None:
        """Launch on the tensors at device addresses ``a``, ``b``, ``c``, ``d``."""
        if self._fn is None:
            return
        acc = self._acc
        args = (np.uint64(a), np.uint64(b), np.uint64(c), np.uint64(d), acc(alpha), acc(beta))
        stream = None if self._torch_stream is None else _external_stream(self._torch_stream(self._device),
                                                                          self._device)
        if self._cuda.runtime.getDevice() == self._device:
            self._fn(self._grid, self._block, args, shared_mem=self._shared, stream=stream)
        else:   # the module is loaded in that device's context, and CuPy's current stream is per device
            with self._cuda.Device(self._device):
                self._fn(self._grid, self._block, args, shared_mem=self._shared, stream=stream)


def _torch_stream_getter():
    """device -> handle of PyTorch's current stream there; the private call skips a Stream object."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda device: torch.cuda.current_stream(device).cuda_stream)


_streams: dict = {}


def _external_stream(handle: int, device: int):
    """A CuPy view of a foreign stream, made once per handle."""
    stream = _streams.get((handle, device))
    if stream is None:
        import cupy
        stream = _streams.setdefault((handle, device), cupy.cuda.ExternalStream(handle, device))
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
    import cupy
    if plan.m * plan.n * plan.batch == 0:
        return   # nothing to write
    device = infos["D"].device
    with cupy.cuda.Device(device):
        from .kernel import current_arch
        kernel = plan.kernel(plan.device_arch or current_arch())
        cfg = kernel.config
        tiles = -(-plan.m // cfg.bm) * -(-plan.n // cfg.bn) * plan.batch * cfg.split_k
        acc = _ACC_NUMPY[plan.compute_type.name]
        alpha, beta = acc(alpha), acc(beta)
        a, b, c, d = (np.uint64(infos[t].pointer) for t in "ABCD")
        stream = _stream(infos["D"].kind)
        with stream if stream is not None else contextlib.nullcontext():
            partials = None
            if cfg.split_k > 1:   # from CuPy's pool, on the stream that uses it
                partials = cupy.empty(cfg.split_k * plan.m * plan.n * plan.batch, dtype=acc)
            fn = _function(kernel, kernel.name, device)
            fn(_grid(tiles), (kernel.threads, 1, 1),
               (a, b, c, d, np.uint64(0 if partials is None else partials.data.ptr), alpha, beta),
               shared_mem=kernel.shared_bytes)
            if partials is not None:
                from .codegen import REDUCE_NAME, REDUCE_THREADS
                total = plan.m * plan.n * plan.batch
                reduce_fn = _function(kernel, REDUCE_NAME, device)
                reduce_fn((min(-(-total // REDUCE_THREADS), 65536), 1, 1), (REDUCE_THREADS, 1, 1),
                          (np.uint64(partials.data.ptr), c, d, alpha, beta))


def _grid(ctas: int) -> tuple:
    return (ctas, 1, 1) if ctas <= _MAX_GRID_X else (_MAX_GRID_X, -(-ctas // _MAX_GRID_X), 1)
