"""cuTENSOR 2.x contractions through its C API (ctypes): the benchmark's reference peer.

CuPy's ``cupyx.cutensor`` refuses f16 data with f32 compute, so this calls the C API directly.
Signatures follow cuTENSOR 2.x's ``cutensor.h``; enum values its ``cutensor/types.h``; data types
are CUDA's ``cudaDataType_t`` (``library_types.h``).
"""

from __future__ import annotations

import ctypes
import os
import time
from ctypes import POINTER, byref, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p

# cutensorOperator_t, cutensorAlgo_t, cutensorWorksizePreference_t, cutensorJitMode_t,
# cutensorOperationDescriptorAttribute_t, cutensorPlanAttribute_t, cutensorStatus_t
OP_IDENTITY = 1
ALGO_DEFAULT = -1
WORKSPACE_DEFAULT = 2
JIT_MODE_NONE = 0
JIT_MODE_DEFAULT = 1
OPERATION_DESCRIPTOR_SCALAR_TYPE = 1
PLAN_REQUIRED_WORKSPACE = 0
STATUS_SUCCESS = 0

# cudaDataType_t of the data types the benchmark uses, keyed by numpy dtype name.
CUDA_DATA_TYPES = {"float16": 2, "bfloat16": 14, "float32": 0, "float64": 1}
# Host types of alpha and beta, keyed by the cudaDataType_t cuTENSOR asks for.
SCALAR_TYPES = {CUDA_DATA_TYPES["float32"]: ctypes.c_float, CUDA_DATA_TYPES["float64"]: ctypes.c_double}

# Where to look for the library: the loader path first, then where the project's
# shared/peers/cutensor/activate.sh unpacks it.
LIBRARY_CANDIDATES = ("libcutensor.so.2", "/tmp/gett-peers/cutensor/libcutensor.so.2")

_handle_p = POINTER(c_void_p)
_SIGNATURES = {
    "cutensorGetVersion": (c_size_t, []),
    "cutensorGetErrorString": (c_char_p, [c_int]),
    "cutensorCreate": (c_int, [_handle_p]),
    "cutensorDestroy": (c_int, [c_void_p]),
    "cutensorCreateTensorDescriptor": (
        c_int, [c_void_p, _handle_p, c_uint32, POINTER(c_int64), POINTER(c_int64), c_int, c_uint32]),
    "cutensorDestroyTensorDescriptor": (c_int, [c_void_p]),
    "cutensorCreateContraction": (
        c_int,
        [c_void_p, _handle_p,
         c_void_p, POINTER(c_int32), c_int,
         c_void_p, POINTER(c_int32), c_int,
         c_void_p, POINTER(c_int32), c_int,
         c_void_p, POINTER(c_int32),
         c_void_p]),
    "cutensorDestroyOperationDescriptor": (c_int, [c_void_p]),
    "cutensorOperationDescriptorGetAttribute": (c_int, [c_void_p, c_void_p, c_int, c_void_p, c_size_t]),
    "cutensorCreatePlanPreference": (c_int, [c_void_p, _handle_p, c_int, c_int]),
    "cutensorDestroyPlanPreference": (c_int, [c_void_p]),
    "cutensorEstimateWorkspaceSize": (c_int, [c_void_p, c_void_p, c_void_p, c_int, POINTER(c_uint64)]),
    "cutensorCreatePlan": (c_int, [c_void_p, _handle_p, c_void_p, c_void_p, c_uint64]),
    "cutensorDestroyPlan": (c_int, [c_void_p]),
    "cutensorPlanGetAttribute": (c_int, [c_void_p, c_void_p, c_int, c_void_p, c_size_t]),
    "cutensorContract": (
        c_int,
        [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
         c_void_p, c_uint64, c_void_p]),
}


class CutensorError(RuntimeError):
    """A cuTENSOR call returned a status other than success."""


