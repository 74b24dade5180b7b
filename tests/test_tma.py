"""TMA loads without a GPU: which operands the TMA can load and as what 2-D view (gett.tma), the kernels
that take tensor maps (rendered and compiled by NVRTC for sm_90a), the launcher's map cache, and the
heuristic's wide tile for the GEMM-like plans that use them."""
from dataclasses import replace

import numpy as np
import pytest

import gett
from gett import tensor_map
from gett.codegen import operand_layouts, render_kernel
from gett.config import KernelConfig, default_config
from gett.errors import DeviceError
from gett.layout import IndexTable
from gett.tiling import tile_plan
from tccg_suite.suite import load_suite
from gett.tma import TmaBox, TmaOperand, TmaStoreBox, merged_mode, store_box, tile_box, tma_operands

D = gett.TensorDescriptor
WIDE = KernelConfig("wgmma", 128, 256, 64, 4, ws=True)


def gemm(m, n, k, a_modes="mk", b_modes="kn", dtype="f16", batch=0, d_dtype="f32", **kw):
    """A plan of D[m,n] = A·B with A and B laid out row-major in the order of their mode strings."""
    ext = {"m": m, "n": n, "k": k, "l": batch}
    a_modes, b_modes, d_modes = a_modes + "l" * bool(batch), b_modes + "l" * bool(batch), "mn" + "l" * bool(batch)
    a, b = (D(tuple(ext[c] for c in s), None, dtype) for s in (a_modes, b_modes))
    return gett.plan_contraction(a, a_modes, b, b_modes, D(tuple(ext[c] for c in d_modes), None, d_dtype), d_modes,
                                 **kw)


def views(plan, cfg=WIDE):
    tiled = tile_plan(plan, cfg)
    return tma_operands(tiled, cfg, operand_layouts(tiled, cfg))


def test_a_plain_gemm_loads_both_operands_as_2d_boxes():
    """A[m,k] row-major is K-major (one box of 64 K by 128 rows a stage); B[k,n] row-major is N-major
    (four boxes of 64 columns by 64 K): the boxes tile the shared layouts wgmma reads."""
    a, b = views(gemm(5136, 5120, 5136))
    assert a == TmaOperand("A", "f16", True, (5136, 5136), 5136 * 2, (64, 128))
    assert b == TmaOperand("B", "f16", False, (5120, 5136), 5120 * 2, (64, 64))


def test_modes_that_continue_each_other_merge_into_one_dimension():
    table = IndexTable("M", ("a", "b"), (72, 72), (("A", (1, 72)), ("D", (5184, 1))))
    assert merged_mode(table, "A") == (5184, 1)
    assert merged_mode(table, "D") is None   # b's stride is not a's extent times a's stride
    plan = gett.plan_contraction(D((72, 72, 512), (1, 72, 5184), "f16"), "abk", D((512, 4096), None, "f16"), "kn",
                                 D((72, 72, 4096), None, "f32"), "abn")
    a, _ = views(plan)
    assert a.extents == (5184, 512) and not a.k_major and a.outer_stride == 5184 * 2


@pytest.mark.parametrize("case,why", [
    ({"cfg": KernelConfig("wgmma", 128, 256, 64, 4)}, "no producer warpgroup"),
    ({"cfg": KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=64)}, "not wgmma"),
    ({"op_a": lambda x: 2 * x + 1}, "an op on A that does not keep 0: the TMA's zero fill would not stay 0"),
    ({"batch": 3}, "a batch: one 2-D map per operand"),
])
def test_operands_the_tma_cannot_load(case, why):
    case = dict(case)
    cfg = case.pop("cfg", WIDE)
    assert views(gemm(1024, 1024, 1024, config=cfg, **case), cfg) is None, why


def test_ops_that_keep_zero_ride_the_tma_and_the_kernel_compiles():
    """Ops with op(0) == 0 (ELU, leaky ReLU, 2x, -x): the TMA loads A and B as without them, and the math
    threads apply the ops to each landed stage (kernels/gett.cuh, kOpsOnLanded); zero fill stays zero."""
    for op in (gett.ops.elu(1.0), gett.ops.leaky_relu(0.01), lambda x: 2 * x, lambda x: -x):
        plan = gemm(1024, 1024, 1000, b_modes="nk", config=WIDE, device_arch="sm_90", op_a=op, op_b=op)
        a, b = views(plan)
        assert (a.k_major, b.k_major) == (True, True)
    kernel = plan.kernel("sm_90")
    assert kernel.tma is not None and kernel.report.spill_stores == 0


def test_strides_must_be_whole_16_byte_steps():
    """K-major A with K = 1004 f16 (2008-byte rows): the TMA needs strides in multiples of 16 bytes."""
    assert views(gemm(1024, 1024, 1004)) is None
    assert views(gemm(1024, 1024, 1008)) is not None


def test_boxes_of_operands_whose_modes_do_not_merge_are_refused():
    """A[a,k,b] with M = (a, b): K sits between M's modes, so M is no single strided dimension."""
    plan = gett.plan_contraction(D((64, 512, 64), (1, 64, 64 * 512), "f16"), "akb", D((512, 2048), None, "f16"),
                                 "kn", D((64, 64, 2048), None, "f32"), "abn")
    assert views(plan) is None


def test_the_tma_kernel_takes_two_tensor_maps_and_compiles_for_sm_90a():
    plan = gemm(1024, 1024, 1024, config=WIDE, device_arch="sm_90")
    src = render_kernel(tile_plan(plan, WIDE), WIDE)[0]
    assert src.count("const __grid_constant__ gett::TensorMap") == 2 and "&map_a, &map_b" in src
    kernel = plan.kernel("sm_90")
    assert kernel.tma is not None and kernel.report.spill_stores == 0
    plain = KernelConfig("wgmma", 128, 256, 64, 4)
    assert "TensorMap" not in render_kernel(tile_plan(plan, plain), plain)[0]


def test_a_misaligned_address_is_refused_before_the_driver_is_asked():
    view = TmaOperand("B", "f16", True, (1024, 1024), 2048, (64, 256))
    with pytest.raises(DeviceError, match="B: a TMA copy needs a 16-byte aligned address"):
        tensor_map.encode(view, 0x1008)


