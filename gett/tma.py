"""Which operands the Tensor Memory Accelerator (TMA, sm_90) can load, and the view it loads them as.

A warp-specialised wgmma kernel (``ws``) has a producer warpgroup copy A and B into shared memory with
cp.async, 16 bytes a thread. Where an operand is a plain 2-D matrix — its modes in the row group
merge into one, its modes in K into another, one of the two has stride 1 and the other a multiple of
16 bytes — one thread can instead ask the TMA for the whole tile, a box of the matrix that lands in
the 128-byte-swizzled layout wgmma reads (kernels/tma.cuh), rows and K past the end filled with
zeros. Both operands must qualify (the stage's barrier counts either bytes or copies), and neither
may have a box-transposed tile (the producer would have to touch the data) or an op that does not map 0
to 0 (the math threads apply ops to the landed stage, zero fill included). For the wide tiles
(128 x 296), K of two modes that do not merge loads as two dimensions of a 3-D view (:func:`k_run`);
an MN-major A whose rows are two modes, as a 3-D view whose 64-row boxes each lie inside one run of the
first, each run padded to whole boxes (:func:`m_run`).

A SIMT kernel whose producer warpgroup runs several tiles (``ws``, ``persistent``) can store D's tile
the same way (:class:`TmaStoreBox`): the math warps write it into the epilogue tile in the box's layout
and one thread asks the TMA to store it, then they go on to the next tile while the TMA drains it.

In an mma.sync kernel (no producer warpgroup), A's tile can be one box of A itself, up to five of its
modes at once (:class:`TmaBox`): where the tile's rows are whole low parts of A's modes, A's stride-1
mode first (a box-tiled M: 16 x 16 elements of two modes), and its K tile a run of one mode. One
thread then asks for the whole stage instead of every thread copying 16 bytes at a time through the
index tables (kernels/tma.cuh, TmaBoxLoader).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .config import WGMMA_WIDE_N, KernelConfig, round_up
from .expr import keeps_zero

TMA_DTYPES = {"f16": 6, "bf16": 9}   # CUtensorMapDataType of the 16-bit types wgmma reads
TMA_DATA_TYPES = {**TMA_DTYPES, "f32": 7}   # ... and of every type a tensor map holds (D's stores: f32 too)
_MAX_BOX = 256                       # elements per box side
_MAX_COORDINATE = 2**31 - 1          # box coordinates are 32-bit signed
_SWIZZLE = {32: 1, 64: 2, 128: 3}    # box row bytes -> CUtensorMapSwizzle (others: 0, none)
_MAX_BOX_ROW = 128                   # bytes: longer rows put ldmatrix's eight on one bank (no swizzle spans them)
_MAX_RANK = 5                        # dimensions of a tensor map


@dataclass(frozen=True)
class TmaOperand:
    """One operand as the TMA sees it: a 2-D matrix of ``extents`` (inner, outer) elements, the outer
    one ``outer_stride`` bytes apart, copied in boxes of ``box`` (inner, outer) elements. Where K is two
    modes that do not merge (``k_outer_stride`` > 0), a third dimension follows: K's second mode, that
    many bytes apart, one position a box (``extents`` and ``box`` have three entries); K's first mode
    is then the matrix's K, its K tiles padded to whole tiles at the end of each run (:func:`k_run`).
    Likewise an MN-major A whose rows are two modes (``row_outer_stride`` > 0, :func:`m_run`): the
    third dimension is M's second mode, and each of a tile's 64-row boxes takes one index of it."""
    tensor: str          # "A" or "B"
    dtype: str           # a key of TMA_DTYPES
    k_major: bool        # K is the inner (stride-1) dimension; else the rows (M or N) are
    extents: tuple       # (inner, outer[, K's second mode]) elements
    outer_stride: int    # bytes
    box: tuple           # (inner, outer[, 1]) elements
    k_outer_stride: int = 0   # bytes; 0: K is one (merged) mode
    row_outer_stride: int = 0   # bytes; > 0: the rows' second mode is the third dimension (:func:`m_run`)

    @property
    def byte_strides(self) -> tuple:
        third = self.k_outer_stride or self.row_outer_stride
        return (self.outer_stride,) + ((third,) if third else ())

    @property
    def swizzle(self) -> int:
        return _SWIZZLE[128]   # the layout wgmma reads


@dataclass(frozen=True)
class TmaBox:
    """An operand tile as one box of the tensor: dimensions (the tensor's modes) innermost first —
    the stride-1 mode, the K tile's mode, the tile's other row modes, then the rest — with
    ``extents`` (elements), ``byte_strides`` (of dimensions 1 on), ``box`` (elements a stage loads).
    ``row_coordinates`` and ``k_coordinates`` give, per dimension, how much each mode of the M (K)
    table moves that dimension's coordinate (0 for modes of other dimensions and for the tile's
    own rows, which start at 0): the kernel's coordinates of a tile are index tables with these strides."""
    tensor: str
    dtype: str
    extents: tuple
    byte_strides: tuple
    box: tuple
    row_coordinates: tuple   # per dimension, a stride per mode of the row table
    k_coordinates: tuple     # per dimension, a stride per mode of the K table
    swizzle: int             # CUtensorMapSwizzle of the box's rows (kernels/tma.cuh, TmaBoxLoader)