def _preload_dependencies() -> None:
    """Load cuBLASLt (libcutensor links against it) and NVRTC (its JIT opens it) from wherever CUDA's
    pathfinder finds them (pip wheels, CUDA_HOME), so the loader resolves them by name even when
    they are not on its search path."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return
    for name in ("cublasLt", "nvrtc"):
        try:
            load_nvidia_dynamic_lib(name)
        except Exception:  # not found that way: the loader's own search may still succeed
            pass


def load_library(candidates: tuple[str, ...] = LIBRARY_CANDIDATES) -> ctypes.CDLL:
    """Load libcutensor 2.x and declare the signatures used here; OSError listing what was tried."""
    _preload_dependencies()
    errors = []
    for name in candidates:
        if os.path.isabs(name) and not os.path.exists(name):
            errors.append(f"{name}: no such file")
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
            continue
        for fn_name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, fn_name)
            fn.restype, fn.argtypes = restype, argtypes
        return lib
    raise OSError("cuTENSOR 2 not loadable (" + "; ".join(errors) + ")")


def _alignment(ptr: int) -> int:
    """Largest power of two, at most 256, that divides the address ``ptr``."""
    return min(256, ptr & -ptr) if ptr else 256


class Cutensor:
    """A cuTENSOR handle on the current CUDA device."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.handle = c_void_p()
        self.check(lib.cutensorCreate(byref(self.handle)), "cutensorCreate")

    @property
    def version(self) -> int:
        """cuTENSOR's version number, e.g. 20800 for 2.8.0."""
        return int(self.lib.cutensorGetVersion())

    def check(self, status: int, call: str) -> None:
        """Raise CutensorError naming ``call`` unless ``status`` is success."""
        if status != STATUS_SUCCESS:
            message = self.lib.cutensorGetErrorString(status)
            text = message.decode() if message else "unknown status"
            raise CutensorError(f"{call} failed: {text} ({status})")

    def compute_descriptor(self, name: str) -> c_void_p:
        """The global compute descriptor ``name``, e.g. ``CUTENSOR_COMPUTE_DESC_32F``."""
        return c_void_p(c_void_p.in_dll(self.lib, name).value)

    def contraction(self, A, modes_A: str, B, modes_B: str, C, modes_C: str, compute: str,
                    jit: bool) -> "ContractionPlan":
        """Plan ``D = alpha A B + beta C`` for CuPy arrays of these shapes, strides and dtypes (D like
        C). ``compute`` names the compute descriptor; ``jit`` lets cuTENSOR compile a kernel for this
        contraction while planning. The plan's ``plan_seconds`` is the wall time of planning."""
        return ContractionPlan(self, (A, modes_A), (B, modes_B), (C, modes_C), compute, jit)

    def close(self) -> None:
        """Destroy the handle (plans made from it must be closed first)."""
        if self.handle:
            self.check(self.lib.cutensorDestroy(self.handle), "cutensorDestroy")
            self.handle = c_void_p()


