"""plan_contraction: everything about a contraction that can be decided once, before any data moves.

A :class:`ContractionPlan` holds the mode analysis, the index tables, the compute type, the fused
elementwise ops and — once compiled for a GPU architecture — the kernel. It is immutable; plans with
equal signatures are the same object (an in-process cache), so planning a contraction twice costs a
dictionary look-up.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from .descriptor import TensorDescriptor
from .dtypes import ComputeType, resolve_compute_type
from .errors import DeviceError, ModeError, OutputNotWritableError, StrideError
from .modes import GROUPS, ModeAnalysis, analyse_modes, build_tables, normalize_modes
from .ops_spec import OpSpec, make_op_spec
from .plan_cache import PLANS as _PLAN_CACHE   # bounded LRU, thread-safe
from .staging import choose_staging, exchanges_operands

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, eq=False)
class ContractionPlan:
    """A planned contraction ``D = op_out(alpha * Σ_K op_ab(op_a(A), op_b(B)) + beta * op_c(C))``.

    Attributes: ``modes`` (labels per tensor "A", "B", "C"), ``descriptors`` ("A", "B", "C", "D"),
    ``tables`` (one :class:`gett.layout.IndexTable` per GEMM dimension "M", "N", "K", "L"),
    ``compute_type``, ``ops``, ``offset_bits`` (32 or 64: the width of address arithmetic),
    ``signature`` (hashable; equal signatures mean interchangeable plans).
    """
    signature: tuple
    modes: dict
    descriptors: dict
    analysis: ModeAnalysis
    tables: dict
    compute_type: ComputeType
    ops: OpSpec
    offset_bits: int
    device_arch: Optional[str]
    config_override: Any = None
    staging: tuple = ()          # gett.staging.Staging: operands copied into a workspace first
    staged_plan: Any = None      # the plan the kernel runs: over the staged copies, or exchanged (else None)
    exchanged: bool = False      # the kernel's plan takes B as its A and A as its B (gett.staging.exchanges_operands)
    _compiled: dict = field(default_factory=dict, repr=False)   # arch -> gett.kernel.CompiledKernel
    _lock: Any = field(default_factory=threading.Lock, repr=False)

    def __hash__(self):
        return hash(self.signature)

    def __eq__(self, other):
        return isinstance(other, ContractionPlan) and other.signature == self.signature

    # GEMM view -------------------------------------------------------------------------------------------
    @property
    def m(self) -> int:
        return self.tables["M"].size

    @property
    def n(self) -> int:
        return self.tables["N"].size

    @property
    def k(self) -> int:
        return self.tables["K"].size

    @property
    def batch(self) -> int:
        return self.tables["L"].size

    @property
    def is_empty(self) -> bool:
        """True when some extent is 0: nothing is multiplied (D = op_out(beta·op_c(C)) if K is empty)."""
        return any(e == 0 for e in self.analysis.extents.values())

    @property
    def beta_hint(self):
        """The ``beta`` hint given at plan time: None (not given), False (beta = 0: C is never read), True."""
        return self.signature[5]

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch

    @property
    def moved_bytes(self) -> int:
        """Bytes the contraction itself reads and writes: A, B, D, and C unless beta is known to be 0."""
        d = self.descriptors
        return d["A"].nbytes + d["B"].nbytes + d["D"].nbytes + (d["C"].nbytes if self.beta_hint is not False else 0)

    # Kernel ----------------------------------------------------------------------------------------------
    def kernel(self, arch: Optional[str] = None):
        """The compiled kernel for ``arch`` (default: the plan's ``device_arch`` or the current device),
        compiled on first use and kept. Needs NVRTC, not a GPU."""
        from .kernel import build_kernel, current_arch
        arch = arch or self.device_arch or current_arch()
        if self.staged_plan is not None:
            return self.staged_plan.kernel(arch)
        with self._lock:
            if arch not in self._compiled:
                self._compiled[arch] = build_kernel(self, arch)
            return self._compiled[arch]

    def copy_kernels(self, arch: Optional[str] = None) -> tuple:
        """The compiled copy kernels of ``staging`` (one per staged operand, in order) for ``arch``."""
        from .kernel import build_copy, current_arch
        arch = arch or self.device_arch or current_arch()
        with self._lock:
            key = ("copies", arch)
            if key not in self._compiled:
                self._compiled[key] = tuple(build_copy(st, arch) for st in self.staging)
            return self._compiled[key]

    @property
    def kernel_report(self):
        """Resource report (registers, spills, shared memory, compile time) of the compiled kernel."""
        return self.kernel().report

    def __repr__(self) -> str:
        d = self.descriptors
        lines = [
            "ContractionPlan(",
            f"  D[{''.join(map(str, self.modes['C']))}] = sum A[{''.join(map(str, self.modes['A']))}] * "
            f"B[{''.join(map(str, self.modes['B']))}]   dtypes A {d['A'].dtype} B {d['B'].dtype} "
            f"C/D {d['C'].dtype}, compute {self.compute_type}",
            f"  GEMM M={self.m} N={self.n} K={self.k} batch={self.batch}; {self.offset_bits}-bit offsets",
        ]
        if self.analysis.summed_single:
            lines.append(f"  summed in one input only: {self.analysis.summed_single}")
        if self.analysis.broadcast:
            lines.append(f"  broadcast in D: {self.analysis.broadcast}")
        for g in GROUPS:
            lines.append("  " + self.tables[g].describe().replace("\n", "\n  "))
        if self.exchanged:
            lines.append("  exchanged: the kernel takes B as its first operand (its tiles' rows are B's free modes)")
        for st in self.staging:
            lines.append(f"  staged: {st.tensor} copied to modes {''.join(map(str, st.order))} innermost first "
                         f"(strides {st.target.strides}, {st.nbytes / 2**20:.1f} MiB of workspace)")
        ops = self.ops.describe()
        if ops:
            lines.append(f"  ops: {ops}")
        lines.append(")")
        return "\n".join(lines)


def _descriptor(x, name: str) -> tuple:
    """(descriptor, array-or-None) for an array or a TensorDescriptor."""
    if isinstance(x, TensorDescriptor):
        return x, None
    try:
        return TensorDescriptor.from_array(x), x
    except (TypeError, ValueError) as e:   # keep the class (DTypeError, StrideError), name the tensor
        raise type(e)(f"{name}: {e}") from None


def check_output_strides(desc: TensorDescriptor, name: str) -> None:
    """Reject output strides that are negative or make two elements share memory."""
    if desc.size == 0:
        return   # nothing is written
    dims = [(s, e, i) for i, (s, e) in enumerate(zip(desc.strides, desc.shape)) if e > 1]
    for s, e, i in dims:
        if s < 0:
            raise StrideError(f"{name} has a negative stride {s} in dimension {i}; outputs need strides ≥ 0")
        if s == 0:
            raise StrideError(
                f"{name} has stride 0 in dimension {i} (extent {e}): its elements would alias each other")
    dims.sort()
    for (s0, e0, i0), (s1, e1, i1) in zip(dims, dims[1:]):
        if s1 < s0 * e0:
            raise StrideError(
                f"{name} strides {desc.strides} overlap: dimension {i1} (stride {s1}) steps inside "
                f"dimension {i0} (stride {s0} × extent {e0}), so elements alias each other")


def plan_contraction(A, modes_A, B, modes_B, C, modes_C, *, D=None, compute_type=None,
                     alpha=None, beta=None, op_a=None, op_b=None, op_c=None, op_out=None,
                     op_ab=None, reduce=None, broadcast=(), device_arch=None,
                     config=None, staging=None, autotune=None) -> ContractionPlan:
    """Plan ``D[modes_C] = op_out(alpha · Σ op_ab(op_a(A), op_b(B)) + beta · op_c(C))``.

    ``A``, ``B``, ``C`` (and optionally ``D``, default: C's layout) are arrays (numpy, CuPy, PyTorch) or
    :class:`TensorDescriptor` objects; modes are strings (one character per mode) or sequences of int/str labels.
    ``compute_type`` selects the arithmetic (None: f32 accumulation for f16/bf16/f32, the data type otherwise;
    "tf32"/"3xtf32" for f32 tensor-core paths). ``alpha``/``beta`` are hints (``beta=0`` tells the planner C is not
    read). ``op_*`` are elementwise functions (lambdas or :mod:`gett.ops`); ``op_ab`` and ``reduce=(function,
    identity)`` define a custom semiring. ``broadcast`` lists modes that appear in C only. ``staging``: None lets the
    planner copy A and/or B into a dense layout first where that pays (:mod:`gett.staging`; the copies take workspace
    from CuPy's memory pool at each call), False never does, True stages both (where not already dense).
    ``device_arch`` (e.g. "sm_90") compiles the kernel ahead for that architecture, no GPU needed. ``autotune``
    (seconds, or True for 20 s) times candidate kernel configurations on the current GPU first, unless the plan
    database has this plan already (:func:`gett.tuner.autotune`; without a GPU it warns and plans as usual). Raises
    subclasses of ``ValueError``/``TypeError`` naming the tensor, mode and values on bad input.
    """
    if staging not in (None, True, False):
        raise TypeError(f"staging must be None (the planner decides), True or False, got {staging!r}")
    descs, arrays = {}, {}
    for name, x in (("A", A), ("B", B), ("C", C)):
        descs[name], arrays[name] = _descriptor(x, name)
    descs["D"], arrays["D"] = _descriptor(D, "D") if D is not None else (descs["C"], arrays["C"])
    modes = {"A": normalize_modes(modes_A, descs["A"].ndim, "A"),
             "B": normalize_modes(modes_B, descs["B"].ndim, "B"),
             "C": normalize_modes(modes_C, descs["C"].ndim, "C")}
    if descs["D"].ndim != descs["C"].ndim:
        raise ModeError(f"D has {descs['D'].ndim} dimensions but C has {descs['C'].ndim}")
    check_output_strides(descs["D"], "D" if D is not None else "C (the output, D defaults to C)")
    _check_arrays(arrays)
    compute = resolve_compute_type(descs["A"].dtype, descs["B"].dtype, descs["C"].dtype,
                                   descs["D"].dtype, compute_type)
    ops = make_op_spec(descs, op_a=op_a, op_b=op_b, op_c=op_c, op_out=op_out, op_ab=op_ab,
                       reduce=reduce, compute=compute)
    if device_arch is None and any(a is not None and _on_gpu(a) for a in arrays.values()):
        from .kernel import current_arch
        device_arch = current_arch()
    beta_class = None if beta is None else (beta != 0)
    signature = (
        tuple(modes[t] for t in "ABC"),
        _descriptors_key(descs), compute.name, ops.key, tuple(broadcast), beta_class, device_arch, config, staging,
    )
    plan = _PLAN_CACHE.get(signature)
    if plan is None:
        plan = _PLAN_CACHE.put(signature, _build_plan(signature, descs, modes, compute, ops, broadcast,
                                                      beta_class, device_arch, config, staging))
    if autotune is not None:
        from .tuner import autotune as tune_plan
        tune_plan(plan, autotune)
    if device_arch is not None and not plan.is_empty:
        plan.kernel(device_arch)   # plan time includes compile time (DESIGN.md, data flow step 2)
        plan.copy_kernels(device_arch)
    return plan


def _descriptors_key(descs: dict) -> tuple:
    """What a plan's signature holds of the tensors A, B, C, D."""
    return tuple((d.shape, d.strides, d.dtype.name, d.alignment) for d in (descs[t] for t in "ABCD"))


def _build_plan(signature, descs, modes, compute, ops, broadcast, beta_class, device_arch, config,
                staging=None):
    analysis = analyse_modes(descs, modes, broadcast)
    traffic = {"A": descs["A"].nbytes, "B": descs["B"].nbytes, "D": descs["D"].nbytes,
               "C": descs["C"].nbytes if beta_class else 0}
    tables = build_tables(analysis, descs, modes, traffic)
    offset_bits = 32
    for t in "ABCD":
        lo = sum(tables[g].offset_range(t)[0] for g in GROUPS)
        hi = sum(tables[g].offset_range(t)[1] for g in GROUPS)
        if max(-lo, hi) > _INT32_MAX:
            offset_bits = 64
    plan = ContractionPlan(signature, modes, descs, analysis, tables, compute, ops, offset_bits,
                           device_arch, config)
    exchanged = config is None and exchanges_operands(plan)
    kernel_side = plan
    if exchanged:   # the same contraction with B first: its ops are the plain product's, no unary op
        x_descs, x_modes = {**descs, "A": descs["B"], "B": descs["A"]}, {**modes, "A": modes["B"], "B": modes["A"]}
        kernel_side = _build_plan(_kernel_signature(signature, x_modes, x_descs, ops), x_descs, x_modes, compute,
                                  ops, broadcast, beta_class, device_arch, config, staging=False)
    copies = () if staging is False else choose_staging(kernel_side, force=staging is True)
    if copies:
        k_descs, k_modes = kernel_side.descriptors, kernel_side.modes
        staged = {**k_descs, **{st.tensor: st.target for st in copies}}
        inner_ops = replace(ops, **{f"op_{st.tensor.lower()}": None for st in copies})   # the copies apply them
        kernel_side = _build_plan(_kernel_signature(signature, k_modes, staged, inner_ops), staged, k_modes, compute,
                                  inner_ops, broadcast, beta_class, device_arch, config, staging=False)
    if kernel_side is plan:
        return plan
    # the copies named by this plan's operands (the exchanged plan's A is B)
    copies = tuple(replace(st, tensor={"A": "B", "B": "A"}[st.tensor]) for st in copies) if exchanged else copies
    return ContractionPlan(signature, modes, descs, analysis, tables, compute, ops, offset_bits,
                           device_arch, config, copies, kernel_side, exchanged)


def _kernel_signature(signature, modes, descs, ops) -> tuple:
    """The signature of a plan the kernel runs in place of the one of ``signature`` (over staged copies, or
    with A and B exchanged): its own modes, tensors and ops, never staged again."""
    return ((modes["A"], modes["B"], modes["C"]), _descriptors_key(descs), signature[2], ops.key, *signature[4:-1],
            False)


def _on_gpu(array) -> bool:
    from .arrays import NUMPY, array_kind
    return array_kind(array) != NUMPY


def _check_arrays(arrays: dict) -> None:
    """Arrays given at plan time must all be host arrays or all on one device; D must be writable."""
    from .arrays import describe
    infos = {t: describe(a) for t, a in arrays.items() if a is not None}
    devices = {t: i.device for t, i in infos.items()}
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{t} on {'host' if d < 0 else f'cuda:{d}'}" for t, d in devices.items())
        raise DeviceError(f"arrays are on different devices: {where}")
    if "D" in infos and not infos["D"].writable:
        raise OutputNotWritableError("the output array (D) is read-only")


def clear_plan_cache() -> None:
    """Forget every cached plan (compiled kernels stay in the disk cache)."""
    _PLAN_CACHE.clear()


def plan_cache_size() -> int:
    return len(_PLAN_CACHE)