def test_maps_of_a_fetch_128_bytes_into_l2_and_the_others_256(monkeypatch):
    """A's maps (2-D operand or box tile) ask L2 fetches of 128 bytes, B's and D's of 256 (the driver's
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2, _256B = 3): measured on H100 in session 36 (tensor_map.py)."""
    asked = []

    def driver_encode(*args):
        asked.append(args[10])   # cuTensorMapEncodeTiled's l2Promotion
        return 0
    monkeypatch.setattr(tensor_map, "_encode_function", lambda: driver_encode)
    a, b = views(gemm(1024, 1024, 1024))
    box = box_plan(*BOX_CASES[0][:3])[1]
    store = store_box(tccg_f32("abcdef-degc-gfab", SIMT_P), SIMT_P)
    for view in (a, b, box, store):
        tensor_map.encode(view, 0x1000)
    assert [v.tensor for v in (a, b, box, store)] == ["A", "B", "A", "D"]
    assert asked == [2, 3, 2, 3]


def test_the_launcher_encodes_a_map_once_per_address_pair(monkeypatch):
    calls = []
    monkeypatch.setattr(tensor_map, "encode", lambda view, address: calls.append((view.tensor, address)) or address)
    maps = tensor_map.TensorMaps(views(gemm(1024, 1024, 1024)), by_value=lambda x: ("arg", x))
    assert maps(0x1000, 0x2000, 0x3000) == (("arg", 0x1000), ("arg", 0x2000))
    assert maps(0x1000, 0x2000, 0x3000) == (("arg", 0x1000), ("arg", 0x2000))
    assert calls == [("A", 0x1000), ("B", 0x2000)]
    for i in range(tensor_map.TensorMaps.LIMIT):   # past the limit the oldest pair goes first
        maps(0x10000 * (i + 1), 0x2000, 0x3000)
    calls.clear()
    maps(0x1000, 0x2000, 0x3000)
    assert calls == [("A", 0x1000), ("B", 0x2000)]


def gapped_gemm(n, k):
    """#12's pattern with M = 72 x 72 whose rows of 72 lie 80 elements apart: A is no 2-D matrix."""
    return gett.plan_contraction(D((72, 72, k), (1, 80, 80 * 72), "f16"), "abk", D((n, k), None, "f16"), "nk",
                                 D((72, 72, n), None, "f32"), "abn")


def test_wide_tiles_take_the_least_work_per_sm():
    """The wide tile is the one whose waves of 132 CTAs times its area is least. TCCG #12 (5136 x 5120 x
    5136, B K-major): 27 x 24 tiles of 192 x 216 take 5 waves (207360 elements an SM) against 7 of
    128 x 240 (215040) or 128 x 256 (229376); through cp.async (A not a 2-D matrix) it is 128 x 240, the
    7 waves of 256 columns with 1/16 less work each. An N-major B takes whole 64-column swizzle atoms:
    192 x 192 against 128 x 256. All rasterise 16 row tiles a group."""
    k_major = default_config(gemm(5136, 5120, 5136, b_modes="nk"), "sm_90")
    assert (k_major.bm, k_major.bn, k_major.group_m, k_major.ws) == (192, 216, 16, True)
    gapped = gapped_gemm(5120, 5136)
    assert views(gapped) is None
    through_cp_async = default_config(gapped, "sm_90")
    assert (through_cp_async.bm, through_cp_async.bn, through_cp_async.group_m) == (128, 240, 16)
    n_major = default_config(gemm(5136, 5120, 5136, b_modes="kn"), "sm_90")   # 6 waves of 192 x 192 (221184)
    assert (n_major.bm, n_major.bn, n_major.group_m) == (192, 192, 16)
    one_wave = default_config(gemm(128 * 33, 1024, 4096, b_modes="nk"), "sm_90")   # 132 tiles of 128 x 256
    assert (one_wave.bm, one_wave.bn) == (128, 256)
    few = default_config(gemm(1024, 1024, 4096, b_modes="nk"), "sm_90")   # one wave of each: the smallest
    assert (few.bm, few.bn) == (128, 240)


def test_wide_tiles_of_a_short_k_run_over_several_tiles():
    """Up to K = 1024 a 128-row wide tile's store and its next tile's first loads weigh enough that its
    producer runs over several tiles (persistent, 3 stages); beyond (here 1088), and for 192-row tiles (measured
    slower persistent) or a plan that reads C, one tile a CTA."""
    for k in (256, 512, 1024):
        for b_modes in ("kn", "nk"):
            short = default_config(gemm(8192, 4096, k, b_modes=b_modes), "sm_90")
            assert (short.bm, short.bn, short.stages, short.persistent, short.ws) == (128, 256, 3, True, True)
    long = default_config(gemm(8192, 4096, 1088, b_modes="kn"), "sm_90")
    assert (long.bm, long.bn, long.stages, long.persistent) == (128, 256, 4, False)
    tall = default_config(gemm(5136, 5120, 1024, b_modes="nk"), "sm_90")
    assert tall.bm == 192 and not tall.persistent
    reads_c = default_config(gemm(8192, 4096, 512, b_modes="kn", beta=1.0), "sm_90")
    assert (reads_c.bm, reads_c.bn, reads_c.stages, reads_c.persistent) == (128, 256, 4, False)


def test_an_n_of_64_takes_the_producer_tile():
    """N = 64 (attention's P·V with a head of 64, thin GEMMs) takes the producer tile 64 wide, as N from 65 to
    127 does, not mma.sync's 128 x 64: 128 rows over several tiles where the tiles fill the SMs; where they don't,
    64 rows with 8 stages, one tile a CTA (config._thin_tile), K split only until half the SMs have a CTA. N = 48
    stays on mma.sync."""
    pv = default_config(gett.plan_contraction(D((128, 512, 512), None, "f16"), "lmk", D((128, 512, 64), None, "f16"),
                                              "lkn", D((128, 512, 64), None, "f16"), "lmn"), "sm_90")
    assert (pv.math, pv.bm, pv.bn, pv.ws, pv.persistent, pv.split_k) == ("wgmma", 128, 64, True, True, 1)

    def tile(m, n, k):
        c = default_config(gemm(m, n, k, b_modes="nk"), "sm_90")
        return c.math, c.bm, c.bn, c.stages, c.persistent, c.split_k
    assert tile(8192, 64, 8192) == ("wgmma", 64, 64, 8, False, 1)    # 128 tiles of 64 rows
    assert tile(16384, 64, 8192) == ("wgmma", 128, 64, 4, True, 1)   # 128 tiles of 128 rows: no split, no thin tile
    assert tile(2048, 64, 8192) == ("wgmma", 64, 64, 8, False, 2)    # 32, so K in two
    assert tile(8192, 128, 8192) == ("wgmma", 64, 128, 8, False, 1)
    assert tile(8192, 48, 8192)[0] == "mma16"


