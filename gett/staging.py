"""Operand staging: copy A and/or B into a dense layout before the contraction kernel runs.

A contraction kernel re-reads each operand many times (once per tile row or column of the other
operand), so where an operand's layout gives the kernel only short or scattered runs — 72-element runs
of a TCCG tensor (144 bytes, rarely line-aligned), or a K box whose runs are 8 elements because A and B
are contiguous along different K modes — one copy into a GEMM-friendly layout can cost far less than
what it saves. Measured on an H100 (f16): #20 ``abcd-aebf-dfce`` 845 -> 434 us for the contraction
on staged copies, #28 ``abcd-eafb-fdec`` 1539 -> 540 us.

The staged layout of A is M-major (its M modes in D's order, then the K modes, then the batch modes);
B keeps its stride-1 mode innermost where that is an N or K mode, with its N modes in D's order. The K
modes take one order for both, so K merges into a single contiguous index where it can. Contractions
with enough arithmetic per copied byte are staged for their layout (:data:`FLOPS_PER_COPY_BYTE`);
memory-bound ones only where A and B are contiguous along different K modes, and then A alone, into B's
K order, where a small B shared by many tiles lies N-major, into a K-major copy, and where a small B is
contiguous across the big A's K rows, into A's K order. Exact-f32 (SIMT) plans with enough arithmetic copy
operands contiguous along K, and others that are not dense, into M- and N-major matrices
(:func:`_simt_dense`). Where a small A is shared by many tiles and B is big, the kernel takes B first
(:func:`exchanges_operands`); the copies are then chosen for that order.
A 16-bit operand whose strides or data pointer leave its runs unaligned (a row-major matrix with an odd row
length) is copied in its own order where the plan is large enough and reads it several times
(:func:`_staged_for_alignment`), its runs padded to whole 128-byte lines (or 16-byte vectors); every copy pads
its runs to whole vectors (:func:`run_multiple`). The copies live in a workspace taken from CuPy's memory pool
at each call. An operand's elementwise op
(``op_a``/``op_b``) is applied by its copy, once per element, and the staged contraction runs without it;
an operand with an op is also staged for that alone where the kernel would apply the op many times over
(compute-bound plans, small operands shared by many tiles; :func:`_staged_for_op`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .codegen import ACC_CTYPE, index_type, op_struct, table_type
from .config import math_path
from .descriptor import TensorDescriptor
from .layout import IndexTable

# Flops per byte moved by the staging copies (read + write) above which a plan is staged: 4 x the ratio
# of the math path's rate to copy bandwidth on an H100 (f16 tensor cores ~650 TFLOP/s, f32 FMA ~50,
# copies ~2.6 TB/s), so the copies cost at most a quarter of the contraction's arithmetic time.
FLOPS_PER_COPY_BYTE = {"mma16": 1000, "simt": 80}
# Runs shorter than this (bytes) along an operand's contiguous group make its tensor-core loads slow.
SHORT_RUN_BYTES = 256
# SIMT plans copy operands contiguous along K into M- or N-major layouts where they do at least this many
# flops per byte the copies move (read + write; _simt_dense). H100, f32 GEMMs of two row-major operands,
# both copied: 1024^3 (128 flops a byte) 71 -> 80 us, 1280^3 (160) 153 -> 149, 1536^3 (192) 343 -> 298.
SIMT_K_COPY_FLOPS_PER_BYTE = 192
# ... and copy other operands whose modes do not merge into dense matrices from this many: the gain is
# smaller (#20-#24 f32 at 648 flops a byte: 4%).
SIMT_DENSE_COPY_FLOPS_PER_BYTE = 512
# ... in plans of at least this many flops: the gain, 10-15% of the math time, pays for a copy's launch
# (a few us) from about 30 us of math (1024^3 with one copy, 2.1 GFLOP: 81 -> 75 us).
SIMT_COPY_MIN_FLOPS = 1 << 30
# ... and copy A into B's K order where A and B are contiguous along different K modes (a K box of short runs,
# gathered) from this many flops per byte A's copy moves. H100, #14 ``ab-cad-dcb`` f32 (75 flops a byte): the
# kernel on A's copy (64 x 64 x 32, split 10) 599 us against 790 as is; the copy of 121 MB about 100 us.
SIMT_CONFLICT_COPY_FLOPS_PER_BYTE = 64
# A small operand with an op is copied (the copy applying it) when it is at most 1/SMALL_OPERAND_SHARE of
# the bytes the contraction moves, fills OP_TILE-wide tiles and OP_REUSE_STAGED tiles read each element.
SMALL_OPERAND_SHARE = 64
OP_TILE = 128
OP_REUSE_STAGED = 256
# A plan copies its unaligned 16-bit operands into padded runs where it does at least this many flops, and
# this many per byte it moves (_staged_for_alignment).
ALIGN_MIN_FLOPS = 1 << 24
ALIGN_MIN_INTENSITY = 32
COPY_KERNEL_NAME = "gett_stage_copy"
_INT_MAX = 2**31 - 1
_VECTOR_BYTES, _LINE_BYTES = 16, 128   # a vector access; an L2 line


@dataclass(frozen=True)
class Staging:
    """One operand copied before the contraction: ``tensor`` ("A" or "B"), its ``modes`` (in dimension
    order), their ``order`` in the copy (innermost first), the ``source``/``target`` descriptors (same
    shape), and the operand's elementwise ``op`` (a gett.expr tree or None) with the ``compute`` type
    it runs in: the copy applies it, and the staged contraction reads the copy without it."""
    tensor: str
    modes: tuple
    order: tuple
    source: TensorDescriptor
    target: TensorDescriptor
    op: object = None
    compute: str = "f32"

    @property
    def nbytes(self) -> int:
        """Bytes of the copy's workspace: its span, padding between runs included."""
        lo, hi = self.target.offset_range
        return (hi - lo + 1) * self.target.dtype.itemsize


