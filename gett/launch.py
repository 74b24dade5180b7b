"""Launching a plan's kernel on CuPy or PyTorch arrays, on the caller's current stream."""
from __future__ import annotations

import threading

import numpy as np

_ACC_NUMPY = {"f32": np.float32, "tf32": np.float32, "3xtf32": np.float32, "f64": np.float64,
              "c64": np.complex64, "c128": np.complex128, "i32": np.int32, "i64": np.int64}
_MAX_GRID_X = 2**31 - 1
_modules: dict = {}
_modules_lock = threading.Lock()


def _function(kernel, device: int):
    """The loaded kernel function for ``device`` (one module load per cubin and device)."""
    key = (str(kernel.cubin_path), device)
    fn = _modules.get(key)
    if fn is None:
        import cupy
        with _modules_lock, cupy.cuda.Device(device):
            fn = _modules.get(key)
            if fn is None:
                module = cupy.RawModule(path=str(kernel.cubin_path))
                fn = module.get_function(kernel.name)
                if kernel.shared_bytes > 48 * 1024:   # beyond 48 KB a kernel must opt in
                    fn.max_dynamic_shared_size_bytes = kernel.shared_bytes
                _modules[key] = (module, fn)
                return fn
    return fn[1]


def _stream(kind: str):
    """The caller's current stream: PyTorch's for torch tensors, CuPy's otherwise."""
    if kind == "torch":
        import cupy
        import torch
        return cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    return None


def launch(plan, alpha, beta, infos) -> None:
    """Run ``plan`` on the arrays described by ``infos`` ("A", "B", "C", "D" → ArrayInfo)."""
    import cupy
    if plan.m * plan.n * plan.batch == 0:
        return   # nothing to write
    device = infos["D"].device
    with cupy.cuda.Device(device):
        from .kernel import current_arch
        kernel = plan.kernel(plan.device_arch or current_arch())
        fn = _function(kernel, device)
        cfg = kernel.config
        tiles = -(-plan.m // cfg.bm) * -(-plan.n // cfg.bn) * plan.batch
        grid = (tiles, 1, 1) if tiles <= _MAX_GRID_X else (_MAX_GRID_X, -(-tiles // _MAX_GRID_X), 1)
        acc = _ACC_NUMPY[plan.compute_type.name]
        args = (np.uint64(infos["A"].pointer), np.uint64(infos["B"].pointer), np.uint64(infos["C"].pointer),
                np.uint64(infos["D"].pointer), acc(alpha), acc(beta))
        stream = _stream(infos["D"].kind)
        if stream is None:
            fn(grid, (kernel.threads, 1, 1), args, shared_mem=kernel.shared_bytes)
        else:
            with stream:
                fn(grid, (kernel.threads, 1, 1), args, shared_mem=kernel.shared_bytes)