def test_three_math_warpgroups_need_a_producer_loading_by_tma():
    """192 rows: three math warpgroups, which take most of a TMA producer's registers, so only with a
    producer (ws) whose loads are TMA boxes; widths of one wgmma part (up to 128) or of 128 and a second
    part (192-240); 256 would spill."""
    for bn in (160, 256):
        with pytest.raises(ValueError, match="three warpgroups of rows take widths"):
            KernelConfig("wgmma", 192, bn, 64, 4, ws=True).validate()
    with pytest.raises(ValueError, match=r"bm must be one of \(64, 128\).*192 with a producer warpgroup"):
        KernelConfig("wgmma", 192, 216, 64, 4).validate()
    tall = KernelConfig("wgmma", 192, 216, 64, 4, ws=True)
    with pytest.raises(ValueError, match="math warpgroups take most.*must load by TMA"):
        render_kernel(tile_plan(gapped_gemm(1000, 1000), tall), tall)
    src = render_kernel(tile_plan(gemm(1000, 1000, 1000, b_modes="nk"), tall), tall)[0]
    assert "__launch_bounds__(512, 1)" in src and ", false, 128>" in src   # wgmma in parts of 128 columns


def test_ops_on_a_or_b_turn_a_192_row_tile_into_128_x_256():
    """A database tile of 192 rows (three math warpgroups, a TMA producer) borrowed by a plan with an op
    on A that does not keep 0 (so A cannot load by TMA): no producer applies ops, so the heuristic's 128 x
    256 for such plans."""
    from gett.config import for_load_ops
    plan = gemm(5136, 5120, 5136, b_modes="nk", op_a=gett.ops.sigmoid)
    assert for_load_ops(plan, KernelConfig("wgmma", 192, 216, 64, 4, group_m=16, ws=True)) == \
        KernelConfig("wgmma", 128, 256, 64, 4, group_m=16)


# --- A's tile as one box of A (mma.sync kernels, gett.tma.tile_box) ---------------------------------

def column_major(modes, ext, dtype="f16"):
    """A descriptor over ``modes`` with the first mode stride-1, as in TCCG."""
    shape = [ext[x] for x in modes]
    return D(tuple(shape), tuple(int(s) for s in np.cumprod([1, *shape[:-1]])), dtype)


def box_contraction(subscripts, ext, cfg, dtype="f16", **kw):
    """The plan of ``subscripts`` (einsum-like) over column-major tensors of extents ``ext``."""
    (ma, mb), md = subscripts.split("->")[0].split(","), subscripts.split("->")[1]
    return gett.plan_contraction(column_major(ma, ext, dtype), ma, column_major(mb, ext, dtype), mb,
                                 column_major(md, ext, dtype), md, config=cfg, **kw)


def box_plan(subscripts, ext, cfg, dtype="f16", arch="sm_90", **kw):
    """(the box-tiled plan, A's box view or None) for ``cfg`` on ``arch``."""
    tiled = tile_plan(box_contraction(subscripts, ext, cfg, dtype, **kw), cfg)
    return tiled, tile_box(tiled, cfg, operand_layouts(tiled, cfg)[0], arch)


MMA_256 = KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32)
MMA_576 = KernelConfig("mma16", 576, 32, 32, 3, wm=32, wn=32)
# (subscripts, extents, configuration, box row bytes): the TCCG shapes the heuristic boxes, and plain
# M-major tiles whose rows are two whole modes (box rows of 16 to 128 bytes, so every swizzle)
BOX_CASES = [
    ("efbad,cf->abcde", {"a": 48, "b": 5, "c": 24, "d": 7, "e": 32, "f": 32}, MMA_256, 32),     # TCCG #6: 16 x 16 boxes
    # TCCG #7: K after two M modes; 8 x 32 boxes, D's whole a (tiling.box_sides, whole_output)
    ("ecbfa,fd->abcde", {"a": 32, "b": 3, "c": 4, "d": 24, "e": 48, "f": 40}, MMA_256, 16),
    ("dbea,ec->abcd", {"a": 48, "b": 3, "c": 21, "d": 24, "e": 200}, MMA_576, 48),           # TCCG #3: 24 x 24, K in 7 tiles
    ("aebfc,efd->abcd", {"a": 8, "b": 32, "c": 5, "d": 24, "e": 32, "f": 3}, MMA_256, 16),    # K of two modes
    ("aebfc,efd->abcd", {"a": 32, "b": 8, "c": 5, "d": 24, "e": 32, "f": 3}, MMA_256, 64),
    ("aebfc,efd->abcd", {"a": 64, "b": 4, "c": 5, "d": 24, "e": 32, "f": 3}, MMA_256, 128),
]