def _strides(plan, tensor: str) -> dict:
    """mode -> stride of ``tensor`` (D's for "D"), for modes of extent > 1."""
    modes = plan.modes["C" if tensor == "D" else tensor]
    return {m: s for m, s, e in zip(modes, plan.descriptors[tensor].strides, plan.descriptors[tensor].shape)
            if e > 1}


def _fast_mode(plan, tensor: str):
    """The mode of stride 1 in ``tensor``, or None."""
    return next((m for m, s in _strides(plan, tensor).items() if s == 1), None)


def run_bytes(plan, tensor: str) -> int:
    """Bytes of ``tensor``'s longest contiguous run that stays inside the group of its stride-1 mode:
    the run a tile of the kernel can read in one piece (0 without a stride-1 mode)."""
    strides, group_of = _strides(plan, tensor), plan.analysis.group_of
    fast = _fast_mode(plan, tensor)
    if fast is None:
        return 0
    run = 1
    for m, s in sorted(strides.items(), key=lambda ms: abs(ms[1])):
        if s != run or group_of[m] != group_of[fast]:
            break
        run *= plan.analysis.extents[m]
    return run * plan.descriptors[tensor].dtype.itemsize


def dense_strides(shape: tuple, modes: tuple, order: tuple, run_multiple: int = 1) -> tuple:
    """Strides (per dimension of ``modes``) of the dense layout whose innermost mode is ``order[0]``; where that
    mode holds at least ``run_multiple`` elements, its runs start ``run_multiple`` elements apart (padded), so
    that vectors of that many elements stay aligned along every run."""
    extent = dict(zip(modes, shape))
    stride, step = {}, 1
    for i, m in enumerate(order):
        stride[m] = step
        step *= extent[m]
        if i == 0 and step >= run_multiple:
            step = -(-step // run_multiple) * run_multiple
    return tuple(stride[m] for m in modes)


def run_multiple(extent: int, itemsize: int, lines: bool) -> int:
    """Elements a padded run of ``extent`` starts on: whole 16-byte vectors, or with ``lines`` (the copies for
    alignment) whole 128-byte lines where that adds at most an eighth to the run. H100 f16, 4097^3 with rows
    padded to 16 bytes 315 us, to 128 233 (4096^3 190; session 50, .exp/session50/big.py). Not the copies for
    layout: #14's A in 320-element runs (whole lines) measured 122.0 us against 121.4 in 312 (session 12)."""
    vector, line = max(_VECTOR_BYTES // itemsize, 1), max(_LINE_BYTES // itemsize, 1)
    return line if lines and -(-extent // line) * line - extent <= extent // 8 else vector


def own_order(plan, tensor: str) -> tuple:
    """``tensor``'s modes by increasing stride (extent-1 modes last): a copy in this order moves whole runs."""
    desc = plan.descriptors[tensor]
    key = dict(zip(plan.modes[tensor], zip((e == 1 for e in desc.shape), (abs(s) for s in desc.strides))))
    return tuple(sorted(plan.modes[tensor], key=key.__getitem__))


def misaligned(plan, tensor: str) -> bool:
    """Whether ``tensor`` (A or B) has 16-bit elements in runs of a whole 16-byte vector or more along its
    stride-1 mode that its other strides or its data pointer leave unaligned even for pairs (a row-major
    matrix with an odd row length): its tiles then load one element at a time through registers (a 2-byte
    access cannot be an asynchronous copy), where a copy with padded runs (:func:`run_multiple`) loads
    vectors: 16 bytes where the mode is alone in its group (the last one clipped), else as many
    elements as divide its extent. 4-byte elements keep their asynchronous scalar copies: a copy measured no
    faster there (see :func:`_staged_for_alignment`)."""
    desc, fast = plan.descriptors[tensor], _fast_mode(plan, tensor)
    strides = _strides(plan, tensor)
    if desc.dtype.itemsize != 2 or fast is None or plan.analysis.extents[fast] < 16 // desc.dtype.itemsize \
            or any(s < 0 for s in strides.values()):
        return False
    pairs = desc.alignment >= 4 and all(s % 2 == 0 for m, s in strides.items() if m != fast)
    group = plan.tables[plan.analysis.group_of[fast]]
    return not pairs and (len(group.extents) == 1 or plan.analysis.extents[fast] % 2 == 0)


def _staged_for_alignment(plan) -> tuple:
    """Operands copied into padded runs for their alignment alone (:func:`misaligned`), in plans of at least
    ALIGN_MIN_FLOPS that do at least ALIGN_MIN_INTENSITY flops per byte they move (each operand then is read
    by several tiles). H100, row-major f16 (session 50, ``.exp/session50/odd2.py``, ``thresh.py``), as is ->
    with the copies: 'ik,kj->ij' 255^3 18.9 -> 11.6 us, 511^3 22.0 -> 12.9, 767^3 48.6 -> 15.6, 999^3 63.2
    -> 19.6, 2047^3 237 -> 48.2, 4097^3 2011 -> 281, 4095 x 777 x 129 46.4 -> 21.4, 8191 x 65 x 1001 (61
    flops a byte) 51.8 -> 38.8, 'bik,bkj->bij' 32 x 255^3 67.7 -> 27.1, attention scores with d = 65 315 ->
    167 (torch.einsum 7.2, 13.8, 24.5, 32.3, 120, 1008, 26.4, 39.1, 18.1, 117). Losses where the rules
    refuse: 8191 x 33 x 1001 (32 flops a byte) 30.6 -> 35.3, 8191 x 17 x 1001 28.4 -> 32.8, 2047 x 9 x 2047
    18.8 -> 19.7, 1024 x 33^3 batched 20.5 -> 22.9, matrix-vector products (8191^2) 98 -> 155; and where the
    operands' pairs are aligned (asynchronous 4- or 8-byte copies already): 300^3 8.0 -> 11.4, 100^3 7.0 ->
    11.8, 'abcd,dcef->fabe' with runs of 36 and 28 (benchmarks/common_einsums.py) 22.1 -> 32.4. f32 (its
    scalars copied asynchronously): 4097^3 4164 -> 3941, 999^3 84.2 -> 86.6, 32 x 255^3 42.1 -> 51.8: not
    copied."""
    if plan.flops < ALIGN_MIN_FLOPS or plan.flops < ALIGN_MIN_INTENSITY * plan.moved_bytes:
        return ()
    return tuple(t for t in "AB" if misaligned(plan, t))


def target_orders(plan) -> dict:
    """The staged mode order of A and B: A M-major (M modes in D's order, then K, then batch), except K-major
    where it is copied for a memory-bound K conflict on the 16-bit tensor-core path and its M-major rows would
    not be whole 128-byte lines (:func:`_a_k_major`); B K-major where B is contiguous along K (not on the SIMT
    path, whose fragments read best along N), the plan is a compute-bound one on the 16-bit tensor-core path
    or B is a small N-major operand (:func:`_small_n_major_b`), else N-major (N modes in D's order); one K order
    for both — B's strides where B is contiguous along K (so B's copy keeps its runs), else A's, and A's where B
    is small and copied for A's rows (:func:`_small_b_across_a_rows`). Extent-1 modes go last. A K-major B lets
    the wide wgmma tile take 240 columns (an N-major tile takes whole 64-column swizzle atoms, config._wide_tile)."""
    d = _strides(plan, "D")
    group_of, fast_b = plan.analysis.group_of, _fast_mode(plan, "B")
    b_along_k = fast_b is not None and group_of[fast_b] == "K"
    simt = math_path(plan) == "simt"   # SIMT reads fragments along N best (_simt_dense)
    k_major_b = (b_along_k and not simt) or (math_path(plan) == "mma16" and not _memory_bound(plan)) \
        or _small_n_major_b(plan)
    k_major_a = _a_k_major(plan)
    s = {t: _strides(plan, t) for t in "AB"}
    by_k = "B" if b_along_k and not _small_b_across_a_rows(plan) else "A"
    other = "A" if by_k == "B" else "B"

    def k_key(m):
        return (abs(s[by_k].get(m, 1 << 62)), abs(s[other].get(m, 1 << 62)))

    def group(tensor, g, key):
        return sorted((m for m in s[tensor] if group_of[m] == g), key=key)

    orders = {}
    for t, free in (("A", "M"), ("B", "N")):
        fast = _fast_mode(plan, t)

        def by_d(m, fast=fast):   # the operand's stride-1 mode stays innermost: its copy moves whole runs
            return (m != fast, abs(d.get(m, 1 << 62)))
        first, k = group(t, free, by_d), group(t, "K", k_key)
        mn_major = not k_major_a if t == "A" else not k_major_b
        order = (first + k if mn_major else k + first) + group(t, "L", by_d)
        orders[t] = tuple(order) + tuple(m for m in plan.modes[t] if m not in order)
    return orders


def _a_k_major(plan) -> bool:
    """Whether A's copy for a memory-bound K conflict (:func:`_staged_for_layout`) is K-major, in B's K order,
    rather than M-major: on the 16-bit tensor-core path, where the M-major copy's rows (all of M) would not be
    whole 128-byte lines and the K-major one's (all of K) are. Both operands are then K-major matrices whose
    rows are single runs all along K. H100, f16 ``ab-cad-dcb`` (a x b x c x d, K = c·d; copy and contraction,
    two rounds each, ``benchmarks/results/k_major_conflict_copy_*_session59.txt``): TCCG #14 (312 x 296 x 312 x
    312) 94.4-94.8 us K-major (64 x 160 s8 k13) against 98.7-99.2 for the M-major copy's best; M of 312 or 1000
    with K in whole lines 3-8% faster (1000 x 64 x 128 x 128: 45.9-46.1 -> 42.4-42.5 us), 200 x 200 x 96 x 96
    even; M in whole lines (128 to 8192) even to 8% slower K-major (4096 x 64 x 64 x 64: 38.4-38.8 -> 41.3-41.6),
    22% slower with a short K (4096 x 64 x 8 x 8: 8.6 -> 10.9)."""
    itemsize = plan.descriptors["A"].dtype.itemsize
    whole_lines = lambda n: n * itemsize % _LINE_BYTES == 0
    return (math_path(plan) == "mma16" and not whole_lines(plan.m) and whole_lines(plan.k) and _k_conflict(plan)
            and _memory_bound(plan))


def _memory_bound(plan) -> bool:
    """Whether ``plan`` does fewer flops per byte it moves than its math path's rate over copy bandwidth
    (:data:`FLOPS_PER_COPY_BYTE` / 4). #14 f32 is not (SIMT; its K conflict is :func:`_simt_dense`'s)."""
    threshold = FLOPS_PER_COPY_BYTE.get(math_path(plan))
    return threshold is not None and plan.flops < threshold / 4 * plan.moved_bytes


def _compute_bound(plan, copied: int) -> bool:
    """Whether ``plan`` is not :func:`_memory_bound` and does enough arithmetic per copied byte for a copy
    of ``copied`` bytes to cost at most a quarter of its math time (:data:`FLOPS_PER_COPY_BYTE`)."""
    threshold = FLOPS_PER_COPY_BYTE.get(math_path(plan))
    return threshold is not None and plan.flops >= threshold * 2 * copied and not _memory_bound(plan)


def _k_conflict(plan) -> bool:
    """Whether A and B are contiguous along different K modes (the kernel's K tile is then a box of short runs)."""
    group_of = plan.analysis.group_of
    fast = [_fast_mode(plan, t) for t in "AB"]
    return all(f is not None and group_of[f] == "K" for f in fast) and fast[0] != fast[1]


def _small_and_shared(plan, tensor: str) -> bool:
    """Whether ``tensor`` (A or B) is at most 1/:data:`SMALL_OPERAND_SHARE` of the bytes the contraction
    moves, has a free extent of at least :data:`OP_TILE` and is read by at least :data:`OP_REUSE_STAGED`
    tiles of the other operand: a copy of it costs little beside what its many readers take."""
    free = {"A": plan.m, "B": plan.n}[tensor]
    reuse = -(-(plan.n if tensor == "A" else plan.m) // OP_TILE)
    return (plan.descriptors[tensor].nbytes * SMALL_OPERAND_SHARE <= plan.moved_bytes and free >= OP_TILE
            and reuse >= OP_REUSE_STAGED)


def _room_for_resident_tile(plan) -> bool:
    """No read of C and a 16-bit D: where config._producer_tile can keep an operand's tile for all of K (a
    plan that reads C gets no producer over several tiles; a 32-bit D's epilogue tile leaves the tile no room)."""
    return not plan.beta_hint and plan.descriptors["D"].dtype.itemsize == 2


def _small_n_major_b(plan) -> bool:
    """Whether B is small and shared (:func:`_small_and_shared`) and N-major in a memory-bound plan on the
    16-bit tensor-core path, without an op on A or a read of C, into a 16-bit D. There each CTA of the
    kernel keeps B's tile for all of K (a resident tile, config._producer_tile) and loads it once, which
    costs far more N-major than K-major. H100, f16: #17 ``abc-adc-bd`` 60.6 us; its twin with B K-major in
    memory 52.6 (5 stages of A where the N-major tile, in whole 64-column atoms, leaves room for 3; held
    K-major in shared memory, 5 stages: 60.2 still; B's loads left out, results wrong: 52.2); #18
    ``abc-adc-db`` 52.7 against 60.1 for its N-major twin."""
    fast = _fast_mode(plan, "B")
    # where config._producer_tile keeps B's tile: no op on A, and room for it
    resident = plan.ops.op_a is None and _room_for_resident_tile(plan)
    return (resident and fast is not None and plan.analysis.group_of[fast] == "N" and math_path(plan) == "mma16"
            and _memory_bound(plan) and _small_and_shared(plan, "B"))


def _inner_k_mode(plan, tensor: str):
    """``tensor``'s K mode of least stride (its K rows continue along it), or None."""
    strides, group_of = _strides(plan, tensor), plan.analysis.group_of
    return min((m for m in strides if group_of[m] == "K"), key=lambda m: abs(strides[m]), default=None)


def _small_b_across_a_rows(plan) -> bool:
    """Whether B is small (at most 1/:data:`SMALL_OPERAND_SHARE` of the bytes moved) and contiguous along
    a K mode other than the one that continues the big M-major A's rows, in a memory-bound plan on the
    16-bit tensor-core path. K in B's order makes each of A's K tiles read rows far apart that no later
    tile continues; a copy of B in A's K order makes A's K tiles streams. H100, f16: #19
    ``abc-adec-ebd`` (A's 144-byte rows continue along d, B is contiguous along e) 32.4 us; its twin with
    B laid out (d, e, b) 28.9 (128 x 80, split K 3)."""
    fast_a, fast_b = _fast_mode(plan, "A"), _fast_mode(plan, "B")
    group_of = plan.analysis.group_of
    return (fast_a is not None and group_of[fast_a] == "M" and fast_b is not None and group_of[fast_b] == "K"
            and fast_b != _inner_k_mode(plan, "A") and math_path(plan) == "mma16" and _memory_bound(plan)
            and plan.descriptors["B"].nbytes * SMALL_OPERAND_SHARE <= plan.moved_bytes)


def exchanges_operands(plan) -> bool:
    """Whether the kernel should take B as its first operand and A as its second (D's tiles then have B's
    free modes as rows): where A is small and shared (:func:`_small_and_shared`) and B is not, in a
    memory-bound plan on the 16-bit tensor-core path that writes a 16-bit D without reading C, with the
    plain product and no elementwise op. The tile's rows come in warpgroups of 64, its width in eights,
    so the small operand's free extent is better split into widths, and the big operand's rows are read
    by fewer column tiles. H100, f16: #16 ``abc-ad-bdc`` (A 312 x 296) 57.0 us as 3 x 128 rows of a (384
    rows, 23% of the products wasted; B read three times), 55.0 us with the operands exchanged, A staged
    K-major (:func:`_small_n_major_b`) and a in 2 x 160 columns (320). A configuration given to
    plan_contraction (``config``) is one for the plan as given: no exchange then."""
    ops = plan.ops
    return (math_path(plan) == "mma16" and _memory_bound(plan) and ops.is_plus_times and not ops.has_unary_ops
            and _room_for_resident_tile(plan) and _small_and_shared(plan, "A") and not _small_and_shared(plan, "B"))


def _simt_dense(plan) -> tuple:
    """The operands of a SIMT plan to copy into dense M- or N-major matrices (their :func:`target_orders`),
    where it accumulates in f32, does at least :data:`SIMT_COPY_MIN_FLOPS` and is not memory-bound: those
    contiguous along K where the plan does at least :data:`SIMT_K_COPY_FLOPS_PER_BYTE` flops per byte their
    copies move, and every operand not dense already where it does :data:`SIMT_DENSE_COPY_FLOPS_PER_BYTE` per
    byte of all the copies; failing both, A alone, into B's K order, where A and B are contiguous along
    different K modes and the plan does :data:`SIMT_CONFLICT_COPY_FLOPS_PER_BYTE` per byte of A's copy (the
    kernel then reads whole runs of both). Fragments read along K take the 128 x 128 tile to 150-220
    registers a thread (one CTA an SM) against 116-128 M- or N-major (two); modes that do not merge cost the
    loads' index arithmetic, which the math threads do. H100, f32, copies included: #21 ``abcd-aebf-fdec``
    (B contiguous along f) 7.09 -> 6.03 ms, #20 ``abcd-aebf-dfce`` (72-element runs) 6.28 -> 6.03. Complex
    and integer tiles fit two CTAs either way."""
    if math_path(plan) != "simt" or plan.compute_type.name != "f32" or plan.flops < SIMT_COPY_MIN_FLOPS \
            or _memory_bound(plan):
        return ()
    orders, group_of = target_orders(plan), plan.analysis.group_of
    nbytes = lambda ts: 2 * sum(plan.descriptors[t].nbytes for t in ts)   # read + write
    sparse = [t for t in "AB" if not _is_dense(plan, t, orders[t])]
    along_k = [t for t in sparse if group_of.get(_fast_mode(plan, t)) == "K"]
    copies = along_k if along_k and plan.flops >= SIMT_K_COPY_FLOPS_PER_BYTE * nbytes(along_k) else []
    if plan.flops >= SIMT_DENSE_COPY_FLOPS_PER_BYTE * nbytes(sparse):
        copies = sparse
    if not copies and _k_conflict(plan) and plan.flops >= SIMT_CONFLICT_COPY_FLOPS_PER_BYTE * nbytes(["A"]):
        copies = ["A"]
    return tuple(copies)


def _staged_for_layout(plan) -> tuple:
    """Operands whose layout slows the kernel. Compute-bound plans: A and B contiguous along different K
    modes, or on the 16-bit tensor-core path an operand's run shorter than :data:`SHORT_RUN_BYTES`.
    Memory-bound plans (:func:`_memory_bound`): A alone where A and B are contiguous along different K
    modes; its copy takes B's K order (:func:`target_orders`), so the kernel reads whole runs of both
    instead of a K box of 16-byte half sectors. #14 ``ab-cad-dcb`` f16, H100: 241 us as is, 152 us with
    the copy (55 us of it). And B where it is small, shared and N-major (:func:`_small_n_major_b`), or
    small and contiguous across A's K rows (:func:`_small_b_across_a_rows`). SIMT plans with much arithmetic
    per copied byte: the operands that are not dense M- or N-major matrices, or A alone where A and B are
    contiguous along different K modes (:func:`_simt_dense`)."""
    d = plan.descriptors
    conflict = _k_conflict(plan)
    short = {t: math_path(plan) == "mma16" and run_bytes(plan, t) < SHORT_RUN_BYTES for t in "AB"}
    if (conflict or any(short.values())) and _compute_bound(plan, d["A"].nbytes + d["B"].nbytes):
        return tuple(t for t in "AB" if conflict or short[t])
    simt = _simt_dense(plan)
    if simt:
        return simt
    small_b = _small_n_major_b(plan) or _small_b_across_a_rows(plan)
    return (("A",) if conflict and _memory_bound(plan) else ()) + (("B",) if small_b else ())


def _staged_for_op(plan) -> tuple:
    """Operands with an elementwise op that a copy should apply, once per element, because the kernel
    would apply it to every element each time a tile loads it (once per tile column, resp. row, of the
    other operand). Staged: the op'd operands of compute-bound plans, whose op arithmetic competes with
    the MMAs (#12 ``ab-ac-cb`` f16 with leaky ReLU on A and B: 1.00 ms in the kernel, 0.57 ms with the
    copies, 0.50 ms without ops; H100), and small operands that fill whole tiles and that many tiles
    share (at most 1/:data:`SMALL_OPERAND_SHARE` of the bytes the contraction moves, a free extent of at
    least :data:`OP_TILE`, read by at least :data:`OP_REUSE_STAGED` tiles): #15-#18's B (296 x 312), the
    op 8-15% cheaper with the copy. Operands narrower than a tile carry little of a tile's op work and
    the copy's launch cost more than it saved (#9-#11's 72 x 72 A, #1-#8's B, +2-7%)."""
    d = plan.descriptors
    with_op = [t for t in "AB" if (plan.ops.op_a if t == "A" else plan.ops.op_b) is not None]
    if with_op and _compute_bound(plan, sum(d[t].nbytes for t in with_op)):
        return tuple(with_op)
    return tuple(t for t in with_op if _small_and_shared(plan, t))


def _copy_strides(plan, tensor: str, order: tuple, aligned: bool = False) -> tuple:
    """The strides of ``tensor``'s copy with its modes in ``order`` (innermost first), its runs padded
    (:func:`run_multiple`; to whole lines where the copy is for alignment)."""
    src = plan.descriptors[tensor]
    inner = dict(zip(plan.modes[tensor], src.shape))[order[0]] if order else 1
    return dense_strides(src.shape, plan.modes[tensor], order, run_multiple(inner, src.dtype.itemsize, aligned))


def _has_strides(plan, tensor: str, strides: tuple) -> bool:
    """Whether ``tensor`` is laid out with ``strides`` (per mode of ``tensor``; modes of extent 1 aside)."""
    copy = zip(plan.modes[tensor], strides, plan.descriptors[tensor].shape)
    return {m: s for m, s, e in copy if e > 1} == _strides(plan, tensor)


def _is_dense(plan, tensor: str, order: tuple) -> bool:
    """Whether ``tensor`` is laid out as its copy in ``order`` would be."""
    return _has_strides(plan, tensor, _copy_strides(plan, tensor, order))


def choose_staging(plan, force: bool = False) -> tuple:
    """The operands to stage for ``plan`` (a tuple of :class:`Staging`, possibly empty).

    For its layout (:func:`_staged_for_layout`) an operand is copied only where the target layout differs
    from its own; for its op (:func:`_staged_for_op`) it is copied anyway, the copy applying the op; for
    its alignment alone (:func:`misaligned`) it keeps its own order (:func:`own_order`). Every copy's runs
    are padded to whole 16-byte vectors, or lines (:func:`run_multiple`). ``force`` stages both (tests),
    where a layout differs or an op applies.
    """
    if plan.is_empty:
        return ()
    chosen = ("A", "B") if force else set(_staged_for_layout(plan) + _staged_for_op(plan))
    aligned = () if force else tuple(t for t in _staged_for_alignment(plan) if t not in chosen)
    if not chosen and not aligned:
        return ()
    orders, out = target_orders(plan), []
    for t in (t for t in "AB" if t in chosen or t in aligned):
        src, op = plan.descriptors[t], plan.ops.op_a if t == "A" else plan.ops.op_b
        order = orders[t] if t in chosen else own_order(plan, t)
        target = TensorDescriptor(src.shape, _copy_strides(plan, t, order, t in aligned), src.dtype)
        # a copy for alignment may keep the strides: the data pointer was what broke the vectors (x[:, 1:])
        if op is not None or t in aligned or not _has_strides(plan, t, target.strides):
            out.append(Staging(t, plan.modes[t], order, src, target, op, plan.compute_type.name))
    return tuple(out)


# The copy kernel ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CopySource:
    """A rendered copy kernel and its launch shape."""
    source: str
    grid: tuple
    block: tuple


def copy_table(staging: Staging, modes=None) -> IndexTable:
    """The copy's index table over ``modes`` (default: the copy's order, extent-1 modes left out): the
    offsets of a linear destination index in the source ("src") and destination ("dst")."""
    ext = dict(zip(staging.modes, staging.source.shape))
    s_src, s_dst = dict(zip(staging.modes, staging.source.strides)), dict(zip(staging.modes, staging.target.strides))
    modes = tuple(m for m in staging.order if ext[m] > 1) if modes is None else tuple(modes)
    return IndexTable("copy", tuple((m,) for m in modes), tuple(ext[m] for m in modes),
                      (("src", tuple(s_src[m] for m in modes)), ("dst", tuple(s_dst[m] for m in modes))))


_BLOCK_BYTES = 40 * 1024   # shared memory of one transposed block


def _tile_side(extent: int, itemsize: int, cap: int = 0) -> int:
    """A transposed block's side along a mode: the whole extent where a square block of it fits in
    _BLOCK_BYTES of shared memory (no partial blocks for the 72s of TCCG), else 64 (16-bit) or 32 elements;
    with ``cap``, at most that many."""
    if cap:
        return min(extent, cap)
    whole = int((_BLOCK_BYTES / itemsize) ** 0.5) - 1
    return extent if extent <= whole else (64 if itemsize <= 2 else 32)


_MIN_BLOCKS = 256            # blocks a copy keeps when its blocks span all of Q
_SMALL_SIDES = (16, 32)      # sides tried in turn for a copy that would have fewer blocks than that ...
_WAVE_BLOCKS = 1024          # ... while its blocks stay one wave (H100: 132 SMs, 8 blocks of 256 threads each)


def _block_sides(extent_q: int, extent_p: int, rests: int, itemsize: int, cap: int = 0) -> tuple:
    """(TQ, TP) of a transposed block: P (the source's stride-1 mode) by _tile_side, Q (the destination's)
    whole where a block of it by TP (+1 of padding) fits _BLOCK_BYTES and the copy, over ``rests``
    positions of its other modes, still has _MIN_BLOCKS blocks, so the destination is written in whole
    runs; else by _tile_side. H100 (f16): #14's copy of A as it was before session 59 (312 x 312 blocks of
    (c, a) into a-major, 312 of them) 55.6 us in 64 x 64 blocks, 53.4 in 312 x 64 (a whole), 60.9 in 64 x 312
    (c whole: whole runs read, 128-byte pieces written); #14 113.2 -> 111.4 us. #17's B (one 312 x 296 block)
    in 5 blocks instead of 25: #17 58.9 -> 63.5. ``cap``: sides of at most that many elements."""
    tp = _tile_side(extent_p, itemsize, cap)
    whole = extent_q * (tp + 1) * itemsize <= _BLOCK_BYTES and rests * -(-extent_p // tp) >= _MIN_BLOCKS
    return (extent_q if whole else _tile_side(extent_q, itemsize, cap)), tp


def _tile_sides(extent_q: int, extent_p: int, rests: int, itemsize: int) -> tuple:
    """(TQ, TP) of a transposed block: :func:`_block_sides`, except for a copy those sides leave with fewer
    than _MIN_BLOCKS blocks (a small operand: it runs as one wave, as long as its slowest block), which
    takes sides of at most 16, or 32, the first that keeps its blocks within one wave (_WAVE_BLOCKS), so
    that a larger copy is not cut into several waves of tiny blocks (not measured: that limit is reasoned,
    and no TCCG copy reaches it). H100, seven rounds on three
    machines (session 56): f16 #16's and #17's copies of 312 x 296 in 380 blocks of 16 x 16 instead of 25 of
    64 x 64, #16 55.7 -> 55.3 us (means), #17 54.4 -> 53.9; #19's 72 x 72 x 72 in 360 blocks of 72 x 16
    instead of 72 of 72 x 72, 29.7 -> 29.2 (32 x 32 sides: about the same); f32 #19 136.5 -> 134.8, #15 and
    #18 (380 blocks instead of 100 of 32 x 32) even."""
    def blocks(q, p):
        return rests * -(-extent_q // q) * -(-extent_p // p)
    sides = _block_sides(extent_q, extent_p, rests, itemsize)
    if blocks(*sides) < _MIN_BLOCKS:
        for cap in _SMALL_SIDES:
            small = _block_sides(extent_q, extent_p, rests, itemsize, cap)
            if blocks(*small) <= _WAVE_BLOCKS:
                return small
    return sides


def _vector_width(src: TensorDescriptor, max_bytes: int, multiples) -> int:
    """Elements a copy moves per access: the largest power of two within ``max_bytes`` that divides every
    one of ``multiples`` (extents, strides, block sides) and that the source pointer's alignment allows."""
    v = max(max_bytes // src.dtype.itemsize, 1)
    while v > 1 and not (all(x % v == 0 for x in multiples) and src.alignment >= v * src.dtype.itemsize):
        v //= 2
    return v


def _offset_type(desc: TensorDescriptor) -> str:
    lo, hi = desc.offset_range
    return "int" if hi - lo <= _INT_MAX and desc.size <= _INT_MAX else "long long"


def render_copy(staging: Staging) -> CopySource:
    """The translation unit copying ``staging.source`` into ``staging.target`` (kernel COPY_KERNEL_NAME,
    arguments ``(const T* src, T* dst)``): runs of vectors where both keep the source's stride-1 mode
    innermost, else blocks transposed through shared memory."""
    src, dst = staging.source, staging.target
    table = copy_table(staging)
    modes = tuple(m for (m,) in table.modes)
    ext = dict(zip(modes, table.extents))
    s_src, s_dst = dict(zip(modes, table.strides_of("src"))), dict(zip(modes, table.strides_of("dst")))
    ctype, size = src.dtype.ctype, src.size
    index = index_type(size)
    inner = modes[0] if modes else None
    fast = next((m for m in modes if s_src[m] == 1), None)
    acc = ACC_CTYPE[staging.compute]
    includes = '#include "permute.cuh"\n' + ('#include "elementwise.cuh"\n' if staging.op is not None else "")
    head = (f"// Generated by gett: stage a {src.dtype.name} tensor of shape {src.shape}, strides {src.strides} "
            f"-> {dst.strides}\n{includes}using Offset = {_offset_type(src)};\nusing Index = {index};\n"
            f"using Acc = {acc};\n{op_struct('Op', staging.op, acc)}\n")
    if fast is None or fast == inner:
        v = 1 if fast is None else _vector_width(src, 16, (ext[fast], *(s_src[m] for m in modes if m != fast)))
        threads, unroll = 256, 4
        vectors = size // v
        padded = dst.strides != dense_strides(dst.shape, staging.modes, staging.order)
        dst_table = f", {table_type(table, 'dst')}" if padded else ""
        body = _copy_kernel(threads, ctype, f"gett::copy_runs<{ctype}, Acc, Op, Index, {table_type(table, 'src')}, "
                                            f"{v}, {unroll}{dst_table}>(src, dst, Index({vectors}))")
        blocks = max(1, min(-(-vectors // (threads * unroll)), 1 << 30))
        return CopySource(head + body, (blocks, 1, 1), (threads, 1, 1))
    threads = 256
    rest = copy_table(staging, [m for m in modes if m not in (fast, inner)])
    rests = rest.size
    tq, tp = _tile_sides(ext[inner], ext[fast], rests, src.dtype.itemsize)
    src_rest, dst_rest = table_type(rest, "src"), table_type(rest, "dst")
    v = _vector_width(src, 16, (tq, tp, ext[inner], ext[fast], s_src[inner], s_dst[fast], *rest.strides_of("src"),
                               *rest.strides_of("dst")))
    body = _copy_kernel(threads, ctype, f"gett::transpose_tiles<{ctype}, Acc, Op, Index, Offset, {tq}, {tp}, {v}, "
                                        f"{threads}, {ext[inner]}, {ext[fast]}, {s_src[inner]}, {s_dst[fast]}, "
                                        f"{src_rest}, {dst_rest}>(src, dst, Index({rests}))")
    blocks = -(-ext[inner] // tq) * -(-ext[fast] // tp)
    return CopySource(head + body, (blocks, min(rests, 65535), 1), (threads, 1, 1))


def _copy_kernel(threads: int, ctype: str, call: str) -> str:
    """The copy kernel's definition around ``call``: it first waits for the kernels before it in the
    stream (:mod:`gett.dependent_launch` may launch it before they finish)."""
    return (f"extern \"C\" __global__ void __launch_bounds__({threads}) {COPY_KERNEL_NAME}(const {ctype}* src, "
            f"{ctype}* dst) {{\n  gett::wait_for_prior_kernels();\n  {call};\n}}\n")
