"""contract: run a plan on arrays — numpy through the reference executor, CuPy/PyTorch on the GPU."""
from __future__ import annotations

from .arrays import KINDS, NUMPY, describe, kind_of
from .errors import DeviceError, OutputNotWritableError, PlanMismatchError
from .launch import launcher
from .plan_cache import ACCEPTED as _ACCEPTED

# _ACCEPTED holds the calls that passed every check (see gett.plan_cache); gett.clear_cache() empties it.


def _check(plan, name: str, array, tensor: str):
    """Describe ``array`` and check it against the plan's descriptor of ``tensor``."""
    try:
        info = describe(array)
    except (TypeError, ValueError) as e:   # keep the class (DTypeError, StrideError), name the tensor
        raise type(e)(f"{name}: {e}") from None
    want = plan.descriptors[tensor]
    if info.shape != want.shape:
        raise PlanMismatchError(f"{name} has shape {info.shape}, the plan was made for {want.shape}")
    if info.dtype != want.dtype:
        raise PlanMismatchError(f"{name} has dtype {info.dtype.name}, the plan was made for {want.dtype.name}")
    if info.strides != want.strides:
        raise PlanMismatchError(
            f"{name} has strides {info.strides} (elements), the plan was made for {want.strides}")
    if info.alignment < want.alignment and info.kind != NUMPY:
        raise PlanMismatchError(
            f"{name} data pointer is {info.alignment}-byte aligned, the plan assumes {want.alignment}")
    return info


def contract(plan, alpha, A, B, beta, C, D=None):
    """Run ``plan``: ``D = op_out(alpha · Σ op_ab(op_a(A), op_b(B)) + beta · op_c(C))``; returns D.

    ``D`` defaults to ``C`` (in place). Arrays must match the plan's shapes, strides and dtypes and all
    live on one device (or all be numpy arrays, which run the reference executor). When ``beta == 0``,
    C is never read (it may hold NaN). Work is launched on the current stream (PyTorch's for torch
    tensors, CuPy's otherwise) and is not synchronised. Nothing is written to D if an error is raised.
    """
    out = C if D is None else D
    key = _signature_key(plan, A, B, C, out)
    if key is not None:
        accepted = _ACCEPTED.get(key)
        if accepted is not None:
            accepted[0](A, B, C, out, alpha, beta)
            return out
    infos = {"A": _check(plan, "A", A, "A"), "B": _check(plan, "B", B, "B"),
             "C": _check(plan, "C", C, "C"), "D": _check(plan, "D" if D is not None else "C (as D)", out, "D")}
    kinds = {i.kind for i in infos.values()}
    devices = {i.device for i in infos.values()}
    if len(devices) > 1 or (NUMPY in kinds and len(kinds) > 1):
        where = ", ".join(f"{t}: {i.kind} on {'host' if i.device < 0 else f'cuda:{i.device}'}"
                          for t, i in infos.items())
        raise DeviceError(f"arrays must all be on one device ({where})")
    if not infos["D"].writable:
        raise OutputNotWritableError("the output array is read-only")
    if infos["A"].kind == NUMPY:
        _run_host(plan, alpha, A, B, beta, C, out)
        return out
    run = launcher(plan, infos["D"].device, infos["D"].kind)
    if len(kinds) > 1:   # e.g. torch bf16 inputs with a CuPy output: only their addresses are common
        run.at_addresses(infos["A"].pointer, infos["B"].pointer, infos["C"].pointer, infos["D"].pointer,
                         alpha, beta)
        return out
    run(A, B, C, out, alpha, beta)
    if key is not None:
        _ACCEPTED.put(key, (run, plan))
    return out


def _signature_key(plan, A, B, C, D):
    """The memo key of a call on four GPU arrays of one type; None for anything else (host arrays, mixed
    or foreign types)."""
    t = type(A)
    kind = KINDS.get(t) or kind_of(A)
    if kind is None or kind.name == NUMPY or type(B) is not t or type(C) is not t or type(D) is not t:
        return None
    signature = kind.signature
    try:
        c = signature(C)   # in place (D is C), the one signature serves both where a kind's are the same
        d = c if D is C and kind.out_signature is signature else kind.out_signature(D)
        return (id(plan), signature(A), signature(B), c, d)
    except (TypeError, AttributeError):   # e.g. a CPU tensor: the checks say what is wrong
        return None


def _run_host(plan, alpha, A, B, beta, C, D):
    from .reference import execute_reference
    if plan.is_empty:
        _run_empty_host(plan, alpha, beta, C, D)
        return
    execute_reference(plan, alpha, A, B, beta, C, D)


def _run_empty_host(plan, alpha, beta, C, D):
    """Some extent is 0: with an empty K, D = op_out(beta·op_c(C)) (the sum is the reduction's identity)."""
    import numpy as np
    if D.size == 0:
        return
    ident = plan.ops.reduce_identity if plan.ops.reduce is not None else 0
    acc = np.full(D.shape, ident, dtype=np.result_type(D.dtype, np.float64) if D.dtype.kind == "f" else D.dtype)
    out = alpha * acc
    if beta != 0:
        c = C.astype(out.dtype)
        if plan.ops.op_c is not None:
            c = plan.ops.op_c.evaluate(c)
        out = out + beta * c
    if plan.ops.op_out is not None:
        out = plan.ops.op_out.evaluate(out)
    D[...] = out