@dataclass(frozen=True)
class TmaStoreBox:
    """D's tile as one box of D: dimensions (D's modes) stride-1 first, then by stride, with ``extents``
    (elements), ``byte_strides`` (of dimensions 1 on) and ``box`` (elements: the tile's modes whole, 1 for
    the others). ``m_coordinates`` / ``n_coordinates`` give per dimension how much each mode of the M (N)
    table moves its coordinate, so a tile's coordinates are index tables of its first row and column;
    ``m_positions`` / ``n_positions`` give each mode of M (N) the tile spans, first modes first, its
    (extent in the tile, stride in the box's shared-memory layout: innermost dimension first, no padding)."""
    tensor: str
    dtype: str
    extents: tuple
    byte_strides: tuple
    box: tuple
    m_coordinates: tuple
    n_coordinates: tuple
    m_positions: tuple
    n_positions: tuple
    swizzle: int = 0


def merged_mode(table, tensor: str):
    """(extent, stride) of ``tensor``'s modes in ``table`` as one mode, or None where they do not merge
    (each mode must continue where the one before ends: stride_i+1 = stride_i · extent_i)."""
    extents, strides = table.extents, table.strides_of(tensor)
    if not extents:
        return 1, 0
    for i in range(len(extents) - 1):
        if strides[i + 1] != strides[i] * extents[i]:
            return None
    return math.prod(extents), strides[0]


# K tiles the TMA may pad at the end of each run of K's first mode (see k_run): #13's 312 in 5 of 64
_MAX_RUN_PADDING = 1.05