def emulate_box_load(view, tiled, m0, k0):
    """The stage the TMA writes for the tile at row m0, depth k0, as this module describes the box:
    values are A's element offsets + 1 (0 where the box runs past A), at their swizzled positions."""
    item = {"f16": 2, "bf16": 2}[view.dtype]
    strides = (1,) + tuple(s // item for s in view.byte_strides)

    def coordinate(table, per_dim, x):
        digits = [x // dv % e for dv, e in zip(table.divisors, table.extents)]
        return [sum(dg * s for dg, s in zip(digits, dim)) for dim in per_dim]
    start = [r + k for r, k in zip(coordinate(tiled.tables["M"], view.row_coordinates, m0),
                                   coordinate(tiled.tables["K"], view.k_coordinates, k0))]
    stage = np.zeros(int(np.prod(view.box)), np.int64)
    for pos, idx in enumerate(np.ndindex(*view.box[::-1])):
        c = [s + i for s, i in zip(start, idx[::-1])]
        if all(x < e for x, e in zip(c, view.extents)):
            stage[_swizzled(pos, view)] = 1 + sum(x * s for x, s in zip(c, strides))
    return stage


def _swizzled(pos, view):
    """kernels/tma.cuh, TmaBoxLoader::smem_index's swizzle of an element position."""
    b = pos * 2
    row = view.box[0] * 2
    if row in (32, 64, 128):
        b ^= (b >> 3) & (row - 16)
    return b // 2


@pytest.mark.parametrize("subscripts,ext,cfg,row_bytes", BOX_CASES, ids=[c[0] + str(c[3]) for c in BOX_CASES])
def test_a_box_stage_holds_the_tile_the_index_tables_name(subscripts, ext, cfg, row_bytes):
    """Emulating the TMA on the view (coordinates of the tile from the M and K tables, the box innermost
    dimension first, the swizzle), row r at depth k of the stage, at r % B0 + B0 (k + BK (r / B0)),
    is A's element at the tables' offsets for row m0 + r, depth k0 + k; zeros past K's end. First,
    middle and last tiles, every K tile of the first."""
    tiled, view = box_plan(subscripts, ext, cfg)
    assert view is not None and view.box[0] * 2 == row_bytes
    assert view.swizzle == {32: 1, 64: 2, 128: 3}.get(row_bytes, 0)
    m_tiles, k_tiles = tiled.m // cfg.bm, -(-tiled.k // cfg.bk)
    b0 = view.box[0]
    r, k = np.meshgrid(np.arange(cfg.bm), np.arange(cfg.bk), indexing="ij")
    where = np.vectorize(lambda p: _swizzled(p, view))(r % b0 + b0 * (k + cfg.bk * (r // b0)))
    for mt, kt in {(0, 0), (m_tiles // 2, 0), (m_tiles - 1, k_tiles - 1)} | {(0, t) for t in range(k_tiles)}:
        m0, k0 = mt * cfg.bm, kt * cfg.bk
        stage = emulate_box_load(view, tiled, m0, k0)
        rows = tiled.tables["M"].offsets("A", m0 + np.arange(cfg.bm))
        ks = np.arange(k0, k0 + cfg.bk)
        depth = tiled.tables["K"].offsets("A", np.minimum(ks, tiled.k - 1))
        expect = np.where(ks[None, :] < tiled.k, 1 + rows[:, None] + depth[None, :], 0)
        np.testing.assert_array_equal(stage[where], expect, err_msg=f"tile m0={m0} k0={k0}")


def test_tccg_6_loads_its_a_tile_as_a_5d_box():
    """TCCG #6 ``abcde-efbad-cf``: A[e,f,b,a,d] and D[a,b,c,d,e] want different M modes innermost, so M's
    tile is 16 of e by 16 of a. The box: e (16, A's stride-1 mode), f (the K tile), a (16), then b and d
    one at a time; the tile's coordinates come from e/16, a/16, b and d of the M table."""
    tiled, view = box_plan(*BOX_CASES[0][:3])
    assert view.extents == (32, 32, 48, 5, 7) and view.box == (16, 32, 16, 1, 1)
    assert view.byte_strides == (2 * 32, 2 * 32 * 32 * 5, 2 * 32 * 32, 2 * 32 * 32 * 5 * 48)
    m = tiled.tables["M"]
    assert [x[:1] for x in m.modes] == [("e",), ("a",), ("e",), ("b",), ("d",), ("a",)]
    assert view.row_coordinates == ((0, 0, 16, 0, 0, 0), (0,) * 6, (0, 0, 0, 0, 0, 16), (0, 0, 0, 1, 0, 0),
                                    (0, 0, 0, 0, 1, 0))
    assert view.k_coordinates == ((0,), (1,), (0,), (0,), (0,))


@pytest.mark.parametrize("change,why", [
    ({"arch": "sm_80"}, "no TMA before sm_90"),
    ({"subscripts": "bda,dc->abc", "ext": {"a": 40, "b": 40, "c": 24, "d": 64}}, "256 rows of 8 x 8 boxes: not one box"),
    ({"cfg": KernelConfig("simt", 256, 32, 8, 3, tm=8, tn=4)}, "SIMT math reads its own layout"),
    ({"subscripts": "befa,cf->abce"}, "A K-major: the M tile's rows are not A's stride-1 mode"),
    ({"dtype": "f32"}, "32-bit data"),
    ({"op_a": lambda x: 2 * x}, "an op on A outside CTAs over several tiles: its pass took fused #6 to 101 registers"),
])
def test_a_tiles_that_are_not_a_box_load_as_before(change, why):
    change = dict(change)
    subscripts, ext = change.pop("subscripts", BOX_CASES[0][0]), change.pop("ext", BOX_CASES[0][1])
    assert box_plan(subscripts, ext, change.pop("cfg", MMA_256), **change)[1] is None, why


def test_the_box_kernel_takes_one_tensor_map_and_compiles_for_sm_90():
    """The kernel of a box tile takes A's map only (B copies by cp.async), declares one barrier a stage
    after its tiles, and compiles (NVRTC) without spills; for sm_80 the same plan renders the old loader."""
    plan, _ = box_plan(*BOX_CASES[0][:3])
    src, smem, _, _ = render_kernel(plan, MMA_256, arch="sm_90")
    assert src.count("const __grid_constant__ gett::TensorMap") == 1 and "&map_a)" in src
    assert "gett::TmaBoxLoader<" in src and "gett::TileLoader<Problem::TB" in src
    # the epilogue tile (32 x 264 halves) and offsets (2 x 288 ints) outgrow the stage, then three barriers
    assert smem == 32 * 264 * 2 + 2 * 288 * 4 + 3 * 8
    old_src = render_kernel(plan, MMA_256, arch="sm_80")[0]
    assert "TensorMap" not in old_src and "TmaBoxLoader" not in old_src
    kernel = box_contraction(*BOX_CASES[0][:3], device_arch="sm_90").kernel("sm_90")
    assert isinstance(kernel.tma, tuple) and len(kernel.tma) == 1 and isinstance(kernel.tma[0], TmaBox)
    assert kernel.report.spill_stores == 0


def test_a_persistent_box_kernel_keeps_its_epilogue_apart_from_every_stage_and_compiles():
    """CTAs over several tiles (``persistent``): all three stages of A stay (the next tiles' loads), B's
    one K tile is copied once and stays, the epilogue tile and offsets follow them, then the barriers;
    NVRTC compiles it without spills."""
    cfg = KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32, persistent=True)
    plan, _ = box_plan(BOX_CASES[0][0], BOX_CASES[0][1], cfg)
    src, smem, _, _ = render_kernel(plan, cfg, arch="sm_90")
    assert "gett::TmaBoxLoader<" in src and ", true>;" in src.split("using Kernel = ")[1].split("\n")[0]
    a_stage, b_tile = 256 * 32 * 2, 32 * (32 + 8) * 2   # A's box (unpadded), B's tile (padded rows)
    assert smem == 3 * a_stage + b_tile + 32 * 264 * 2 + 2 * 288 * 4 + 3 * 8
    kernel = box_contraction(BOX_CASES[0][0], BOX_CASES[0][1], cfg, device_arch="sm_90").kernel("sm_90")
    assert kernel.config == cfg and kernel.shared_bytes == smem and kernel.report.spill_stores == 0


@pytest.mark.parametrize("change,why", [
    ({"subscripts": "bdal,dcl->abcl", "ext": {"a": 40, "b": 40, "c": 24, "d": 64, "l": 3}}, "the batch has 3"),
    ({"cfg": KernelConfig("mma16", 256, 16, 32, 3, wm=32, wn=16, persistent=True)}, "N = 24 takes more than one tile"),
])
def test_persistent_ctas_are_refused_where_a_cta_cannot_run_several_tiles(change, why):
    """Without a producer warpgroup, a CTA runs several tiles of one column (B's K tiles stay) and one
    batch; a configuration asking for more is refused with the reason."""
    change = dict(change)
    subscripts, ext = change.pop("subscripts", BOX_CASES[0][0]), change.pop("ext", BOX_CASES[0][1])
    cfg = change.pop("cfg", KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32, persistent=True))
    plan = tile_plan(box_contraction(subscripts, ext, cfg, **change), cfg)
    with pytest.raises(ValueError, match="persistent") as err:
        render_kernel(plan, cfg, arch="sm_90")
    assert why in str(err.value)


def test_ops_on_a_box_tile_are_applied_in_place_once_a_stage_lands():
    """An op on A keeps the box path: the loader applies it over the landed stage (its THREADS and K
    extent in the type); an op on B (copied by cp.async, transformed in place) keeps CTAs over several
    tiles; both compile without spills."""
    cfg = KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32, persistent=True)
    ops = {"op_a": lambda x: 2 * x, "op_b": lambda x: x if x > 0 else 0.01 * x}
    plan, view = box_plan(BOX_CASES[0][0], BOX_CASES[0][1], cfg, **ops)
    assert view is not None
    src = render_kernel(plan, cfg, arch="sm_90")[0]
    assert "gett::TmaBoxLoader<Problem::TA, float, OpA, " in src and src.split("using LoadA = ")[1].split(";")[0] \
        .endswith(", 3, 256, 32>")   # stages, threads, K
    kernel = box_contraction(BOX_CASES[0][0], BOX_CASES[0][1], cfg, device_arch="sm_90", **ops).kernel("sm_90")
    assert kernel.config == cfg and kernel.report.spill_stores == 0


def test_persistent_ctas_need_the_mma16_path_or_a_producer_without_split_k():
    with pytest.raises(ValueError, match="persistent"):
        KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32, split_k=2, persistent=True).validate()
    with pytest.raises(ValueError, match="persistent"):
        KernelConfig("wgmma", 128, 128, 64, 3, persistent=True).validate()
    with pytest.raises(ValueError, match="persistent"):
        KernelConfig("wgmma", 128, 128, 64, 3, ws=True, split_k=2, persistent=True).validate()
    KernelConfig("wgmma", 128, 160, 64, 4, ws=True, persistent=True).validate()
    assert KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32, persistent=True).key().endswith("_p")
    assert KernelConfig("wgmma", 128, 160, 64, 4, ws=True, persistent=True).key() == "wgmma_128x160x64_s4_g8_ws_p"


# --- a producer warpgroup over several tiles (ws, persistent) ----------------------------------------------
def test_tiles_of_a_few_hundred_columns_take_a_persistent_producer_with_the_fewest_column_tiles():
    """M or N in the hundreds (TCCG #15-18, f16 D): 128 rows, a producer over several tiles, the narrowest
    width of the fewest column tiles (an N-major B in 64-column atoms), 4 stages where they fit with the
    epilogue's own tile (3 for 256 columns, or for 160 with an f32 D). Not where A has an op (the producer
    would apply it alone), where K is split, or where the plan reads C (beta hint 1)."""
    def tile(m, n, k, b_modes, d_dtype="f16", **kw):
        cfg = default_config(gemm(m, n, k, b_modes=b_modes, d_dtype=d_dtype, **kw), "sm_90")
        return cfg.bm, cfg.bn, cfg.stages, cfg.ws, cfg.persistent, cfg.split_k, cfg.resident + "pp" * cfg.pingpong
    # B's tile for all of K resident where it fits with 5 stages of A, else 4 or 3 (N-major 192 x 320), not with an
    # f32 D's epilogue tile; A's where M has the fewer tiles, 128 wide with 5 stages of B; the math warpgroups
    # taking the tiles in turn where B's is 129-160 wide or A's resident
    assert tile(92352, 296, 312, "nk") == (128, 160, 5, True, True, 1, "bpp")
    assert tile(92352, 296, 312, "nk", d_dtype="f32") == (128, 160, 3, True, True, 1, "")
    assert tile(92352, 312, 296, "kn") == (128, 192, 3, True, True, 1, "b")
    assert tile(312, 92352, 296, "kn") == (128, 128, 5, True, True, 1, "app")
    assert tile(92352, 296, 312, "nk", op_a=gett.ops.relu) == (128, 128, 3, False, False, 1, "")
    assert tile(92352, 296, 312, "nk", beta=1.0) == (128, 128, 3, False, False, 1, "")   # C read: two CTAs an SM
    split = tile(312, 296, 92352, "nk")
    assert not split[4] and split[5] > 1 and not split[6]


def test_a_persistent_producer_keeps_its_epilogue_apart_and_compiles_without_spills():
    """The stages (5 of 128 x 64; B's 160 x 64 for each of K's 5 tiles, resident), then the epilogue tile
    (128 rows of 160 + 8 16-bit elements) and offsets, then two barriers a stage; the producer loads by TMA,
    the math warpgroups take the tiles in turn; NVRTC compiles it without spills. With an op on A that keeps 0
    the producer still loads by TMA (the math warpgroups apply it); with one that does not, it copies by
    cp.async (and applies the op once a stage lands)."""
    plan = gemm(92352, 296, 312, b_modes="nk", d_dtype="f16")
    cfg = default_config(plan, "sm_90")
    src, smem, threads, tma = render_kernel(tile_plan(plan, cfg), cfg, arch="sm_90")
    assert threads == 384 and tma is not None and cfg.resident == "b"
    assert src.split("using Kernel = ")[1].split(";")[0].endswith("true, true, true, gett::NoTmaStore, 'B', true>")
    assert smem == 5 * 128 * 64 * 2 + 5 * 160 * 64 * 2 + 128 * 168 * 2 + 2 * (128 + 160) * 4 + 2 * 5 * 8
    kernel = plan.kernel("sm_90")
    assert kernel.config == cfg and kernel.shared_bytes == smem and kernel.report.spill_stores == 0
    for op, tma in ((gett.ops.relu, True), (gett.ops.sigmoid, False)):
        with_op = gemm(92352, 296, 312, b_modes="nk", d_dtype="f16", op_a=op, config=cfg, device_arch="sm_90")
        assert (render_kernel(tile_plan(with_op, cfg), cfg, arch="sm_90")[3] is not None) == tma
    relu = gemm(92352, 296, 312, b_modes="nk", d_dtype="f16", op_a=gett.ops.relu, config=cfg, device_arch="sm_90")
    assert relu.kernel("sm_90").report.spill_stores == 0


def test_the_tuner_offers_a_persistent_producer_wherever_k_is_not_split():
    from gett.tuner import _wgmma_configs
    configs = _wgmma_configs(gemm(92352, 296, 312, b_modes="nk", d_dtype="f16"), "sm_90")
    persistent = [c for c in configs if c.persistent]
    assert {160, 192, 256} <= {c.bn for c in persistent} and all(c.ws and c.split_k == 1 for c in persistent)
    assert {c.persistent for c in configs} == {False, True}
    split = _wgmma_configs(gemm(312, 296, 92352, b_modes="nk", d_dtype="f16"), "sm_90")
    assert all(c.split_k == 1 and c.ws for c in split if c.persistent)


def test_a_box_map_is_encoded_with_its_rank_strides_box_and_swizzle(monkeypatch):
    seen = {}

    def fake(out, dtype, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, fill):
        seen.update(rank=rank, dims=list(dims), strides=list(strides), box=list(box), swizzle=swizzle,
                    elements=list(element_strides))
        return 0
    monkeypatch.setattr(tensor_map, "_encode_function", lambda: fake)
    _, view = box_plan(*BOX_CASES[0][:3])
    tensor_map.encode(view, 0x10000)
    assert seen == {"rank": 5, "dims": [32, 32, 48, 5, 7], "strides": [64, 10240, 2048, 491520],
                    "box": [16, 32, 16, 1, 1], "swizzle": 1, "elements": [1] * 5}


def tccg_f32(notation, cfg):
    """TCCG ``notation`` (tccg_suite, column-major) in f32 with beta hint 0, box-tiled for ``cfg``."""
    c = next(x for x in load_suite() if x.notation == notation)
    d = {t: D(c.shape(t), c.strides(t), "f32") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0,
                                 device_arch="sm_90")
    return tile_plan(plan, cfg)


SIMT_P = KernelConfig("simt", 128, 128, 24, 4, tm=8, tn=8, ws=True, persistent=True)
SIMT_P96 = KernelConfig("simt", 96, 128, 24, 3, tm=12, tn=4, ws=True, persistent=True)


def test_tccg_33_stores_its_d_tile_as_one_box():
    """#33 ``abcdef-degc-gfab``: D's stride-1 modes a·b (384) are N's first mode, d·e (384, stride 6144)
    M's: the 128 x 128 tile spans a third of each, so D's box is 128 x 128 of them (c and f one at a
    time), laid out a·b first; the tile's coordinates are its first row and column's digits."""
    view = store_box(tccg_f32("abcdef-degc-gfab", SIMT_P), SIMT_P)
    assert isinstance(view, TmaStoreBox) and view.dtype == "f32"
    assert view.extents == (384, 16, 384, 16) and view.box == (128, 1, 128, 1)
    assert view.byte_strides == (4 * 384, 4 * 6144, 4 * 2359296)
    assert view.m_positions == ((128, 128),) and view.n_positions == ((128, 1),)
    assert view.m_coordinates == ((0, 0), (0, 1), (1, 0), (0, 0))
    assert view.n_coordinates == ((1, 0), (0, 0), (0, 0), (0, 1))


def test_tccg_31_stores_a_box_of_ds_whole_stride_one_mode():
    """#31 ``abcdef-dega-gfbc`` in 96 rows: M's box tiling makes its rows a (24, D's stride-1 mode) by 4
    of d·e, the columns 128 of b·c: one box (24, 128, 4, 1) laid out a, b·c, d·e."""
    view = store_box(tccg_f32("abcdef-dega-gfbc", SIMT_P96), SIMT_P96)
    assert view.extents == (24, 256, 384, 16) and view.box == (24, 128, 4, 1)
    assert view.m_positions == ((24, 1), (4, 24 * 128)) and view.n_positions == ((128, 24),)


def test_lanes_along_m_store_tccg_40s_tile_as_one_box():
    """#40 ``abcdef-gdab-efgc``: M's first mode a·b (D's stride-1) and N's e·f 128 elements (512 bytes) into
    the box; lanes along N would store onto one bank (refused, below), lanes along M onto consecutive ones."""
    cfg = replace(SIMT_P, lanes_m=True)
    view = store_box(tccg_f32("abcdef-gdab-efgc", cfg), cfg)
    assert view.box == (128, 1, 1, 128) and view.m_positions == ((128, 1),) and view.n_positions == ((128, 128),)


def test_a_six_mode_d_stores_its_tile_as_one_box_of_five_dimensions():
    """#44 ``abcdef-geac-dfgb`` in 96 x 128 (lanes along M): D's six modes are more than a tensor map's five,
    but e (M, stride 147456) and f (N, 16 times that) lie outside the tile and f continues e, so they are
    one dimension of 256 whose coordinate is e's plus 16 times f's."""
    cfg = KernelConfig("simt", 96, 128, 24, 4, tm=6, tn=8, ws=True, persistent=True, lanes_m=True)
    view = store_box(tccg_f32("abcdef-geac-dfgb", cfg), cfg)
    assert view.extents == (24, 16, 16, 24, 256) and view.box == (24, 16, 4, 8, 1)
    assert view.byte_strides == (4 * 24, 4 * 384, 4 * 6144, 4 * 147456)
    assert view.m_coordinates[4] == (0, 0, 1) and view.n_coordinates[4] == (0, 0, 16)   # M: a c e, N: b d f


@pytest.mark.parametrize("notation,cfg,why", [
    ("abcdef-degb-gfac", SIMT_P, "N's first mode a (24) does not divide into 128 columns"),
    ("abcdef-gdab-efgc", SIMT_P, "N 512 bytes into the box: a warp's stores into the tile on one bank"),
    ("abcdef-degc-gfab", replace(SIMT_P, lanes_m=True), "lanes along M, M 512 bytes into the box: one bank"),
    ("abcdef-geac-dfgb", replace(SIMT_P, lanes_m=True), "N's first mode d (24) does not divide into 128 columns"),
    ("abcdef-degc-gfab", KernelConfig("simt", 128, 128, 24, 4, tm=8, tn=8, ws=True), "one tile a CTA"),
    ("abcdef-degc-gfab", KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32), "not the SIMT producer"),
])
def test_d_tiles_that_are_not_one_box_store_as_before(notation, cfg, why):
    assert store_box(tccg_f32(notation, cfg), cfg) is None, why


def test_the_d_box_kernel_takes_map_d_and_compiles_for_sm_90():
    """A SIMT producer kernel whose D tile is a box takes D's map alone (A and B copy by cp.async) and
    compiles (NVRTC; the translation unit checks its shared memory, the epilogue tile now 128-byte aligned
    after the stages, against the host's) without spills; beta != 0 keeps the walk, so C's layout needs no box."""
    plan = tccg_f32("abcdef-degc-gfab", SIMT_P)
    src, _, _, views_ = render_kernel(plan, SIMT_P, arch="sm_90")
    assert src.count("const __grid_constant__ gett::TensorMap") == 1 and "nullptr, nullptr, &map_d)" in src
    assert "using StoreD = gett::TmaStore<" in src and views_ == (store_box(plan, SIMT_P),)
    c = next(x for x in load_suite() if x.notation == "abcdef-degc-gfab")
    d = {t: D(c.shape(t), c.strides(t), "f32") for t in "ABC"}
    kernel = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0,
                                   config=SIMT_P, device_arch="sm_90").kernel("sm_90")
    assert [v.tensor for v in kernel.tma] == ["D"] and kernel.report.spill_stores == 0


