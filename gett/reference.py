"""The numpy reference executor: runs a plan on host arrays through the plan's own index tables.

It gathers A, B and C element by element with the offsets the GPU kernel uses, multiplies in the
widest type of the data's kind (float64, complex128, int64 — integer results wrap as the kernel's
do), applies the fused ops and scatters into D. It exists to validate the tables and to let users
develop without a GPU; it is a reference, not a fast path.
"""
from __future__ import annotations

import numpy as np

from .modes import GROUPS

_WIDE = {"f": np.float64, "c": np.complex128, "i": np.int64}
_CHUNK_ELEMENTS = 1 << 24   # bound the temporaries of one gather: batch entries are done in slices


def flat_view(array: np.ndarray):
    """A 1-D element view of the memory ``array`` spans, and the position of element (0, ..., 0) in it.

    Writable exactly when ``array`` is; shares its memory."""
    if array.ndim == 0:
        return array.reshape(1), 0
    item = array.itemsize
    lowest = array[tuple(slice(e - 1, e) if s < 0 else slice(0, 1)
                         for e, s in zip(array.shape, array.strides))]
    lo = sum((e - 1) * s for e, s in zip(array.shape, array.strides) if s < 0)
    hi = sum((e - 1) * s for e, s in zip(array.shape, array.strides) if s > 0)
    flat = np.lib.stride_tricks.as_strided(lowest, shape=((hi - lo) // item + 1,), strides=(item,),
                                           writeable=bool(array.flags.writeable))
    return flat, -lo // item


def _gather(flat, base, tables, tensor, groups, dims, l_index):
    """Gather ``flat`` at offsets of the given groups for batch entries ``l_index`` → shape (len(l), *dims)."""
    off = tables["L"].offsets(tensor, l_index)
    shape = [len(l_index)]
    for g in groups:
        o = tables[g].offsets(tensor)
        off = off[..., None] + o.reshape((1,) * len(shape) + (-1,))
        shape.append(dims[g])
    return flat[off + base]


def execute_reference(plan, alpha, A, B, beta, C, D) -> None:
    """Compute the plan on numpy arrays, writing D in place. Arrays are already checked against the plan."""
    t = plan.tables
    dtype = plan.descriptors["A"].dtype
    wide = _WIDE[plan.compute_type.accumulator.kind if dtype.kind != "c" else "c"]
    dims = {g: t[g].size for g in GROUPS}
    fa, ba = flat_view(A)
    fb, bb = flat_view(B)
    fd, bd = flat_view(D)
    read_c = beta != 0
    if read_c:
        fc, bc = flat_view(C)
    ops = plan.ops
    rows = max(1, dims["M"] * max(dims["K"], dims["N"]))
    step = max(1, _CHUNK_ELEMENTS // rows)
    for start in range(0, dims["L"], step):
        l_index = np.arange(start, min(start + step, dims["L"]), dtype=np.int64)
        a = _gather(fa, ba, t, "A", ("M", "K"), dims, l_index).astype(wide)
        b = _gather(fb, bb, t, "B", ("K", "N"), dims, l_index).astype(wide)
        if ops.op_a is not None:
            a = ops.op_a.evaluate(a)
        if ops.op_b is not None:
            b = ops.op_b.evaluate(b)
        acc = _semiring_product(a, b, ops, wide)
        out = acc * np.asarray(alpha).astype(wide) if alpha != 1 else acc
        if read_c:
            c = _gather(fc, bc, t, "C", ("M", "N"), dims, l_index).astype(wide)
            if ops.op_c is not None:
                c = ops.op_c.evaluate(c)
            out = out + np.asarray(beta).astype(wide) * c
        if ops.op_out is not None:
            out = ops.op_out.evaluate(out)
        off = _offsets(t, "D", ("M", "N"), dims, l_index) + bd
        with np.errstate(over="ignore", invalid="ignore"):
            fd[off] = out.astype(D.dtype) if D.dtype.kind != "c" or np.iscomplexobj(out) else out


def _offsets(t, tensor, groups, dims, l_index):
    off = t["L"].offsets(tensor, l_index)
    n = 1
    for g in groups:
        off = off[..., None] + t[g].offsets(tensor).reshape((1,) * n + (-1,))
        n += 1
    return off


def _semiring_product(a, b, ops, wide):
    """Batched (L, M, K) × (L, K, N) → (L, M, N) under the plan's semiring."""
    if ops.is_plus_times:
        with np.errstate(over="ignore"):
            return np.matmul(a, b)
    L, M, K = a.shape
    N = b.shape[2]
    ident = ops.reduce_identity if ops.reduce is not None else 0
    acc = np.full((L, M, N), ident, dtype=wide)
    for k in range(K):   # one depth slice at a time keeps memory at L·M·N
        prod = (ops.op_ab.evaluate(a[:, :, k, None], b[:, None, k, :]) if ops.op_ab is not None
                else a[:, :, k, None] * b[:, None, k, :])
        acc = ops.reduce.evaluate(acc, prod) if ops.reduce is not None else acc + prod
    return acc
