"""Box tiling: make a CTA tile a 2-D box when two tensors want different modes of one group innermost.

Linear tiling of a GEMM dimension covers consecutive indices of the group's innermost mode — good for
the tensor whose stride-1 mode that is, but the other tensor of the group (D in M when A's stride-1
mode is also in M, B in K when A's is too) then touches one element per mode step: 2-byte accesses,
one sector each. Splitting both modes (CuTe's logical divide) and reordering gives tiles that are
boxes of ``Tx`` consecutive elements of the first tensor's stride-1 mode by ``Ty`` of the second's:

    [x, ..., y, ...]  ->  [x%Tx, y%Ty, x/Tx, ..., y/Ty, ...]

Both splits are exact (Tx divides x's extent, Ty divides y's), so the new table is a permutation of
the same index space: the kernel is unchanged, and the reference executor checks the result.
"""
from __future__ import annotations

from dataclasses import replace

from .layout import IndexTable

# per group: the tensors that move data along it, and the tile extent of the configuration
_GROUP_TENSORS = {"M": ("A", "D"), "N": ("B", "D"), "K": ("A", "B")}


def _largest_divisor(n: int, fits) -> int:
    """The largest divisor d of ``n`` with ``fits(d)`` (1 always fits)."""
    return max(d for d in range(1, n + 1) if n % d == 0 and (d == 1 or fits(d)))


def box_sides(ex: int, ey: int, tile: int, min_first: int, keep_first: bool, strict: bool = False,
              whole_output: bool = False) -> tuple:
    """(tx, ty): divisors of the two modes' extents with tx·ty dividing ``tile``, tx as long as possible,
    then — unless ``keep_first`` (the output's runs decide which sectors are written whole) — made as
    square as the first tensor's vectors (``min_first`` elements) allow, until ty reaches 16 elements
    with tx still whole vectors. A tile of 96 or 192 can hold whole runs of 24.
    ``strict``: squaring stops at a step that leaves ty as it was (312 x 312 in 384: 24 x 8, not 12 x 8).
    ``whole_output`` (the second tensor is the output D): ty is all of its mode where the tile holds that
    with tx whole vectors of the first, tx then as long as the tile allows — D written in whole runs of
    its stride-1 mode, A read in shorter ones. H100, tall tiles (tile_sweep, session 28): f16 (mma.sync)
    #6 ``abcde-efbad-cf`` in 768 rows 178.3 -> 123.1 us (16 x 48: A's runs 96 -> 32 bytes, D's 32 -> 96),
    #8 166.1 -> 118.7, #3 ``abcd-dbea-ec`` in 576 rows 57.8 -> 47.8 (8 x 72 for 24 x 24), #4 58 -> 54.2;
    f32 (SIMT, 384 rows) #6 284.1 -> 248.7 (8 x 48 for 24 x 16), #7 355.4 -> 340.8, #8 280.4 -> 246.0 (f32
    #3/#4 in 576 rows as 8 x 72: 80.3 -> 87.0, 77.5 -> 85.2; their 384 rows cannot hold a whole 72)."""
    if whole_output and not keep_first:
        tx = _largest_divisor(ex, lambda d: tile % (d * ey) == 0 and d % min_first == 0)
        if tx % min_first == 0 and tile % (tx * ey) == 0:
            return tx, ey

    def sides(limit):
        tx = _largest_divisor(ex, lambda d: d <= limit and tile % d == 0)
        return tx, _largest_divisor(ey, lambda d: tile % (tx * d) == 0)
    tx, ty = sides(tile // 2)
    while not keep_first and tx > 2 * ty and tx > min_first and not (ty >= 16 and tx % min_first == 0):
        nx, ny = sides(tx - 1)
        if strict and ny == ty:
            break
        tx, ty = nx, ny
    return tx, ty


def split_box(table: IndexTable, first: str, second: str, tile: int, min_first: int,
              strict: bool = False, whole_output: bool = False) -> IndexTable:
    """``table`` reordered into boxes of (first's stride-1 mode) × (second's stride-1 mode) that tile
    ``tile`` exactly, or ``table`` itself when there is nothing to gain (``strict``, ``whole_output``:
    see box_sides)."""
    sx, sy = table.strides_of(first), table.strides_of(second)
    if len(table.extents) < 2 or sx[0] != 1 or sy[0] == 1 or 1 not in sy:
        return table
    j = sy.index(1)
    ex, ey = table.extents[0], table.extents[j]
    tx, ty = box_sides(ex, ey, tile, min_first, keep_first=first == "D", strict=strict,
                       whole_output=whole_output and second == "D")
    if ty < 2:
        return table
    modes, extents = list(table.modes), list(table.extents)
    strides = {t: list(s) for t, s in table.strides}
    order = [("in", 0), ("in", j), ("out", 0)] + [("all", i) for i in range(1, len(modes)) if i != j] \
        + [("out", j)]
    size = {0: tx, j: ty}
    new_modes, new_extents, new_strides = [], [], {t: [] for t in strides}
    for part, i in order:
        t_in = size.get(i, extents[i])
        if part == "in":
            mode, extent, scale = modes[i] + (f"%{t_in}",), t_in, 1
        elif part == "out":
            if extents[i] == t_in:
                continue
            mode, extent, scale = modes[i] + (f"/{t_in}",), extents[i] // t_in, t_in
        else:
            mode, extent, scale = modes[i], extents[i], 1
        new_modes.append(mode)
        new_extents.append(extent)
        for t in strides:
            new_strides[t].append(strides[t][i] * scale)
    return IndexTable(table.name, tuple(new_modes), tuple(new_extents),
                      tuple((t, tuple(new_strides[t])) for t, _ in table.strides))


def _first_tensor(plan, group: str) -> str:
    """The tensor whose stride-1 mode the planner put innermost (the group's key tensor)."""
    table = plan.tables[group]
    for t in _GROUP_TENSORS[group]:
        if table.extents and table.strides_of(t)[0] == 1:
            return t
    return ""


def tile_plan(plan, cfg):
    """``plan`` with its M, N and K tables box-tiled for ``cfg``'s tile sizes (same plan if none apply)."""
    tiles = {"M": cfg.bm, "N": cfg.bn, "K": cfg.bk}
    tables = dict(plan.tables)
    for g, tensors in _GROUP_TENSORS.items():
        first = _first_tensor(plan, g)
        if not first:
            continue
        second = tensors[1] if first == tensors[0] else tensors[0]
        vector = max(16 // plan.descriptors[first].dtype.itemsize, 1)
        # SIMT tiles square boxes strictly. H100, f32 (session 27, runner A/B): #1 ``abc-bda-dc`` 75.4 ->
        # 65.0 us (A's runs 48 -> 96 bytes, D's 32 either way), #3 83.1 -> 79.7, #4 82.4 -> 78.0 (384 rows,
        # 24 x 8, for 576, 24 x 24); the mma.sync tiles of f16 #1 lose (tile_sweep 39.1 -> 43.7)
        # tall tiles (N <= 32: the tile's D all along M) write D in whole runs of its mode
        tall = cfg.math in ("mma16", "simt") and cfg.bn <= 32
        tables[g] = split_box(plan.tables[g], first, second, tiles[g], vector, strict=cfg.math == "simt",
                              whole_output=tall)
    if tables == plan.tables:
        return plan
    return replace(plan, tables=tables, _compiled={})