WIDE_296 = KernelConfig("wgmma", 128, 296, 64, 4, split_k=22, ws=True)


def tccg_13(d=312, c=296, a=312, b=296, **kw):
    """TCCG #13's ``ab-acd-dbc`` (column-major): K = (d, c), which merge in neither A[a,c,d] nor B[d,b,c]."""
    return gett.plan_contraction(D((a, c, d), (1, a, a * c), "f16"), "acd", D((d, b, c), (1, d, d * b), "f16"), "dbc",
                                 D((a, b), (1, a), "f16"), "ab", device_arch="sm_90", **kw)


def test_a_wide_tile_loads_k_of_two_modes_as_3d_boxes_each_run_padded():
    """#13 under 128 x 296: the TMA loads K as its two modes, a third map dimension one position a box; K
    tiles run over d (312 = 4 tiles of 64 and one of 56, padded with zeros: 2.6% more tiles) for each c.
    A is M-major (boxes of 64 rows by 64 d), B K-major (64 d by 296 columns, past 256 in two boxes of 152)."""
    from gett.tma import k_run
    tiled = tile_plan(tccg_13(), WIDE_296)
    assert k_run(tiled, WIDE_296) == 312
    a, b = views(tccg_13(), WIDE_296)
    assert a == TmaOperand("A", "f16", False, (312, 312, 296), 312 * 296 * 2, (64, 64, 1), 312 * 2)
    assert b == TmaOperand("B", "f16", True, (312, 296, 296), 312 * 2, (64, 152, 1), 312 * 296 * 2)
    assert a.byte_strides == (312 * 296 * 2, 312 * 2)
    src = render_kernel(tiled, WIDE_296, arch="sm_90")[0]
    assert "K_RUN = 312;" in src and ", false, 224>" in src   # wgmma issued as 224 + 72 columns


