"""TMA loads without a GPU: which operands the TMA can load and as what 2-D view (gett.tma), the kernels
that take tensor maps (rendered and compiled by NVRTC for sm_90a), the launcher's map cache, and the
heuristic's wide tile for the GEMM-like plans that use them."""
import pytest

import gett
from gett import tensor_map
from gett.codegen import operand_layouts, render_kernel
from gett.config import KernelConfig, default_config
from gett.errors import DeviceError
from gett.layout import IndexTable
from gett.tiling import tile_plan
from gett.tma import TmaOperand, merged_mode, tma_operands

D = gett.TensorDescriptor
WIDE = KernelConfig("wgmma", 128, 256, 64, 4, ws=True)


def gemm(m, n, k, a_modes="mk", b_modes="kn", dtype="f16", batch=0, **kw):
    """A plan of D[m,n] = A·B with A and B laid out row-major in the order of their mode strings."""
    ext = {"m": m, "n": n, "k": k, "l": batch}
    a_modes, b_modes, d_modes = a_modes + "l" * bool(batch), b_modes + "l" * bool(batch), "mn" + "l" * bool(batch)
    a, b = (D(tuple(ext[c] for c in s), None, dtype) for s in (a_modes, b_modes))
    return gett.plan_contraction(a, a_modes, b, b_modes, D(tuple(ext[c] for c in d_modes), None, "f32"), d_modes,
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
    ({"op_a": lambda x: 2 * x}, "an op on A: the producer would have to transform it"),
    ({"batch": 3}, "a batch: one 2-D map per operand"),
])
def test_operands_the_tma_cannot_load(case, why):
    case = dict(case)
    cfg = case.pop("cfg", WIDE)
    assert views(gemm(1024, 1024, 1024, config=cfg, **case), cfg) is None, why


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
    with pytest.raises(DeviceError, match="B: a TMA load needs a 16-byte aligned address"):
        tensor_map.encode(view, 0x1008)


def test_the_launcher_encodes_a_map_once_per_address_pair(monkeypatch):
    calls = []
    monkeypatch.setattr(tensor_map, "encode", lambda view, address: calls.append((view.tensor, address)) or address)
    maps = tensor_map.TensorMaps(views(gemm(1024, 1024, 1024)), by_value=lambda x: ("arg", x))
    assert maps(0x1000, 0x2000) == (("arg", 0x1000), ("arg", 0x2000))
    assert maps(0x1000, 0x2000) == (("arg", 0x1000), ("arg", 0x2000))
    assert calls == [("A", 0x1000), ("B", 0x2000)]
    for i in range(tensor_map.TensorMaps.LIMIT):   # past the limit the oldest pair goes first
        maps(0x10000 * (i + 1), 0x2000)
    calls.clear()
    maps(0x1000, 0x2000)
    assert calls == [("A", 0x1000), ("B", 0x2000)]


def test_wide_tiles_narrow_to_240_columns_where_b_is_k_major_and_no_wave_is_added():
    """TCCG #12 (5136 x 5120 x 5136, B K-major): 41 x 22 tiles of 240 columns take the 7 waves of 132 SMs
    that 41 x 20 of 256 take, each tile with 1/16 less work; an N-major B keeps 256 (whole 64-column
    swizzle atoms). Both rasterise 16 row tiles a group."""
    k_major = default_config(gemm(5136, 5120, 5136, b_modes="nk"), "sm_90")
    assert (k_major.bm, k_major.bn, k_major.group_m, k_major.ws) == (128, 240, 16, True)
    n_major = default_config(gemm(5136, 5120, 5136, b_modes="kn"), "sm_90")
    assert (n_major.bn, n_major.group_m) == (256, 16)
    one_more_wave = default_config(gemm(128 * 33, 1024, 4096, b_modes="nk"), "sm_90")   # 132 tiles of 256, 165 of 240
    assert one_more_wave.bn == 256