def k_run(plan, cfg: KernelConfig) -> int:
    """The extent of K's first mode where the TMA loads K as two modes, else 0: K tiles then run over
    that mode (the last tile of each run padded with zeros past its end) for each index of the second.
    Only where K is two modes that do not merge in some operand (else it loads as one), the padding
    costs at most 5% more K tiles, and the tile is a wide one (WGMMA_WIDE_N), which must load by TMA:
    H100, TCCG #13 ``ab-acd-dbc`` (K = 312 x 296, tile_sweep, two rounds): 128 x 296 s4 k22 66.2/68.0
    us through the TMA (92.7/92.5 by cp.async), but 128 x 160 s4 k22 78.3/79.1 against 72.0/72.3 by
    cp.async."""
    k = plan.tables["K"]
    if cfg.bn not in WGMMA_WIDE_N or len(k.extents) != 2 or all(merged_mode(k, t) is not None for t in "AB"):
        return 0
    run = k.extents[0]
    return run if -(-run // cfg.bk) * cfg.bk <= _MAX_RUN_PADDING * run else 0


# 64-row boxes the TMA may pad at the end of each run of M's first mode (see m_run): 312 in 5 of 64
_MAX_ROW_RUN_PADDING = 1.05


def m_run(plan, cfg: KernelConfig) -> int:
    """The extent of M's first mode where the TMA loads A's rows as two modes, else 0: each run of that
    mode is then padded with zeros to whole 64 rows, and each 64-row box of a tile lies inside one run, a
    box of one index of the second mode (kernels/gett.cuh, M_RUN). Only for a warp-specialised wgmma kernel
    without split K or swap whose MN-major A has M of two modes that do not merge in A (else it loads as
    one), A's stride-1 mode first, where the padding costs at most 5% more rows and a run is at least a
    tile, K one mode in A, and the epilogue walks D plainly. H200 (runner A/B, three rounds; no H100
    measured): TCCG #16 ``abc-ad-bdc`` (exchanged, D N-fast) 46.5-46.9 -> 45.2-45.5 us, #17 45.4-45.8 ->
    45.1-45.6, #18 43.4-43.7 -> 42.8-42.9 (M = 312 x 296, A's rows 624 bytes apart along K), whose tiles
    crossed from one run into the next, copied by cp.async."""
    from .codegen import epilogue_cross, epilogue_walk   # gett.codegen imports this module
    m = plan.tables["M"]
    if (cfg.math != "wgmma" or not cfg.ws or cfg.swap or cfg.split_k != 1 or cfg.bm % 64
            or plan.descriptors["A"].dtype.name not in TMA_DTYPES or k_run(plan, cfg)
            or len(m.extents) != 2 or merged_mode(m, "A") is not None or m.strides_of("A")[0] != 1
            or merged_mode(plan.tables["K"], "A") is None):
        return 0
    run = m.extents[0]
    padded = round_up(run, 64)
    if padded < cfg.bm or padded > _MAX_ROW_RUN_PADDING * run:   # a tile holds one run's padding at most
        return 0
    m_fast, tx, _ = epilogue_walk(plan, cfg)
    if m_fast and (tx != 1 or epilogue_cross(plan, cfg, m_fast, tx)[1] != 1):
        return 0
    return run


def tma_operand(plan, cfg: KernelConfig, tensor: str, layout, run: int = 0, rows_run: int = 0) -> TmaOperand | None:
    """``tensor``'s TMA view under ``cfg`` with shared-memory ``layout`` (gett.codegen.OperandLayout) of
    the (box-tiled) ``plan``, or None where the TMA cannot load it. ``run`` (:func:`k_run`): K's two
    modes as two dimensions; ``rows_run`` (:func:`m_run`, A only): M's two modes as the first and third."""
    rows_group, rows = ("M", cfg.bm) if tensor == "A" else ("N", cfg.bn)
    desc = plan.descriptors[tensor]
    op = plan.ops.op_a if tensor == "A" else plan.ops.op_b
    if desc.dtype.name not in TMA_DTYPES or layout.step != 1 or not layout.is_async:
        return None
    # the math threads apply an op to the landed tile, the TMA's zero fill included (kernels/gett.cuh)
    if op is not None and not keeps_zero(op, plan.compute_type.accumulator.numpy):
        return None
    k_table, rows_table = plan.tables["K"], plan.tables[rows_group]
    rows_run = rows_run if tensor == "A" and layout.row_contig else 0
    row_mode = (rows_table.extents[0], rows_table.strides_of(tensor)[0]) if rows_run \
        else merged_mode(rows_table, tensor)
    k_mode = (k_table.extents[0], k_table.strides_of(tensor)[0]) if run else merged_mode(k_table, tensor)
    if row_mode is None or k_mode is None:
        return None
    (row_extent, row_stride), (k_extent, k_stride) = row_mode, k_mode
    k_major = not layout.row_contig
    inner_stride, outer_stride = (k_stride, row_stride) if k_major else (row_stride, k_stride)
    item = desc.dtype.itemsize
    third = ((k_table.extents[1], k_table.strides_of(tensor)[1] * item) if run
             else (rows_table.extents[1], rows_table.strides_of(tensor)[1] * item) if rows_run else ())
    if inner_stride != 1 or outer_stride <= 0 or outer_stride * item % 16 or desc.alignment < 16 \
            or (third and (third[1] <= 0 or third[1] % 16)):
        return None
    extents = ((k_extent, row_extent) if k_major else (row_extent, k_extent)) + third[:1]
    if max(extents) + max(rows, cfg.bk) > _MAX_COORDINATE:
        return None
    # K-major tiles past 256 rows: two boxes of half, in whole 8-line atoms (kernels/tma.cuh)
    box = (cfg.bk, rows if rows <= _MAX_BOX else -(-rows // 16) * 8) if k_major else (64, cfg.bk)
    if max(box) > _MAX_BOX:
        return None
    return TmaOperand(tensor, desc.dtype.name, k_major, extents, outer_stride * item, box + (1,) * bool(third),
                      third[1] if run else 0, third[1] if rows_run else 0)


def tma_operands(plan, cfg: KernelConfig, layouts) -> tuple | None:
    """(A's, B's) TMA views where the kernel loads both through the TMA, else None: a warp-specialised
    wgmma kernel over one batch, both operands plain 2-D matrices (see :func:`tma_operand`), or 3-D
    ones, K's two modes apart (:func:`k_run`), for both, or A's rows two modes apart (:func:`m_run`)."""
    if cfg.math != "wgmma" or not cfg.ws or plan.batch != 1:
        return None
    run, rows_run = k_run(plan, cfg), m_run(plan, cfg)
    views = tuple(tma_operand(plan, cfg, t, x, run, rows_run) for t, x in zip("AB", layouts))
    return views if all(views) else None


def _dimensions(table, tensor: str) -> list:
    """[(mode key, index in ``table``, scale)] for ``tensor``'s modes in ``table``: box tiling splits a
    mode ``x`` into ``x%t`` (scale 1) and ``x/t`` (scale t), which share the key ``x``."""
    out = []
    for i, (mode, stride) in enumerate(zip(table.modes, table.strides_of(tensor))):
        if stride == 0:
            continue
        last = mode[-1] if len(mode) > 1 else None
        split = isinstance(last, str) and last[:1] in "%/" and last[1:].isdigit()
        key = mode[:-1] if split else mode
        out.append((key, i, int(last[1:]) if split and last[0] == "/" else 1))
    return out


def _box_dimensions(parts, tensor: str) -> tuple | None:
    """({mode key: stride}, {mode key: extent}) of ``tensor``'s dimensions from ``parts`` [((key, index, scale),
    table)] (:func:`_dimensions` of each table): each key once with its scale-1 part's stride, every part's
    stride that stride times its scale; None where they disagree."""
    strides, extents = {}, {}
    for (key, i, scale), table in parts:
        if scale == 1:
            if key in strides:
                return None
            strides[key] = table.strides_of(tensor)[i]
        extents[key] = extents.get(key, 1) * table.extents[i]
    if any(key not in strides or table.strides_of(tensor)[i] != strides[key] * scale for (key, i, scale), table in parts):
        return None
    return strides, extents


def _coordinates(table, parts, order, skip=()) -> tuple:
    """Per dimension in ``order`` (mode keys), how much each mode of ``table`` moves its coordinate: the
    scale of that key's part (``parts``, :func:`_dimensions`), 0 for other keys and the modes in ``skip``."""
    by_index = {i: (key, scale) for key, i, scale in parts}
    return tuple(tuple(by_index[i][1] if by_index[i][0] == k and i not in skip else 0
                       for i in range(len(table.extents))) for k in order)


def tile_box(plan, cfg: KernelConfig, layout, arch: str | None) -> TmaBox | None:
    """A's tile under ``cfg`` as one TMA box of A (see the module docstring), or None where it is not
    one: an mma.sync kernel on sm_90 without a producer warpgroup over one batch; A 16-bit, M-major
    (``layout``, gett.codegen.OperandLayout), 16-byte aligned; the tile's BM rows exactly the low parts
    of M's first modes, the first A's stride-1 mode in rows of 16 to 128 bytes; the K tile inside K's
    first mode; at most five modes, every stride a positive multiple of 16 bytes. An op on A only in CTAs
    over several tiles (``cfg.persistent``), where the loader applies it in place once a stage lands:
    H100 (fusion.py, session 22) fused #3/#4 (one CTA an SM) 96.4 -> 84.3 us, but in the 256-row tiles of
    fused #6-8 the op pass took 67 -> 92-101 registers and #6 274.5 -> 315.4 us."""
    from .kernel import arch_number  # gett.kernel imports this module
    desc = plan.descriptors["A"]
    if (cfg.math != "mma16" or cfg.ws or plan.batch != 1 or not arch or arch_number(arch) < 90
            or desc.dtype.name not in TMA_DTYPES or (plan.ops.op_a is not None and not cfg.persistent)
            or not layout.row_contig or not layout.is_async or layout.step != 1 or desc.alignment < 16):
        return None
    m_table, k_table = plan.tables["M"], plan.tables["K"]
    m_parts, k_parts = _dimensions(m_table, "A"), _dimensions(k_table, "A")
    if not m_parts or not k_parts or len(m_parts) != len(m_table.extents) or len(k_parts) != len(k_table.extents):
        return None
    # the tile's rows: the first modes of M, whose extents multiply to BM
    rows, in_tile = 1, 0
    while in_tile < len(m_table.extents) and rows < cfg.bm:
        rows *= m_table.extents[in_tile]
        in_tile += 1
    k0 = k_table.extents[0]
    if rows != cfg.bm or not (k0 % cfg.bk == 0 or len(k_table.extents) == 1) or k0 < cfg.bk:
        return None
    dims = _box_dimensions([(p, m_table) for p in m_parts] + [(p, k_table) for p in k_parts], "A")
    if dims is None:
        return None
    strides, extents = dims
    tile_rows = [m_parts[i] for i in range(in_tile)]
    if any(scale != 1 for _, _, scale in tile_rows) or k_parts[0][2] != 1 or strides[tile_rows[0][0]] != 1:
        return None
    first = [tile_rows[0][0], k_parts[0][0]] + [key for key, _, _ in tile_rows[1:]]
    order = first + sorted((k for k in strides if k not in first), key=lambda k: strides[k])
    item = desc.dtype.itemsize
    box = {key: m_table.extents[i] for key, i, _ in tile_rows} | {k_parts[0][0]: cfg.bk}
    boxes = tuple(box.get(k, 1) for k in order)
    row_bytes = boxes[0] * item
    if (len(order) > _MAX_RANK or len(set(first)) != len(first) or row_bytes % 16 or row_bytes > _MAX_BOX_ROW
            or max(boxes) > _MAX_BOX or any(strides[k] <= 0 or strides[k] * item % 16 for k in order[1:])
            or any(extents[k] > _MAX_COORDINATE for k in order)):
        return None

    # the tile's own rows start at 0 in every tile: they add no coordinate
    return TmaBox("A", desc.dtype.name, tuple(extents[k] for k in order),
                  tuple(strides[k] * item for k in order[1:]), boxes,
                  _coordinates(m_table, m_parts, order, skip=set(range(in_tile))), _coordinates(k_table, k_parts, order),
                  _SWIZZLE.get(row_bytes, 0))


def _tile_modes(table, tile: int) -> list | None:
    """[(mode index, extent in the tile)] of the modes a tile of ``tile`` indices of ``table`` spans: its
    first modes whole, then a part of the next one that divides it (or None where no such split exists)."""
    spans, size = [], 1
    for i, extent in enumerate(table.extents):
        if size == tile:
            break
        part = min(extent, tile // size)
        if tile % (size * part) or extent % part:
            return None
        spans.append((i, part))
        size *= part
    return spans if size == tile else None


def store_box(plan, cfg: KernelConfig) -> TmaStoreBox | None:
    """D's tile under ``cfg`` as one TMA box of D, or None where it is not one: a SIMT kernel whose
    producer warpgroup runs several tiles (the only one that stores through the TMA), one batch, no split
    K; D 16-bit or f32, 16-byte aligned; the tile's rows M's first modes and its columns N's, D's
    stride-1 mode among them in rows of whole 16-byte chunks (the tile may span part of a mode whose
    extent it divides: 128 rows of a mode of 384), the first mode of the side a warp's lanes run along
    (N, or M with ``cfg.lanes_m``) not a multiple of 128 bytes into the box; at most five dimensions
    (modes outside the tile merged where one continues the other), every other stride a positive
    multiple of 16 bytes."""
    desc = plan.descriptors["D"]
    if (cfg.math != "simt" or not cfg.ws or not cfg.persistent or cfg.split_k != 1 or plan.batch != 1
            or desc.dtype.name not in TMA_DATA_TYPES or desc.alignment < 16):
        return None
    m_table, n_table = plan.tables["M"], plan.tables["N"]
    m_parts, n_parts = _dimensions(m_table, "D"), _dimensions(n_table, "D")
    in_m, in_n = _tile_modes(m_table, cfg.bm), _tile_modes(n_table, cfg.bn)
    if (in_m is None or in_n is None or len(m_parts) != len(m_table.extents)
            or len(n_parts) != len(n_table.extents)):
        return None
    dims = _box_dimensions([(p, m_table) for p in m_parts] + [(p, n_table) for p in n_parts], "D")
    if dims is None:
        return None
    strides, extents = dims
    tile = [(m_parts[i], part) for i, part in in_m] + [(n_parts[i], part) for i, part in in_n]
    if any(scale != 1 for (_, _, scale), _ in tile):
        return None
    order = sorted(strides, key=lambda k: strides[k])
    box = {key: part for (key, _, _), part in tile}
    boxes = tuple(box.get(k, 1) for k in order)
    item = desc.dtype.itemsize
    position = {k: math.prod(boxes[:j]) for j, k in enumerate(order)}
    dims = _merged_outside(order, strides, extents, box) if len(order) > _MAX_RANK else [[(k, 1)] for k in order]
    heads = [dim[0][0] for dim in dims]
    dim_extents = [math.prod(extents[k] for k, _ in dim) for dim in dims]
    if (strides[order[0]] != 1 or order[0] not in box or len(dims) > _MAX_RANK or boxes[0] * item % 16
            or max(boxes) > _MAX_BOX or any(strides[k] <= 0 or strides[k] * item % 16 for k in heads[1:])
            or max(dim_extents) > _MAX_COORDINATE):
        return None
    # A warp's lanes run along N (SIMT: tx fastest), or along M with ``cfg.lanes_m``: where that side's
    # first mode sits a multiple of 128 bytes into the box, their stores into the tile fall on one bank.
    # H100, f32 (runner): #40 ``abcdef-gdab-efgc`` (M's 128 rows of D's stride-1 mode first, then N at 512
    # bytes) 84.4 -> 133.2 us with lanes along N.
    lanes = m_parts[in_m[0][0]] if cfg.lanes_m else n_parts[in_n[0][0]]
    if position[lanes[0]] * item % 128 == 0:
        return None

    def coordinates(table, parts):   # per dimension, its members' coordinates at their scales
        per_key = dict(zip(order, _coordinates(table, parts, order)))
        return tuple(tuple(sum(scale * per_key[k][i] for k, scale in dim) for i in range(len(table.extents)))
                     for dim in dims)
    return TmaStoreBox("D", desc.dtype.name, tuple(dim_extents),
                       tuple(strides[k] * item for k in heads[1:]), tuple(box.get(k, 1) for k in heads),
                       coordinates(m_table, m_parts), coordinates(n_table, n_parts),
                       tuple((part, position[m_parts[i][0]]) for i, part in in_m),
                       tuple((part, position[n_parts[i][0]]) for i, part in in_n))


def _merged_outside(order, strides, extents, box) -> list:
    """D's dimensions (``order``: mode keys by stride) as lists of (key, scale): neighbours outside the
    tile (box 1 both) where the outer continues the inner (stride = inner stride · inner extent) become
    one dimension whose coordinate is the inner's plus the outer's times the inner extent — how a D of six
    modes fits a tensor map's five (f32 TCCG #35, #44)."""
    dims = []
    for k in order:
        last = dims[-1][-1][0] if dims else None
        if (last is not None and k not in box and all(x not in box for x, _ in dims[-1])
                and strides[k] == strides[last] * extents[last]):
            dims[-1].append((k, dims[-1][-1][1] * extents[last]))
        else:
            dims.append([(k, 1)])
    return dims