@pytest.mark.parametrize("change,why", [
    ({"cfg": KernelConfig("wgmma", 128, 160, 64, 4, split_k=22, ws=True)},
     "not a wide tile: cp.async (#13 ran 78 us through the TMA, 72 by cp.async)"),
    ({"d": 100}, "d = 100 in 2 tiles of 64: 28% padding"),
    ({"d": 128}, "d = 128: no padding, yet K loads as two modes"),
])
def test_k_runs_only_for_wide_tiles_and_little_padding(change, why):
    from gett.tma import k_run
    change = dict(change)
    cfg = change.pop("cfg", WIDE_296)
    plan = tile_plan(tccg_13(**change), cfg)
    assert k_run(plan, cfg) == (128 if change.get("d") == 128 else 0), why


def test_k_of_one_merged_mode_loads_as_before():
    """A plain GEMM (K one mode): the wide tile's views stay 2-D, K_RUN 0."""
    plan = gemm(312, 296, 20000, b_modes="nk", config=WIDE_296)
    a, b = views(plan, WIDE_296)
    assert len(a.extents) == len(b.extents) == 2 and b.box == (64, 152)
    assert "K_RUN = 0;" in render_kernel(tile_plan(plan, WIDE_296), WIDE_296, arch="sm_90")[0]