class ContractionPlan:
    """A cuTENSOR contraction plan with its descriptors and workspace; call it to contract."""

    def __init__(self, owner: Cutensor, a, b, c, compute: str, jit: bool):
        import cupy

        self.owner = owner
        self._cleanup = []  # destroy calls, in creation order
        lib, handle = owner.lib, owner.handle
        start = time.perf_counter()
        try:
            descs, modes = [], []
            for array, labels in (a, b, c):
                descs.append(self._tensor_descriptor(array))
                modes.append((c_int32 * len(labels))(*map(ord, labels)))
            self.op = self._create(
                "cutensorCreateContraction", lib.cutensorDestroyOperationDescriptor,
                lambda out: lib.cutensorCreateContraction(
                    handle, out,
                    descs[0], modes[0], OP_IDENTITY,
                    descs[1], modes[1], OP_IDENTITY,
                    descs[2], modes[2], OP_IDENTITY,
                    descs[2], modes[2],  # cuTENSOR requires descD == descC
                    owner.compute_descriptor(compute)))
            scalar_type = c_int()
            owner.check(lib.cutensorOperationDescriptorGetAttribute(
                handle, self.op, OPERATION_DESCRIPTOR_SCALAR_TYPE, byref(scalar_type), ctypes.sizeof(scalar_type)),
                "cutensorOperationDescriptorGetAttribute")
            if scalar_type.value not in SCALAR_TYPES:
                raise CutensorError(f"unexpected scalar type {scalar_type.value} for {compute}")
            self.scalar = SCALAR_TYPES[scalar_type.value]
            self.pref = self._create(
                "cutensorCreatePlanPreference", lib.cutensorDestroyPlanPreference,
                lambda out: lib.cutensorCreatePlanPreference(
                    handle, out, ALGO_DEFAULT, JIT_MODE_DEFAULT if jit else JIT_MODE_NONE))
            estimate = c_uint64()
            owner.check(lib.cutensorEstimateWorkspaceSize(handle, self.op, self.pref, WORKSPACE_DEFAULT,
                                                          byref(estimate)), "cutensorEstimateWorkspaceSize")
            self.plan = self._create(
                "cutensorCreatePlan", lib.cutensorDestroyPlan,
                lambda out: lib.cutensorCreatePlan(handle, out, self.op, self.pref, estimate.value))
            required = c_uint64()
            owner.check(lib.cutensorPlanGetAttribute(handle, self.plan, PLAN_REQUIRED_WORKSPACE,
                                                     byref(required), ctypes.sizeof(required)),
                        "cutensorPlanGetAttribute")
            self.workspace_size = required.value
            self.workspace = cupy.empty(self.workspace_size, dtype=cupy.uint8) if self.workspace_size else None
        except BaseException:
            self._destroy_all()  # the original error matters more than a failed clean-up
            raise
        self.plan_seconds = time.perf_counter() - start

    def _create(self, call: str, destroy, create) -> c_void_p:
        """Run ``create(&obj)``, check it, and remember ``destroy(obj)`` for close()."""
        obj = c_void_p()
        self.owner.check(create(byref(obj)), call)
        self._cleanup.append((destroy.__name__, lambda: destroy(obj)))
        return obj

    def _tensor_descriptor(self, array) -> c_void_p:
        """Descriptor of a CuPy array: its extents, strides in elements, data type and alignment."""
        if array.dtype.name not in CUDA_DATA_TYPES:
            raise TypeError(f"no cuTENSOR data type for {array.dtype}")
        ndim = array.ndim
        extents = (c_int64 * ndim)(*array.shape)
        strides = (c_int64 * ndim)(*(s // array.itemsize for s in array.strides))
        return self._create(
            "cutensorCreateTensorDescriptor", self.owner.lib.cutensorDestroyTensorDescriptor,
            lambda out: self.owner.lib.cutensorCreateTensorDescriptor(
                self.owner.handle, out, ndim, extents, strides, CUDA_DATA_TYPES[array.dtype.name],
                _alignment(array.data.ptr)))

    def __call__(self, alpha: float, A, B, beta: float, C, D, stream=None) -> None:
        """Enqueue ``D = alpha A B + beta C`` on ``stream`` (default: CuPy's current stream). The
        arrays must be laid out like the ones the plan was made for."""
        import cupy

        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        alpha_c, beta_c = self.scalar(alpha), self.scalar(beta)  # host scalars of the compute type
        workspace = self.workspace.data.ptr if self.workspace is not None else None
        self.owner.check(
            self.owner.lib.cutensorContract(
                self.owner.handle, self.plan, byref(alpha_c), A.data.ptr, B.data.ptr, byref(beta_c),
                C.data.ptr, D.data.ptr, workspace, self.workspace_size, stream.ptr),
            "cutensorContract")

    def _destroy_all(self) -> list[tuple[str, int]]:
        """Destroy everything created, newest first; the (call, status) pairs that failed."""
        failed = [(call, status) for call, destroy in reversed(self._cleanup)
                  if (status := destroy()) != STATUS_SUCCESS]
        self._cleanup = []
        self.workspace = None
        return failed

    def close(self) -> None:
        """Destroy the plan, preference, operation and tensor descriptors; free the workspace.
        Call after the work using the plan has finished."""
        for call, status in self._destroy_all():
            self.owner.check(status, call)
