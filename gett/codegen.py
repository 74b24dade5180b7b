"""render_kernel: the small translation unit that instantiates kernels/gett.cuh for one plan.

Everything here is a decision made from the plan and the configuration — which direction each
operand is loaded along, how wide its vectors are, whether it can be copied asynchronously, which
way the epilogue walks — written out as C++ types and constants. The device code itself lives in
``kernels/``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .config import WGMMA_WIDE_N, KernelConfig, loads_have_ops, row_tiles
from .modes import GROUPS
from .tma import TmaBox, k_run, store_box, tile_box, tma_operands

SM_SHARED_BYTES = 228 * 1024   # shared memory per SM on sm_90, where wgmma runs; a CTA reserves 1 KB of it

_INT_MAX = 2**31 - 1
ACC_CTYPE = {"f32": "float", "tf32": "float", "3xtf32": "float", "f64": "double",
              "c64": "gett::complex<float>", "c128": "gett::complex<double>", "i32": "int", "i64": "long long"}
KERNEL_NAME = "gett_contraction"
REDUCE_NAME = "gett_reduce_splits"   # present when the configuration splits K
REDUCE_THREADS = 256


@dataclass(frozen=True)
class OperandLayout:
    """How one input operand is moved into shared memory."""
    row_contig: bool    # shared tile [BK][rows] (rows contiguous) instead of [rows][BK]
    vector: int         # elements per access
    is_async: bool      # cp.async (≥ 4 bytes per access) rather than staged through registers
    step: int = 1       # tile positions between a vector's elements (2nd mode of a box)
    partial: bool = False   # the last vector of the run may pass the operand's end: its copy clips (src-size)


def vector_width(plan, tensor: str, group: str, tile_extent: int, clipped: bool = False) -> tuple:
    """(elements, step) of the widest access (≤ 16 bytes) along ``group`` that is contiguous in
    memory, aligned and never crosses its mode: the run of stride-1 elements and every other stride
    of the tensor must be multiples of it, and so must the data pointer's alignment. The stride-1
    mode is the group's first (step 1) or, in a box, its second: then consecutive elements lie
    ``step`` = first mode's extent apart in the tile, and the box must tile the tile. ``clipped``: the
    loads can clip a vector at the operand's end (asynchronous copies of at least 4 bytes), so where the
    stride-1 mode is the group's only mode its extent need not be a multiple (an odd extent, padded rows)."""
    desc = plan.descriptors[tensor]
    table = plan.tables[group]
    strides = table.strides_of(tensor)
    position = next((i for i in (0, 1) if i < len(strides) and strides[i] == 1), None)
    if position is None:
        return 1, 1
    run, step = table.extents[position], table.extents[0] if position == 1 else 1
    alone = clipped and len(strides) == 1
    others = [s for g in GROUPS for i, s in enumerate(plan.tables[g].strides_of(tensor))
              if not (g == group and i == position)]
    v = max(16 // desc.dtype.itemsize, 1)
    while v > 1:
        whole = run % v == 0 or (alone and v * desc.dtype.itemsize >= 4)
        if whole and tile_extent % (v * step) == 0 and desc.alignment >= v * desc.dtype.itemsize \
                and all(s % v == 0 for s in others):
            return v, step
        v //= 2
    return 1, 1


def _innermost_stride(plan, tensor: str, group: str) -> int:
    strides = plan.tables[group].strides_of(tensor)
    return abs(strides[0]) if strides and strides[0] else 1 << 62


def operand_layout(plan, tensor: str, row_group: str, rows: int, bk: int) -> OperandLayout:
    """Load along whichever of (rows, K) gives the wider vector; with equal width, along the smaller
    innermost stride, so a warp's accesses stay as close together as the tensor allows. Vectors may end
    past the operand (``partial``, see vector_width) where it has no op: an op's pass over a landed vector
    would turn its zero-filled tail into op(0)."""
    clipped = (plan.ops.op_a if tensor == "A" else plan.ops.op_b) is None
    (v_rows, step_rows), (v_k, step_k) = (vector_width(plan, tensor, row_group, rows, clipped),
                                          vector_width(plan, tensor, "K", bk, clipped))
    if v_rows != v_k:
        row_contig = v_rows > v_k
    else:
        row_contig = _innermost_stride(plan, tensor, row_group) < _innermost_stride(plan, tensor, "K")
    v, step = (v_rows, step_rows) if row_contig else (v_k, step_k)
    itemsize = plan.descriptors[tensor].dtype.itemsize
    # a vector wider than 1 has a stride-1 mode; where step is 1 it is the group's first
    run = plan.tables[row_group if row_contig else "K"].extents[0] if v > 1 else 1
    return OperandLayout(row_contig, v, step == 1 and v * itemsize >= 4, step, step == 1 and run % v != 0)


def operand_layouts(plan, cfg: KernelConfig, stage_ops: bool = True) -> tuple:
    """The layouts of A and B under ``cfg``. On the wgmma path a box's strided vectors of 8 16-bit
    elements (step 8) are copied asynchronously as whole chunks and transposed in shared memory; and
    (with ``stage_ops``) of the operands with an op, the one with the larger tile (B on a tie) is
    staged through registers, the op applied on the way, rather than copied and then transformed in
    place, which adds a shared-memory read and write of every element to the traffic that bounds
    those kernels. One only: a second spills the 128 x 256 tile, and measured no faster on 128 x 128
    (TCCG #12, #15, #20, #21, H100, 2026-11-22). With 4 stages or more only: then the staged tile
    waits an iteration in registers (kernels/gett.cuh, LAG); with 3 its load latency is exposed."""
    layouts = operand_layout(plan, "A", "M", cfg.bm, cfg.bk), operand_layout(plan, "B", "N", cfg.bn, cfg.bk)
    if cfg.math != "wgmma":
        return layouts
    layouts = tuple(replace(x, is_async=True) if x.step == 8 and x.vector == 8 and plan.descriptors[t].dtype.itemsize == 2
                    else x for x, t in zip(layouts, "AB"))
    if cfg.ws:   # the producer warpgroup applies ops in place, off the math warps
        return layouts
    ops = plan.ops.op_a, plan.ops.op_b
    order = (1, 0) if cfg.bn >= cfg.bm else (0, 1)
    staged = next((i for i in order if stage_ops and cfg.stages >= 4 and ops[i] is not None
                   and layouts[i].is_async and layouts[i].step == 1), None)
    return tuple(replace(x, is_async=False) if i == staged else x for i, x in enumerate(layouts))


def epilogue_walk(plan, cfg: KernelConfig) -> tuple:
    """(m_fast, tx, ty): the epilogue walks M (else N) fastest, in boxes of tx × ty whose ty side runs
    along D's stride-1 mode — the first or, after box tiling, the second mode of that dimension."""
    for group, tile, m_fast in (("M", cfg.bm, True), ("N", cfg.bn, False)):
        table = plan.tables[group]
        strides = table.strides_of("D")
        if strides and strides[0] == 1:
            return m_fast, 1, tile
        if len(strides) > 1 and strides[1] == 1 and tile % (table.extents[0] * table.extents[1]) == 0:
            return m_fast, table.extents[0], table.extents[1]
    m_fast = _innermost_stride(plan, "D", "M") <= _innermost_stride(plan, "D", "N") and plan.m > 1
    return m_fast, 1, cfg.bm if m_fast else cfg.bn


def partials_m_fast(plan, cfg: KernelConfig) -> bool:
    """Whether split-K partial sums run along M (where the epilogue walks M plainly), else along N; mirrors
    gett::Gett::PARTIALS_M_FAST (the TU static_asserts it)."""
    m_fast, tx, _ = epilogue_walk(plan, cfg)
    return m_fast and tx == 1


def reduce_vector(plan, cfg: KernelConfig) -> int:
    """Partial sums of neighbouring outputs that one thread of reduce_splits adds up: 16 bytes of them along
    the partials' fast dimension (:func:`partials_m_fast`) where that extent holds whole vectors, else 1."""
    v = 16 // plan.compute_type.accumulator.itemsize
    return v if v > 1 and (plan.m if partials_m_fast(plan, cfg) else plan.n) % v == 0 else 1


def reduce_grid(plan, cfg: KernelConfig) -> tuple:
    """The reduction kernel's grid: a thread per :func:`reduce_vector` outputs, at most 65536 blocks."""
    threads = -(-plan.m * plan.n * plan.batch // reduce_vector(plan, cfg))
    return (min(-(-threads // REDUCE_THREADS), 65536), 1, 1)


def simt_column_runs(plan, cfg: KernelConfig, m_fast: bool) -> bool:
    """Whether SIMT threads may hold their columns in runs (16-byte reads of a row-contiguous B tile).
    Not where D's fast side is M and K is at most two tiles, unless a warp's lanes run along M
    (``cfg.lanes_m``): there the epilogue's fragment stores, a warp's lanes a thread's columns (a tile
    row) apart, would meet 8-way bank conflicts (4·LD·tx, LD ≡ 4 mod 32) and cost more than the reads
    save (H100 f32, K = 24: #40, #43, #44, #46, #47 12% slower)."""
    return cfg.lanes_m or not (m_fast and plan.k <= 2 * cfg.bk)


def epilogue_vector(plan, cfg: KernelConfig, m_fast: bool, tx: int) -> int:
    """Elements per access of the epilogue walk: the widest vector along the walked dimension (in a box
    walk, along the box's second side, which is D's stride-1 mode) that is contiguous and aligned in
    both C and D (see vector_width)."""
    group, tile = ("M", cfg.bm) if m_fast else ("N", cfg.bn)
    widths = [vector_width(plan, t, group, tile) for t in "CD"]
    if any(step != tx for _, step in widths):
        return 1
    return min(w for w, _ in widths)


def epilogue_cross(plan, cfg: KernelConfig, m_fast: bool, tx: int) -> tuple:
    """(run, cross) for a plain walk whose D stride-1 mode is short: after each ``run`` elements of that
    mode the walk takes ``cross`` steps along the other dimension, where D continues contiguously (its
    first mode there has D-stride ``run``), before the next run: a 24-element run (48 bytes) becomes
    24 x cross contiguous elements. (run, 1) leaves the walk plain."""
    fast_group, fast_tile, slow_group, slow_tile = ("M", cfg.bm, "N", cfg.bn) if m_fast else ("N", cfg.bn, "M", cfg.bm)
    fast, slow = plan.tables[fast_group], plan.tables[slow_group]
    if tx != 1 or not fast.extents or not slow.extents or fast.strides_of("D")[0] != 1:
        return fast_tile, 1
    run, next_extent = fast.extents[0], slow.extents[0]
    if run >= fast_tile or fast_tile % run or slow.strides_of("D")[0] != run:
        return fast_tile, 1
    cross = slow_tile if next_extent % slow_tile == 0 else next_extent if slow_tile % next_extent == 0 else 1
    return (run, cross) if cross > 1 else (fast_tile, 1)


def epilogue_pad(plan, cfg: KernelConfig, m_fast: bool, tx: int) -> int:
    """Elements after each row of the epilogue tile; mirrors gett::Gett::EPI_PAD. A crossing walk whose
    run is an odd number of 16-byte chunks gets a pitch of one run modulo 128 bytes (#32's 24-element
    runs: the eight vectors of a wavefront then read one line, not three rows' first chunks)."""
    te = plan.descriptors["D"].dtype.itemsize
    vector = epilogue_vector(plan, cfg, m_fast, tx)
    run, cross = epilogue_cross(plan, cfg, m_fast, tx)
    fast_tile, line = (cfg.bm if m_fast else cfg.bn), 128 // te
    if cross > 1 and vector > 1 and run * te % 32 == 16:
        return (run - fast_tile) % line
    return max(16 // te, 1) if tx > 1 or vector > 1 else 1


def shared_ctas(smem: int, sm_shared: int = SM_SHARED_BYTES) -> int:
    """CTAs of ``smem`` bytes of dynamic shared memory one SM holds (the driver reserves 1 KB a CTA)."""
    return sm_shared // (smem + 1024)


def ctas_per_sm(plan, cfg: KernelConfig) -> int:
    """CTAs per SM the registers are capped for (``__launch_bounds__``' second argument). A kernel whose
    K fits one tile is all loads and epilogue; with 64 accumulators or more a thread, ptxas takes ~105
    registers (one CTA of 384 threads per SM), so ask for as many CTAs, up to 3, as still leave 16
    registers a thread beyond the accumulators: more loads and stores in flight. mma.sync with 16-bit
    data only, where it was measured (H100, TCCG K = 24, NVRTC 13.0: #31 57 -> 47 us at 2, #42 56 -> 46,
    #40 41.5 -> 37.7 at 3, but #45 56 -> 63; 256 x 32 tiles (#6, #8: 32 accumulators, 66 registers)
    capped at 4 CTAs measured even). Tiles with at most 32 accumulators a thread (256 x 32) and 256
    threads keep 2 CTAs (128 registers): ops on A or B staged through registers took ptxas past that
    (#5 with leaky ReLU 110 -> 140 registers, one CTA: 89.9 -> 61.8 us capped, no spills); kernels
    without ops there take 67-118. Likewise wgmma tiles of 256 math threads with an op pass on A or B
    whose stages leave room for two CTAs (128 x 128, 3 stages): the pass's registers took fused #18 to
    138, one CTA per SM (128 -> 191 us, H100). build_kernel drops the cap where ptxas spills more than a
    little."""
    threads = cfg.threads
    accumulators = cfg.bm * cfg.bn // threads

    def fitting() -> int:   # CTAs the shared memory holds
        return shared_ctas(shared_bytes(plan, cfg, *operand_layouts(plan, cfg)))
    if cfg.math == "mma16" and accumulators <= 32 and threads <= 256:
        return 2
    if cfg.math == "wgmma" and cfg.swap:
        # a short M's few accumulators (36 a thread at 72 x 128): as many CTAs as the shared memory
        # holds, up to 4, leaving 40 registers a thread beyond the accumulators; three for #9-11, with
        # leaky ReLU on A, B and C too (80 registers, no spills): fused 109.1 -> 87.9 us on #9, 108.4
        # -> 87.8 on #10, 104.9 -> 84.6 on #11 against two (H100, fusion.py A/B, two rounds)
        fit = fitting()
        need = cfg.bm * cfg.bn // cfg.math_threads + 40
        return max(n for n in range(1, 5) if n == 1 or (n <= fit and 65536 // (threads * n) // 8 * 8 >= need))
    if cfg.math == "wgmma" and threads == 256 and loads_have_ops(plan) and fitting() >= 2:
        return 2   # two CTAs fit the shared memory: keep their registers in 128
    if cfg.math != "mma16" or plan.k > cfg.bk or accumulators < 64:
        return 1
    # no more than the shared memory holds: a cap for CTAs that cannot be resident only spills (768 x 32
    # tiles over several tiles with warps of 64 rows: 80 registers, 96 bytes of spills under NVRTC 13.0)
    fit = fitting()
    return max(n for n in (1, 2, 3) if n == 1 or (n <= fit and 65536 // (threads * n) >= accumulators + 16))


def tma_views(plan, cfg: KernelConfig, layouts, arch: str | None) -> tuple | None:
    """The views of the operands the kernel loads through the TMA, in the order it takes their maps:
    (A's box,) for an mma.sync kernel whose A tile is one (:func:`gett.tma.tile_box`), (A's, B's) for
    a warp-specialised wgmma kernel (:func:`gett.tma.tma_operands`), else None."""
    box = tile_box(plan, cfg, layouts[0], arch)
    return (box,) if box is not None else tma_operands(plan, cfg, layouts)


def check_persistent(plan, cfg: KernelConfig, box, a: OperandLayout, b: OperandLayout) -> None:
    """ValueError unless a CTA can run several of ``plan``'s tiles under ``cfg`` (kernels/gett.cuh): a
    producer warpgroup (run_tiles_ws) can, given one K range a tile (KernelConfig.validate); without one
    (run_tiles), A's tile must be a TMA box (``box``, see :func:`gett.tma.tile_box`) or copied
    asynchronously in place without an op, B copied asynchronously (any op applied in place), N in one
    tile, one batch. A resident tile (``cfg.resident``) is loaded once, as it lies in memory: no op, no
    transposed blocks, one batch."""
    if cfg.resident:
        t = cfg.resident.upper()
        layout, op = (a, plan.ops.op_a) if t == "A" else (b, plan.ops.op_b)
        why = (f"the batch has {plan.batch} indices" if plan.batch != 1
               else f"op_{cfg.resident} would be applied to it in every stage (a staged copy can apply it "
                    f"first: staging=True)" if op is not None
               else f"its tile is assembled from transposed blocks of {t}" if layout.is_async and layout.step > 1
               else None)
        if why:
            raise ValueError(f"{cfg.key()}: a resident {t} tile is copied once, as it lies in memory, for all "
                             f"the tiles of one batch; here {why}")
    if cfg.ws:
        return
    why = ("A's tile is neither one TMA box of A (gett.tma.tile_box) nor copied asynchronously"
           if box is None and (not a.is_async or a.step != 1)
           else "A's tile is copied by cp.async with an op (applied where the copies of a later tile are "
                "already in flight)" if box is None and plan.ops.op_a is not None
           else f"N = {plan.n} takes more than one tile of {cfg.bn}" if plan.n > cfg.bn
           else f"the batch has {plan.batch} indices" if plan.batch != 1
           else "B is staged through registers" if not b.is_async
           else None)
    if why:
        raise ValueError(f"{cfg.key()}: CTAs over several tiles (persistent) need A's tile as one TMA box, "
                         f"B copied asynchronously, N in one tile and one batch; here {why}")


def shared_bytes(plan, cfg: KernelConfig, a: OperandLayout, b: OperandLayout, a_box: bool = False) -> int:
    """Dynamic shared memory of the kernel; mirrors gett::Gett::SMEM_BYTES (the TU static_asserts it).
    ``a_box``: A's tile is a TMA box (unpadded, a barrier per stage). Where D's tile is stored as one
    (gett.tma.store_box), the epilogue tile is 128-byte aligned."""
    def stage_elems(layout, rows, itemsize):
        if cfg.math == "wgmma":   # swizzled, not padded; an MN-major tile in whole 64-element atoms
            if layout.row_contig:
                return cfg.bk * -(-rows // 64) * 64
            return (rows if rows <= 256 else -(-rows // 16) * 16) * cfg.bk   # past 256: two TMA boxes (TileLoader::ROWS)
        pad = max(16 // itemsize, 1)
        return cfg.bk * (rows + pad) if layout.row_contig else rows * (cfg.bk + pad)
    ia = plan.descriptors["A"].dtype.itemsize
    ib = plan.descriptors["B"].dtype.itemsize
    k_tiles = -(-max(-(-plan.k // cfg.bk), 1) // cfg.split_k)   # K tiles of one CTA: USED_STAGES
    a_stage = cfg.bm * cfg.bk if a_box else stage_elems(a, cfg.bm, ia)
    stages = cfg.stages if cfg.persistent else min(cfg.stages, k_tiles)
    b_stays = cfg.resident == "b" or (cfg.persistent and not cfg.ws)   # Gett::B_STAYS
    a_tiles, b_tiles = k_tiles if cfg.resident == "a" else stages, k_tiles if b_stays else stages   # A_SLOTS, B_SLOTS
    pipe = a_tiles * a_stage * ia + b_tiles * stage_elems(b, cfg.bn, ib) * ib
    te = plan.descriptors["D"].dtype.itemsize   # the epilogue tile holds C, then D (one type)
    fast, tx, _ = epilogue_walk(plan, cfg)
    tile = (cfg.bn if fast else cfg.bm) * ((cfg.bm if fast else cfg.bn) + epilogue_pad(plan, cfg, fast, tx)) * te
    offset = 4 if plan.offset_bits == 32 else 8
    epi = (tile + 15) // 16 * 16 + 2 * (cfg.bm + cfg.bn) * offset
    align = 128 if cfg.persistent and store_box(plan, cfg) is not None else 16
    tiles = (pipe + align - 1) // align * align + epi if cfg.persistent else max(pipe, epi)   # EPI_OFFSET
    if cfg.ws or a_box:   # two (one) 8-byte mbarriers per stage after the tiles (BARRIER_OFFSET)
        return (tiles + 7) // 8 * 8 + (16 if cfg.ws else 8) * cfg.stages
    return tiles


def wgmma_part(cfg: KernelConfig, b: OperandLayout) -> str:
    """WgmmaMath's PART argument: the widest instruction of the tile's row, where not 256. Three
    warpgroups issue parts of 128 columns (ptxas fits one instruction's accumulators in the registers of
    a 512-thread launch); a 296-wide tile 224 + 72, which needs B K-major (an MN-major B's parts are
    whole 64-column atoms)."""
    if cfg.three_math_warpgroups:
        return ", 128"
    if cfg.bn in WGMMA_WIDE_N:
        if b.row_contig:
            raise ValueError(f"{cfg.key()}: a {cfg.bn}-wide wgmma tile needs B K-major (its stride-1 mode in K)")
        return ", 224"
    return ""


def table_type(table, tensor: str) -> str:
    """``table``'s offsets in ``tensor`` as the device type layout.cuh evaluates (offset type ``Offset``)."""
    modes = "".join(f", gett::Mode<{e}, {d}, {s}>"
                    for e, d, s in zip(table.extents, table.divisors, table.strides_of(tensor)))
    return f"gett::Table<Offset{modes}>"


def index_type(size: int) -> str:
    return "int" if size <= _INT_MAX else "long long"


def op_struct(name: str, expr, acc: str) -> str:
    if expr is None:
        return f"using {name} = gett::Identity;"
    fn = f"{name.lower()}_fn"
    return (f"{expr.render_cuda(fn, acc)}\n"
            f"struct {name} {{\n  static constexpr bool is_identity = false;\n"
            f"  __device__ __forceinline__ {acc} operator()({acc} x) const {{ return {fn}(x); }}\n}};")


def _literal(value, acc: str) -> str:
    """``value`` (already of the compute type, see ops_spec) as gett.expr renders a constant of ``acc``."""
    from .expr import COMPUTE_TYPES, _Context
    return _Context(COMPUTE_TYPES[acc], acc, "reduce identity").literal(value)


def _semiring(plan, acc: str) -> str:
    ops = plan.ops
    if ops.is_plus_times:
        return "using Semiring = gett::PlusTimes;"
    parts = []
    mul, add = "a * b", "acc + p"
    if ops.op_ab is not None:
        parts.append(ops.op_ab.render_cuda("semiring_mul", acc))
        mul = "semiring_mul(a, b)"
    if ops.reduce is not None:
        parts.append(ops.reduce.render_cuda("semiring_add", acc))
        add = "semiring_add(acc, p)"
    ident = _literal(ops.reduce_identity if ops.reduce is not None else 0, acc)
    parts.append(
        "struct Semiring {\n  static constexpr bool mask_k = true;\n"
        f"  template <class T> __device__ __forceinline__ static T identity() {{ return {ident}; }}\n"
        f"  template <class T> __device__ __forceinline__ static T mul(T a, T b) {{ return {mul}; }}\n"
        f"  template <class T> __device__ __forceinline__ static T add(T acc, T p) {{ return {add}; }}\n}};")
    return "\n".join(parts)


def render_kernel(plan, cfg: KernelConfig, stage_ops: bool = True, cap_registers: bool = True,
                  arch: str | None = None) -> tuple:
    """Return (source, shared_bytes, threads, TMA views) of the translation unit for ``plan`` under ``cfg``
    (``stage_ops``: see :func:`operand_layouts`; ``cap_registers``: launch bounds for
    :func:`ctas_per_sm` CTAs per SM, else for one; ``arch``: the target, where TMA box tiles need sm_90;
    the views: :func:`tma_views`)."""
    if cfg.math == "dot":
        return render_dot(plan, cfg)
    cfg.validate()
    d = plan.descriptors
    acc = ACC_CTYPE[plan.compute_type.name]
    ops = plan.ops
    la, lb = operand_layouts(plan, cfg, stage_ops)
    copied_op = (la.is_async and ops.op_a is not None) or (lb.is_async and ops.op_b is not None)
    if cfg.ws and not (la.is_async and lb.is_async) and (cfg.math != "simt" or copied_op):
        raise ValueError(f"{cfg.key()}: warp specialisation needs both operands copied asynchronously "
                         f"(A {'async' if la.is_async else 'staged'}, B {'async' if lb.is_async else 'staged'}; "
                         f"SIMT math may stage one through the producer's registers where the copied one has no op)")
    if cfg.ws and loads_have_ops(plan) and cfg.stages < 3:
        raise ValueError(f"{cfg.key()}: a producer warpgroup applies ops to a stage after the next one's copies "
                         f"are issued, so it needs 3 stages")
    views = tma_views(plan, cfg, (la, lb), arch)
    box = views[0] if views and isinstance(views[0], TmaBox) else None
    if cfg.persistent:
        check_persistent(plan, cfg, box, la, lb)
    d_view = store_box(plan, cfg)
    smem = shared_bytes(plan, cfg, la, lb, a_box=box is not None)
    threads = cfg.threads
    tma = views is not None and box is None
    if cfg.shares_registers and not (tma or cfg.pingpong):
        raise ValueError(f"{cfg.key()}: the math warpgroups take most of the producer's registers, so it "
                         f"must load by TMA (both operands plain 2-D matrices, or K two modes for a wide tile; one "
                         f"batch), unless they take tiles in turn (pingpong), which leaves a cp.async producer the "
                         f"registers of its address arithmetic (Gett::PRODUCER_REGISTERS)")
    names = ("map_a", "map_b")[:len(views or ())] + (("map_d",) if d_view else ())
    maps = "".join(f",\n    const __grid_constant__ gett::TensorMap {n}" for n in names)
    map_args = [f"&{n}" if n in names else "nullptr" for n in ("map_a", "map_b", "map_d")]
    while map_args and map_args[-1] == "nullptr":
        map_args.pop()
    map_args = "".join(", " + a for a in map_args)
    m_fast, epi_tx, epi_ty = epilogue_walk(plan, cfg)
    epi_v = epilogue_vector(plan, cfg, m_fast, epi_tx)
    epi_run, epi_cross = epilogue_cross(plan, cfg, m_fast, epi_tx)
    if cfg.math == "simt":
        math = (f"gett::SimtMath<{acc}, Semiring, LoadA, LoadB, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.math_threads}, "
                f"{cfg.tm}, {cfg.tn}, {'true' if simt_column_runs(plan, cfg, m_fast) else 'false'}, "
                f"{'true' if cfg.lanes_m else 'false'}>")
        header = "math_simt.cuh"
    elif cfg.math == "mma16":
        math = f"gett::Mma16Math<{d['A'].dtype.ctype}, LoadA, LoadB, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.wm}, {cfg.wn}>"
        header = "math_mma.cuh"
    elif cfg.math == "wgmma":
        # PART where not 256; warpgroups in turn also SLABS: all of the tile's 64-row slabs
        part = wgmma_part(cfg, lb)
        part_slabs = f"{part or ', 256'}, {cfg.bm // 64}" if cfg.pingpong else part
        math = (f"gett::WgmmaMath<{d['A'].dtype.ctype}, LoadA, LoadB, {cfg.bm}, {cfg.bn}, {cfg.bk}, "
                f"{'true' if cfg.swap else 'false'}{part_slabs}>")
        header = "math_wgmma.cuh"
    elif cfg.math in ("tf32", "3xtf32"):
        split = "true" if cfg.math == "3xtf32" else "false"
        math = f"gett::Tf32Math<LoadA, LoadB, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.wm}, {cfg.wn}, {split}>"
        header = "math_mma.cuh"
    else:
        math = f"gett::F64Math<LoadA, LoadB, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.wm}, {cfg.wn}>"
        header = "math_mma.cuh"

    def loader(t, layout, rows_group, rows, op):
        return (f"gett::TileLoader<Problem::T{t}, {acc}, Problem::Offset, Problem::Index{rows_group}, "
                f"Problem::IndexK, Problem::{t}{rows_group}, Problem::{t}K, {op}, {rows}, {cfg.bk}, {cfg.load_threads}, "
                f"{'true' if layout.row_contig else 'false'}, {layout.vector}, "
                f"{'true' if layout.is_async else 'false'}, {layout.step}, "
                f"{'true' if cfg.math == 'wgmma' else 'false'}{', true' if layout.partial else ''}>")

    def coordinates(table, strides):   # a table per dimension of the map, its strides in that dimension
        return "gett::Coordinates<" + ", ".join(
            "gett::Table<int" + "".join(f", gett::Mode<{e}, {dv}, {st}>" for e, dv, st in
                                        zip(table.extents, table.divisors, dim)) + ">"
            for dim in strides) + ">"

    def positions(table, spans):   # the modes of ``table`` a tile spans, at their box-layout strides
        return "gett::Table<int" + "".join(f", gett::Mode<{e}, {dv}, {st}>" for (e, st), dv in
                                           zip(spans, table.divisors)) + ">"

    def box_loader(view):
        return (f"gett::TmaBoxLoader<Problem::TA, {acc}, OpA, Problem::IndexM, Problem::IndexK, "
                f"{coordinates(plan.tables['M'], view.row_coordinates)}, "
                f"{coordinates(plan.tables['K'], view.k_coordinates)}, {cfg.bm}, {cfg.bk}, {view.box[0]}, {cfg.stages}, "
                f"{cfg.load_threads}, {plan.k}>")

    store_d = None if d_view is None else (
        f"gett::TmaStore<{positions(plan.tables['M'], d_view.m_positions)}, "
        f"{positions(plan.tables['N'], d_view.n_positions)}, {coordinates(plan.tables['M'], d_view.m_coordinates)}, "
        f"{coordinates(plan.tables['N'], d_view.n_coordinates)}, "
        f"{d_view.m_positions[0][0] if d_view.m_positions[0][1] == 1 else 1}>")
    store_line = f"using StoreD = {store_d};\n" if d_view else ""
    store_arg = ", StoreD" if d_view else ", gett::NoTmaStore" if cfg.resident or cfg.pingpong else ""
    store_arg += f", '{cfg.resident.upper()}'" if cfg.resident else ", 0" if cfg.pingpong else ""
    store_arg += ", true" if cfg.pingpong else ""
    # A's rows in runs of M's first mode (gett.tma.m_run), where A's view loads them so
    rows_run = plan.tables["M"].extents[0] if tma and views[0].row_outer_stride else 0
    src = f"""{_preamble(plan, cfg, header, k_run(plan, cfg) if tma else 0, rows_run)}
using LoadA = {box_loader(box) if box else loader("A", la, "M", cfg.bm, "OpA")};
using LoadB = {loader("B", lb, "N", cfg.bn, "OpB")};
using Math = {math};
{store_line}using Kernel = gett::Gett<Problem, LoadA, LoadB, Math, OpC, OpOut, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.stages}, {cfg.math_threads}, {cfg.group_m}, {'true' if m_fast else 'false'}, {epi_tx}, {epi_ty}, {cfg.split_k}, {epi_v}, {epi_run}, {epi_cross}, {'true' if cfg.ws else 'false'}, {'true' if tma else 'false'}, {'true' if cfg.persistent else 'false'}{store_arg}>;
static_assert(Kernel::SMEM_BYTES == {smem}, "host and device disagree on shared memory size");
static_assert(Kernel::BLOCK_THREADS == {threads}, "host and device disagree on threads per CTA");
static_assert(Kernel::TILES_M <= {row_tiles(plan, cfg)}, "the host launches too few row tiles");
}}  // namespace
{_entry_points(plan, cfg, ctas_per_sm(plan, cfg) if cap_registers else 1, maps, map_args)}"""
    return src, smem, threads, (views or ()) + (d_view,) if d_view else views


def _preamble(plan, cfg: KernelConfig, header: str, k_run_value: int, m_run_value: int = 0) -> str:
    """The translation unit's includes, ops, semiring and Problem (types, extents, index tables), up to the
    kernel's own types."""
    d, ops, acc = plan.descriptors, plan.ops, ACC_CTYPE[plan.compute_type.name]
    uses_ops = any(getattr(ops, r) is not None for r in ("op_a", "op_b", "op_c", "op_out", "op_ab", "reduce"))
    tables = "\n".join(f"  using {t}{g} = {table_type(plan.tables[g], t)};"
                       for t, groups in (("A", "MKL"), ("B", "NKL"), ("C", "MNL"), ("D", "MNL"))
                       for g in groups)
    return f"""// Generated by gett for: {plan.signature[0]}  config {cfg.key()}
#include "gett.cuh"
#include "{header}"
{'#include "elementwise.cuh"' if uses_ops else ''}

namespace {{
{op_struct("OpA", ops.op_a, acc)}
{op_struct("OpB", ops.op_b, acc)}
{op_struct("OpC", ops.op_c, acc)}
{op_struct("OpOut", ops.op_out, acc)}
{_semiring(plan, acc)}

struct Problem {{
  using TA = {d['A'].dtype.ctype};
  using TB = {d['B'].dtype.ctype};
  using TC = {d['C'].dtype.ctype};
  using TD = {d['D'].dtype.ctype};
  using Acc = {acc};
  using Offset = {"int" if plan.offset_bits == 32 else "long long"};
  using IndexM = {index_type(plan.m)};
  using IndexN = {index_type(plan.n)};
  using IndexK = {index_type(plan.k + cfg.bk)};
  using IndexL = {index_type(plan.batch)};
  static constexpr long long M = {plan.m}, N = {plan.n}, K = {plan.k}, L = {plan.batch};
  static constexpr long long K_RUN = {k_run_value};   // TMA loads over K's two modes
  static constexpr long long M_RUN = {m_run_value};   // ... of A's rows over M's two modes
{tables}
}};
"""


def _entry_points(plan, cfg: KernelConfig, min_ctas: int, maps: str = "", map_args: str = "") -> str:
    """The kernel's ``extern "C"`` entry (``Kernel``: the TU's instantiation), and split-K's reduction."""
    src = f"""
extern "C" __global__ void __launch_bounds__({cfg.threads}, {min_ctas}) {KERNEL_NAME}(
    const Problem::TA* A, const Problem::TB* B, const Problem::TC* C, Problem::TD* D,
    Problem::Acc* partials, Problem::Acc alpha, Problem::Acc beta{maps}) {{
  gett::wait_for_prior_kernels();
  Kernel::run(A, B, C, D, partials, alpha, beta{map_args});
}}
"""
    if cfg.split_k > 1:
        src += f"""
extern "C" __global__ void __launch_bounds__({REDUCE_THREADS}) {REDUCE_NAME}(
    const Problem::Acc* partials, const Problem::TC* C, Problem::TD* D, Problem::Acc alpha, Problem::Acc beta) {{
  gett::wait_for_prior_kernels();
  static_assert(Kernel::PARTIALS_M_FAST == {'true' if partials_m_fast(plan, cfg) else 'false'},
                "host and device disagree on the partials' fast dimension");
  gett::reduce_splits<Problem, OpC, OpOut, Semiring, {cfg.split_k}, Kernel::PARTIALS_M_FAST, {reduce_vector(plan, cfg)}>(
      partials, C, D, alpha, beta);
}}
"""
    return src


def dot_vector(plan) -> int:
    """Elements of K one load of the dot kernel takes from A and from B: the widest vector (≤ 16 bytes) along
    K's first mode where that is stride-1 in both (see vector_width), else 1."""
    widths = [vector_width(plan, t, "K", 16) for t in "AB"]
    return min(v for v, step in widths) if all(step == 1 for _, step in widths) else 1


def render_dot(plan, cfg: KernelConfig) -> tuple:
    """(source, shared_bytes, threads, None) of the dot kernel's translation unit (kernels/dot.cuh): its
    shared memory is static (a sum per warp and output), so none is dynamic."""
    cfg.validate()
    src = f"""{_preamble(plan, cfg, "dot.cuh", 0)}
using Kernel = gett::Dot<Problem, OpA, OpB, OpC, OpOut, Semiring, {cfg.bm}, {cfg.bn}, {cfg.threads}, {cfg.bk}, {dot_vector(plan)}, {cfg.stages}, {cfg.split_k}, {'true' if partials_m_fast(plan, cfg) else 'false'}>;
}}  // namespace
{_entry_points(plan, cfg, 1)}"""
    return src, 0, cfg.threads, None
