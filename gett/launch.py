"""Launching a plan's kernel on CuPy or PyTorch arrays, on the caller's current stream."""
from __future__ import annotations

import contextlib
import threading
import weakref

import numpy as np

from . import dependent_launch
from .codegen import SM_SHARED_BYTES, shared_ctas
from .config import grid_ctas, row_tiles

_ACC_NUMPY = {"f32": np.float32, "tf32": np.float32, "3xtf32": np.float32, "f64": np.float64,
              "c64": np.complex64, "c128": np.complex128, "i32": np.int32, "i64": np.int64}
_MAX_GRID_X = 2**31 - 1
# A plan whose GPU time (its tensors' bytes at 3 TB/s, or its flops at 700 TFLOP/s) reaches this launches its
# kernels behind the one before (gett.dependent_launch): that saves the TCCG plans of 18-40 us 1-4 us of GPU
# time a call, but a call of a small chain pays ~5 us more (a split-K 64 x 1024 x 64 f32 plan: 24.7 us a call
# against 19.1; H100 and its host, session 35).
CHAIN_MIN_SECONDS = 10e-6
_NUM_REGS = 4            # cuda.h CU_FUNC_ATTRIBUTE_NUM_REGS: registers a thread of a loaded function
_modules: dict = {}      # (cubin path, device) -> cupy.RawModule
_functions: dict = {}    # (cubin path, function name, device) -> kernel function loaded on that device
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
                    f.preferred_shared_memory_carveout = shared_carveout(kernel, f.num_regs)
                # The RawKernel's function on this device, called directly: RawKernel.__call__ would look
                # the device up and repack the keyword arguments on every launch.
                _functions[key] = getattr(f, "kernel", f)
            fn = _functions[key]
    return fn