TURN_160 = KernelConfig("wgmma", 128, 160, 64, 5, ws=True, persistent=True, resident="b", pingpong=True)


def tccg_18(a=312, c=296, d=312, b=296, **kw):
    """TCCG #18's ``abc-adc-db`` (column-major): M = (a, c), which do not merge in A[a,d,c] (d between)."""
    return gett.plan_contraction(D((a, d, c), (1, a, a * d), "f16"), "adc", D((d, b), (1, d), "f16"), "db",
                                 D((a, b, c), (1, a, a * b), "f16"), "abc", device_arch="sm_90", **kw)


def test_rows_of_two_modes_load_as_3d_boxes_that_stop_at_the_end_of_each_run():
    """#18 in 128-row tiles: A's rows are a (312, stride 1) then c (d between), so a tile of 128 consecutive
    rows would cross from one c into the next inside a 64-row box; through the TMA each run of a is padded to
    320 rows (2.6% more), so every box lies inside one c: 320 x 296 / 128 = 740 row tiles. A's view is
    (a, d, c) with c the third dimension; B stays a 2-D K-major view."""
    from gett.config import row_tiles
    from gett.tma import m_run
    plan = tile_plan(tccg_18(), TURN_160)
    assert m_run(plan, TURN_160) == 312 and row_tiles(plan, TURN_160) == 740
    a, b = views(tccg_18(), TURN_160)
    assert a == TmaOperand("A", "f16", False, (312, 312, 296), 312 * 2, (64, 64, 1), 0, 312 * 312 * 2)
    assert a.byte_strides == (312 * 2, 312 * 312 * 2)
    assert b == TmaOperand("B", "f16", True, (312, 296), 312 * 2, (64, 160))
    src = render_kernel(plan, TURN_160, arch="sm_90")[0]
    assert "M_RUN = 312;" in src and "K_RUN = 0;" in src and "TILES_M <= 740" in src


@pytest.mark.parametrize("change,why", [
    ({"a": 100}, "a = 100 in 2 boxes of 64: 28% padding, so cp.async as before"),
    ({"cfg": replace(TURN_160, persistent=False, resident="", pingpong=False, split_k=2)}, "split K"),
    ({"cfg": KernelConfig("wgmma", 128, 160, 64, 4)}, "no producer warpgroup"),
    ({"cfg": KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=64)}, "not wgmma"),
    ({"c_first": True}, "M's modes merge in A (a, c, d): one 2-D view"),
])
def test_row_runs_only_where_m_does_not_merge_and_padding_is_small(change, why):
    from gett.config import row_tiles
    from gett.tma import m_run
    change = dict(change)
    cfg = change.pop("cfg", TURN_160)
    if change.pop("c_first", False):   # #15's A[a,c,d]
        plan = gett.plan_contraction(D((312, 296, 312), (1, 312, 312 * 296), "f16"), "acd",
                                     D((312, 296), (1, 312), "f16"), "db",
                                     D((312, 296, 296), (1, 312, 312 * 296), "f16"), "abc", device_arch="sm_90")
    else:
        plan = tccg_18(**change)
    plan = tile_plan(plan, cfg)
    assert m_run(plan, cfg) == 0, why
    assert row_tiles(plan, cfg) == -(-plan.m // cfg.bm)


def test_a_row_run_kernel_compiles_without_spills_in_the_shared_memory_it_declares():
    """#18's database configuration (128 x 160 s5, B resident, tiles in turn) with A's rows in runs: a TMA
    producer now (40 registers, the math warpgroups 168), no spills under NVRTC, and the host's shared bytes."""
    plan = tccg_18(config=TURN_160)
    kernel = plan.kernel("sm_90")
    assert kernel.config == TURN_160 and kernel.tma[0].row_outer_stride == 312 * 312 * 2
    assert kernel.report.spill_stores == 0 and kernel.report.spill_loads == 0


def test_a_wide_tile_needs_a_tma_producer_and_a_k_major_b():
    """128 x 296: more than 128 accumulators a thread, taken from a TMA producer's registers; B's tile is
    issued as 224 + 72 columns, parts an N-major B's 64-column atoms don't allow."""
    assert WIDE_296.shares_registers and not KernelConfig("wgmma", 128, 256, 64, 4, ws=True).shares_registers
    for bad in (replace(WIDE_296, ws=False), replace(WIDE_296, bm=64), replace(WIDE_296, bn=304)):
        with pytest.raises(ValueError, match="wgmma tile"):
            bad.validate()
    with pytest.raises(ValueError, match="must load by TMA"):
        render_kernel(tile_plan(gapped_gemm(296, 20000), WIDE_296), WIDE_296)
    with pytest.raises(ValueError, match="needs B K-major"):
        render_kernel(tile_plan(gemm(312, 296, 20000, b_modes="kn"), WIDE_296), WIDE_296)
    from gett.tuner import _fits   # over several tiles, its epilogue tile next to 3 stages: 247 KB
    assert not _fits(gemm(3200, 296, 320, b_modes="nk"), "sm_90", replace(WIDE_296, split_k=1, persistent=True))


def test_a_wide_k_run_kernel_compiles_without_spills_in_the_shared_memory_it_declares():
    """#13 as 128 x 296 s4 k22: B's stage holds 304 rows (two TMA boxes of 152), the kernel's
    static_assert checks the host's shared-memory size; the math warpgroups get 232 registers, so NVRTC
    compiles them without spills."""
    plan = tccg_13(config=WIDE_296)
    src, smem, threads, _ = render_kernel(tile_plan(plan, WIDE_296), WIDE_296, arch="sm_90")
    assert threads == 384 and smem == 4 * (128 * 64 + 304 * 64) * 2 + 2 * 4 * 8
    kernel = plan.kernel("sm_90")
    assert kernel.config == WIDE_296 and kernel.report.spill_stores == 0 and kernel.shared_bytes == smem


def test_ops_on_a_turn_a_wide_tile_into_the_producer_width():
    """A database entry of 128 x 296 (loaded by TMA) borrowed by a plan with an op on A: 128 x 160, as
    _producer_tile would take for N = 296, then the usual split-K adaptation (no producer, 3 stages)."""
    from gett.config import for_load_ops
    plan = gemm(312, 296, 92352, b_modes="nk", op_a=gett.ops.sigmoid)
    cfg = for_load_ops(plan, WIDE_296)
    assert (cfg.bm, cfg.bn, cfg.ws, cfg.stages) == (128, 160, False, 3)
    cfg.validate()


def test_ops_that_keep_zero_keep_a_tma_producer_entry():
    """The same entry borrowed by a plan whose ops keep 0 (ReLU): the TMA still loads both operands, so
    the producer tile stands, its math threads applying the ops, K split over every SM (H100, leaky ReLU
    on A, B and C, #13: 72 us as 128 x 296 s4 k44, 119.6 at the entry's k22, 93 as 128 x 160 s3 k44
    without a producer; see config.for_load_ops)."""
    from gett.config import for_load_ops, split_k_for
    plan = gemm(312, 296, 92352, b_modes="nk", op_a=gett.ops.relu, op_b=gett.ops.relu)
    cfg = for_load_ops(plan, WIDE_296)
    assert cfg == replace(WIDE_296, split_k=split_k_for(plan, replace(WIDE_296, split_k=1))) and cfg.split_k == 44


@pytest.mark.parametrize("entry,tile", [(KernelConfig("wgmma", 64, 80, 64, 8, ws=True), (128, 80)),
                                        (KernelConfig("wgmma", 64, 160, 64, 8, split_k=13, ws=True), (128, 160))])
def test_ops_on_a_turn_a_64_row_producer_tile_into_128_rows(entry, tile):
    """A database entry of 64 rows with a producer, K unsplit (TCCG #19's) or split (#14's), borrowed by a
    plan with an op on A: its one math warpgroup would apply the op alone, so 128 rows of its width, 3
    stages, split by split_k_for. H100, fused #19 (session 61): 64 x 80 s8 68.3 us, 128 x 80 s3 k6 36.2."""
    from gett.config import for_load_ops, split_k_for
    plan = gemm(5184, 72, 5184, a_modes="km", b_modes="nk", d_dtype="f16", op_a=gett.ops.sigmoid)
    cfg = for_load_ops(plan, entry)
    assert (cfg.bm, cfg.bn, cfg.ws, cfg.stages) == (*tile, False, 3)
    assert cfg.split_k == split_k_for(plan, replace(cfg, split_k=1)) > 1
    cfg.validate()


def test_a_tuned_entry_this_plan_cannot_take_falls_back_to_the_heuristic(monkeypatch):
    """A near-identical shape's entry whose tile this plan's layouts refuse (128 x 296 with an N-major
    B): a warning, then the heuristic's kernel, not an error."""
    import gett.plan_db
    from gett.kernel import kernel_source
    plan = gemm(312, 296, 20000, b_modes="kn", device_arch="sm_90")
    monkeypatch.setattr(gett.plan_db, "lookup", lambda p, arch, exact=False, model=None: WIDE_296)
    with pytest.warns(UserWarning, match="does not apply"):
        ks = kernel_source(plan, "sm_90")
    assert ks.config == default_config(plan, "sm_90")