def shared_carveout(kernel, registers: int, sm_shared: int = SM_SHARED_BYTES, sm_registers: int = 65536) -> int:
    """Percent of the SM's unified L1 to make shared memory: enough for as many CTAs as ``registers`` (a
    thread's, as the loaded function reports them) and shared memory allow (the driver's default may size
    it for one CTA), and no more, since the rest is L1 cache that register-staged loads and spills need.
    100 where registers are unknown. (ptxas's report can be missing: NVRTC answered from the CUDA
    driver's compute cache; taking 100 then cost #1 38 -> 51 us, H100, session 12 and 13.)"""
    if registers <= 0:
        return 100
    ctas = resident_ctas(kernel, registers, sm_shared, sm_registers)
    return min(100, -(-ctas * (kernel.shared_bytes + 1024) * 100 // sm_shared))


def resident_ctas(kernel, registers: int, sm_shared: int = SM_SHARED_BYTES, sm_registers: int = 65536,
                  sm_threads: int = 2048) -> int:
    """CTAs of ``kernel`` one SM holds at once, by its shared memory (the driver reserves 1 KB a CTA),
    its ``registers`` a thread (allocated in eights; unknown, ≤ 0: not counted) and its threads."""
    by_registers = sm_registers // (-(-registers // 8) * 8 * kernel.threads) if registers > 0 else sm_threads
    return max(1, min(shared_ctas(kernel.shared_bytes, sm_shared), by_registers, sm_threads // kernel.threads))


def worth_chaining(plan) -> bool:
    """Whether ``plan``'s kernels run long enough for launching each behind the one before to pay."""
    return max(plan.moved_bytes / 3.0e12, plan.flops / 700e12) >= CHAIN_MIN_SECONDS


def chains(plan, device: int) -> bool:
    """Whether ``plan``'s kernels launch behind the kernel before them on ``device`` (its first behind
    whatever the stream ran before it): they run long enough for it to pay (:func:`worth_chaining`) and the
    device can (:func:`gett.dependent_launch.supported`)."""
    return worth_chaining(plan) and dependent_launch.supported(device)


class Scratch:
    """One call's scratch memory (split-K partials, staged operands) on the stream its kernels run on.

    Normally from CuPy's memory pool, which is stream-ordered: the memory goes to other arrays only once
    the stream has passed the kernels enqueued before :meth:`release`. While the stream is being captured
    into a CUDA graph that would go wrong: the pool hands the memory on at once, yet every replay of the
    graph writes it again, over whatever array holds it by then. So under capture the memory is allocated
    and freed in stream order (``cudaMallocAsync``/``cudaFreeAsync``), which the graph records as its own
    allocation and free: each replay gets memory no array holds."""
    __slots__ = ("ptr", "_array", "_stream")   # _array: the pool's MemoryPointer, held until release

    def __init__(self, cupy, nbytes: int, stream: int, captured: bool | None = None):
        """``nbytes`` on the stream of handle ``stream`` (0: the legacy default stream, never captured);
        ``captured``: whether that stream is being captured, where the caller knows (None: ask the driver)."""
        runtime = cupy.cuda.runtime
        if captured is None:
            captured = bool(stream) and runtime.streamIsCapturing(stream)
        if captured:
            self._array, self._stream = None, stream   # the stream it is freed on
            self.ptr = runtime.mallocAsync(nbytes, stream)
        else:   # the pool's memory without an array around it (cupy.empty costs 3 us more a call)
            self._array, self._stream = cupy.cuda.alloc(nbytes), None
            self.ptr = self._array.ptr

    def release(self, cupy) -> None:
        """Call once every kernel using the memory has been enqueued; later calls do nothing."""
        if self._stream is not None:
            cupy.cuda.runtime.freeAsync(self.ptr, self._stream)
        self._array = self._stream = None


class Launcher:
    """``plan``'s kernel bound to one device and array kind, everything but the arrays and scalars decided
    once. A call launches the kernel (two with split-K) on the caller's current stream — PyTorch's for
    torch tensors, CuPy's otherwise — with no synchronisation.

    A lone kernel goes through CuPy's kernel function, with the arguments as it takes them without
    converting them again: CuPy arrays as they are (CuPy passes an array's data pointer), addresses as
    its own argument objects, alpha and beta as size-1 arrays passed by value (converted once per value;
    numpy scalars would cost a conversion each per launch). Where the plan :func:`chains` (or ``chained``
    says so: a staged plan's kernel, after its copies), its kernels (the contraction, then split-K's
    reduction) go through :mod:`gett.dependent_launch` instead, each launched while the kernel before it
    on the stream drains."""
    __slots__ = ("_fn", "_grid", "_block", "_shared", "_acc", "_device", "_torch_stream", "_cupy",
                 "partials_bytes", "_reduce", "_reduce_grid", "_reduce_block", "_address", "_by_value",
                 "_null", "_scalars", "_get_device", "_maps", "_chain")

    def __init__(self, plan, device: int, kind: str, chained: bool | None = None):
        import cupy
        from cupy.cuda.function import CIntptr, CNumpyArray

        from .kernel import current_arch
        self._device, self._cupy, self._fn, self._chain = device, cupy, None, None
        self.partials_bytes = 0   # split-K's partial sums: a CTA's for each of its tile's elements
        self._address, self._null, self._scalars = CIntptr, CIntptr(0), {}
        self._torch_stream = _torch_stream_getter() if kind == "torch" else None
        # With one device it is always the current one: no need to ask on every call.
        self._get_device = cupy.cuda.runtime.getDevice if cupy.cuda.runtime.getDeviceCount() > 1 else None
        self._maps = None
        if plan.m * plan.n * plan.batch == 0:
            return   # nothing to write
        with cupy.cuda.Device(device):
            kernel = plan.kernel(plan.device_arch or current_arch())
            self._fn = _function(kernel, kernel.name, device)
            cfg = kernel.config
            outputs = plan.m * plan.n * plan.batch
            self._acc = _ACC_NUMPY[plan.compute_type.name]
            if cfg.split_k > 1:
                self.partials_bytes = cfg.split_k * outputs * np.dtype(self._acc).itemsize
                from .codegen import REDUCE_NAME, REDUCE_THREADS, reduce_grid
                self._reduce = _function(kernel, REDUCE_NAME, device)
                self._reduce_grid = reduce_grid(plan, cfg)
                self._reduce_block = (REDUCE_THREADS, 1, 1)
            if chained is None:
                chained = chains(plan, device)
        self._by_value = dependent_launch.ByValue if chained else CNumpyArray
        if kernel.tma is not None:
            from .tensor_map import TensorMaps
            self._maps = TensorMaps(kernel.tma, self._by_value)
        ctas = grid_ctas(plan, cfg)
        if cfg.persistent:   # as many CTAs as the SMs hold at once, each running every so many tiles
            with cupy.cuda.Device(device):
                registers = cupy.cuda.driver.funcGetAttribute(_NUM_REGS, self._fn.ptr)
                sms = cupy.cuda.Device(device).attributes["MultiProcessorCount"]
            ctas = min(ctas, sms * resident_ctas(kernel, registers))
            if cfg.resident:   # whole rows (columns) of tiles, so that each CTA's tiles keep one column (row)
                line = -(-plan.n // cfg.bn) if cfg.resident == "b" else row_tiles(plan, cfg)
                ctas = max(line, ctas // line * line)
        self._grid = _grid(ctas)
        self._block = (kernel.threads, 1, 1)
        self._shared = kernel.shared_bytes
        if chained:   # the kernel takes A, B, C, D, partials, then alpha, beta and its tensor maps by value
            self._chain = (
                dependent_launch.DependentLaunch(self._fn.ptr, self._grid, self._block, self._shared, 5,
                                                 2 + len(kernel.tma or ())),
                dependent_launch.DependentLaunch(self._reduce.ptr, self._reduce_grid, self._reduce_block, 0, 3, 2)
                if self.partials_bytes else None)

    def __call__(self, A, B, C, D, alpha, beta) -> None:
        """Launch on ``A``, ``B``, ``C``, ``D``: arrays of the launcher's kind laid out as the plan's
        descriptors (for the CuPy kind, device addresses as ints serve too). Checks nothing."""
        if self._fn is None:
            return
        if self._chain is not None:
            self.at_addresses(_pointer(A), _pointer(B), _pointer(C), _pointer(D), alpha, beta)
            return
        maps = () if self._maps is None else self._maps(_pointer(A), _pointer(B), _pointer(D))
        if self._torch_stream is not None:
            address = self._address
            A, B, C, D = address(A.data_ptr()), address(B.data_ptr()), address(C.data_ptr()), address(D.data_ptr())
        self._dispatch(A, B, C, D, alpha, beta, self.stream(), maps)

    def at_addresses(self, a: int, b: int, c: int, d: int, alpha, beta, partials: int = 0) -> None:
        """Launch on device addresses, for arrays of mixed kinds (e.g. torch bf16 inputs, a CuPy output),
        on the stream of the launcher's kind. ``partials``: the address of ``partials_bytes`` of scratch
        memory the caller holds until the launch is enqueued (0: a split-K call allocates its own)."""
        if self._fn is None:
            return
        stream = self.stream()
        maps = () if self._maps is None else self._maps(a, b, d)
        if self._chain is not None:
            self._dispatch(a, b, c, d, alpha, beta, stream, maps, partials)
            return
        address = self._address
        self._dispatch(address(a), address(b), address(c), address(d), alpha, beta, stream, maps, partials)

    def stream(self):
        """The stream launches go to: PyTorch's current one (a CuPy view) for torch, else None (CuPy's)."""
        if self._torch_stream is None:
            return None
        return _external_stream(self._torch_stream(self._device), self._device)

    def _dispatch(self, A, B, C, D, alpha, beta, stream, maps, partials=0):
        """``maps``: the tensor maps of a TMA kernel (A and B, A, or D: gett.tensor_map), else ();
        ``partials``: as :meth:`at_addresses` takes it."""
        scalars = self._scalars
        try:
            alpha, beta = scalars[alpha], scalars[beta]
        except (KeyError, TypeError):   # a value met for the first time, or unhashable (a 0-d array)
            alpha, beta = self._scalar(alpha), self._scalar(beta)
        if self._get_device is not None and self._get_device() != self._device:
            # the module is loaded in that device's context, and CuPy's current stream is per device
            with self._cupy.cuda.Device(self._device):
                self._launch(A, B, C, D, alpha, beta, stream, maps, partials)
        elif self.partials_bytes or self._chain is not None:
            self._launch(A, B, C, D, alpha, beta, stream, maps, partials)
        else:   # the common case, without the call of _launch
            self._fn(self._grid, self._block, (A, B, C, D, self._null, alpha, beta) + maps,
                     shared_mem=self._shared, stream=stream)

    def _launch(self, A, B, C, D, alpha, beta, stream, maps, partials):
        """Launch on the current device: one kernel, or with split-K the kernel and the reduction, their
        partial sums at ``partials`` (0: in scratch memory of this call). In a chain, A, B, C, D are device
        addresses (ints)."""
        chain = self._chain
        if not self.partials_bytes:
            if chain is not None:
                chain[0]((stream or self._cupy.cuda.get_current_stream()).ptr, (A, B, C, D, 0), (alpha, beta) + maps)
            else:
                self._fn(self._grid, self._block, (A, B, C, D, self._null, alpha, beta) + maps,
                         shared_mem=self._shared, stream=stream)
            return
        if stream is None:
            self._split(A, B, C, D, alpha, beta, maps, partials)
        else:
            with stream:   # CuPy launches on its current stream
                self._split(A, B, C, D, alpha, beta, maps, partials)

    def _split(self, A, B, C, D, alpha, beta, maps, partials):
        """The kernel and split-K's reduction on CuPy's current stream, as :meth:`_launch` takes them."""
        handle = self._cupy.cuda.get_current_stream().ptr
        scratch = None if partials else Scratch(self._cupy, self.partials_bytes, handle)
        partials = partials or scratch.ptr
        if self._chain is not None:
            kernel, reduce = self._chain
            kernel(handle, (A, B, C, D, partials), (alpha, beta) + maps)
            reduce(handle, (partials, C, D), (alpha, beta))
        else:
            address = self._address(partials)
            self._fn(self._grid, self._block, (A, B, C, D, address, alpha, beta) + maps, shared_mem=self._shared)
            self._reduce(self._reduce_grid, self._reduce_block, (address, C, D, alpha, beta))
        if scratch is not None:
            scratch.release(self._cupy)

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


SCRATCH_ALIGN = 256   # bytes: each piece of a call's scratch memory starts on whole L2 lines, as its own array would


class StagedLauncher:
    """A staged or exchanged plan (:mod:`gett.staging`) on one device and array kind: each call copies the
    staged operands into :class:`Scratch` memory, then runs the kernel's plan's :class:`Launcher` on the
    copies, B first where the plan is exchanged. The copies and the split-K partials share one allocation
    (one capture query a call). Same call interface as :class:`Launcher`."""
    __slots__ = ("_copies", "_cupy", "_device", "_exchanged", "_inner", "_offsets", "_scratch_bytes")

    def __init__(self, plan, device: int, kind: str):
        import cupy

        from .kernel import current_arch
        with cupy.cuda.Device(device):
            chained = chains(plan, device)
            self._inner = Launcher(plan.staged_plan, device, kind, chained=chained)
            kernels = plan.copy_kernels(plan.device_arch or current_arch())
            self._copies = tuple(_StagingCopy(st, k, _function(k, k.name, device), chained)
                                 for st, k in zip(plan.staging, kernels))
        self._cupy, self._device, self._exchanged = cupy, device, plan.exchanged
        # the copies' offsets in the call's scratch memory, then the partials'
        sizes = [copy.nbytes for copy in self._copies] + [self._inner.partials_bytes]
        ends = np.cumsum([-(-size // SCRATCH_ALIGN) * SCRATCH_ALIGN for size in sizes]).tolist()
        self._offsets, self._scratch_bytes = [0] + ends[:-1], ends[-1]

    def __call__(self, A, B, C, D, alpha, beta) -> None:
        self.at_addresses(_pointer(A), _pointer(B), _pointer(C), _pointer(D), alpha, beta)

    def at_addresses(self, a: int, b: int, c: int, d: int, alpha, beta) -> None:
        stream = self._inner.stream()
        operands = {"A": a, "B": b}
        with self._cupy.cuda.Device(self._device), stream if stream is not None else contextlib.nullcontext():
            # none where the plan is exchanged only (no copy, no split K)
            scratch = (Scratch(self._cupy, self._scratch_bytes, self._cupy.cuda.get_current_stream().ptr)
                       if self._scratch_bytes else None)
            for copy, offset in zip(self._copies, self._offsets):
                copy.launch(operands[copy.tensor], scratch.ptr + offset)
                operands[copy.tensor] = scratch.ptr + offset
            partials = scratch.ptr + self._offsets[-1] if self._inner.partials_bytes else 0
            first, second = (operands["B"], operands["A"]) if self._exchanged else (operands["A"], operands["B"])
            self._inner.at_addresses(first, second, c, d, alpha, beta, partials)
            if scratch is not None:
                scratch.release(self._cupy)   # once the staged kernel is launched


class _StagingCopy:
    """One staging copy of a :class:`StagedLauncher`: ``launch(source address, destination address)`` runs
    its kernel on CuPy's current stream, through CuPy or, ``chained``, behind the kernel before it."""
    __slots__ = ("_address", "_block", "_fn", "_grid", "_stream", "chained", "launch", "nbytes", "tensor")

    def __init__(self, staging, kernel, fn, chained: bool):
        import cupy
        from cupy.cuda.function import CIntptr
        self.tensor, self.nbytes, self.chained = staging.tensor, staging.nbytes, chained
        self._grid, self._block, self._address = kernel.grid, kernel.block, CIntptr
        self._stream = cupy.cuda.get_current_stream
        if chained:
            self._fn = dependent_launch.DependentLaunch(fn.ptr, kernel.grid, kernel.block, 0, 2, 0)
            self.launch = self._behind
        else:
            self._fn, self.launch = fn, self._plain

    def _plain(self, source: int, to: int) -> None:
        self._fn(self._grid, self._block, (self._address(source), self._address(to)))

    def _behind(self, source: int, to: int) -> None:
        self._fn(self._stream().ptr, (source, to), ())


def _pointer(array) -> int:
    """The device address of a CuPy array or torch tensor (or an int address, passed through)."""
    if isinstance(array, int):
        return array
    data = getattr(array, "data", None)
    return data.ptr if hasattr(data, "ptr") else array.data_ptr()


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


def launcher(plan, device: int, kind: str):
    """The :class:`Launcher` (or :class:`StagedLauncher`) of ``plan`` on ``device``, made on first use and
    kept while the plan lives."""
    key = (id(plan), device, kind)
    entry = _launchers.get(key)
    if entry is None or entry[0]() is not plan:
        ref = weakref.ref(plan, lambda _, key=key: _launchers.pop(key, None))
        make = StagedLauncher if plan.staged_plan is not None else Launcher
        entry = _launchers[key] = (ref, make(plan, device, kind))
    return entry[1]


def _grid(ctas: int) -> tuple:
    return (ctas, 1, 1) if ctas <= _MAX_GRID_X else (_MAX_GRID_X, -(-ctas // _MAX_GRID_X), 1)
