"""Box tiling rewrites a plan's M, N and K tables into a permutation of the same index space: checked
by running the reference executor on tiled plans against numpy.einsum, and on the tables directly."""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import gett
from cases import build_host_arrays, contractions, oracle
from gett.config import KernelConfig
from gett.layout import IndexTable
from gett.reference import execute_reference
from gett.tiling import box_sides, split_box, tile_plan


def test_split_box_makes_boxes_of_both_stride_one_modes():
    # TCCG #1 M group: b (A's stride-1 mode) then a (D's), 312 each
    t = IndexTable("M", (("b",), ("a",)), (312, 312), (("A", (1, 97344)), ("D", (312, 1))))
    box = split_box(t, "A", "D", 128, 8)
    assert box.extents == (8, 8, 39, 39)
    assert box.strides_of("A") == (1, 97344, 8, 778752)
    assert box.strides_of("D") == (312, 1, 2496, 8)
    # same multiset of (A offset, D offset) pairs: a permutation of the index space
    pairs = lambda tab: sorted(zip(tab.offsets("A").tolist(), tab.offsets("D").tolist()))
    assert pairs(box) == pairs(t)


def test_box_sides_square_up_until_the_second_side_has_16_elements():
    """A tile's box is made squarer while its first side is over twice the second, until the second
    reaches 16 elements with the first still whole vectors (8 f16): TCCG #6's two modes of 48 in 768 rows
    keep A's whole mode (48 x 16, where squaring on gave 24 x 16), in 256 rows get 16 x 16; #3's modes of
    72 in 576 rows still get 24 x 24 (36 x 8 on the way has a second side under 16)."""
    assert box_sides(48, 48, 768, 8, keep_first=False) == (48, 16)
    assert box_sides(48, 48, 256, 8, keep_first=False) == (16, 16)
    assert box_sides(72, 72, 576, 8, keep_first=False) == (24, 24)
    assert box_sides(48, 48, 384, 8, keep_first=False) == (24, 16)
    assert box_sides(48, 48, 384, 8, keep_first=True) == (48, 8)   # the output's runs first


def test_strict_box_sides_stop_at_a_squaring_step_that_leaves_the_second_side_as_it_was():
    """TCCG #1's modes of 312 = 8 · 39 in 384 rows: halving the first side (24 -> 12) leaves the second at
    8, so strict squaring (the SIMT tiles) keeps 24 x 8; a step that lengthens it (#6's 48 x 8 -> 24 x 16)
    is still taken."""
    assert box_sides(312, 312, 384, 4, keep_first=False) == (12, 8)
    assert box_sides(312, 312, 384, 4, keep_first=False, strict=True) == (24, 8)
    assert box_sides(48, 48, 384, 4, keep_first=False, strict=True) == (24, 16)
    assert box_sides(72, 72, 576, 4, keep_first=False, strict=True) == (72, 8)


def test_simt_tiles_box_strictly_and_mma_tiles_do_not():
    """TCCG #1 ``abc-bda-dc`` (column-major, 312 x 312 x 312 A) in 384 rows: the SIMT tile's M box is
    24 x 8 (A's runs of 24), the mma.sync tile's 12 x 8, as measured best for each (tiling.tile_plan)."""
    n = 312
    col_major = lambda shape: tuple(int(np.prod(shape[:i])) for i in range(len(shape)))
    desc = lambda shape, dtype: gett.TensorDescriptor(shape, col_major(shape), dtype)
    for dtype, cfg, box in (("float32", KernelConfig("simt", 384, 24, 8, 4, tm=12, tn=3), (24, 8)),
                            ("float16", KernelConfig("mma16", 384, 32, 32, 3, wm=32, wn=32), (12, 8))):
        plan = gett.plan_contraction(desc((n, n, n), dtype), "bda", desc((n, 24), dtype), "dc",
                                     desc((n, n, 24), dtype), "abc")
        assert tile_plan(plan, cfg).tables["M"].extents[:2] == box


def test_split_box_leaves_agreeing_or_unsplittable_groups_alone():
    same = IndexTable("M", (("a",), ("b",)), (16, 16), (("A", (1, 16)), ("D", (1, 16))))
    assert split_box(same, "A", "D", 128, 8) is same
    odd = IndexTable("M", (("a",), ("b",)), (16, 7), (("A", (1, 7 * 16)), ("D", (16 * 7, 1))))
    assert split_box(odd, "A", "D", 128, 8) is odd   # 7 has no factor 2: no box


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=contractions(dtypes=("f64",)), seed=st.integers(0, 2**32 - 1),
       tiles=st.tuples(st.sampled_from((16, 32, 64, 128)), st.sampled_from((16, 32, 64, 128)),
                       st.sampled_from((8, 16, 32, 64))))
def test_tiled_plans_compute_the_same_contraction(case, seed, tiles):
    arrays = build_host_arrays(case, np.random.default_rng(seed))
    A, B, C = (arrays[t][0] for t in "ABC")
    D = np.full(C.shape, np.nan)
    plan = gett.plan_contraction(A, case.modes_A, B, case.modes_B, C, case.modes_C, D=D,
                                 broadcast=case.broadcast)
    bm, bn, bk = tiles
    tiled = tile_plan(plan, KernelConfig("simt", bm, bn, bk, 2, tm=1, tn=1))
    for g in "MNK":
        assert tiled.tables[g].size == plan.tables[g].size
    if not plan.is_empty:
        execute_reference(tiled, case.alpha, A, B, case.beta, C, D)
        expect = oracle(case, A, B, C)
        np.testing.assert_allclose(D, expect, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(expect).max(initial=0)))


def test_tccg_conflicting_modes_get_boxes():
    D = gett.TensorDescriptor
    col = lambda shape: tuple(int(np.prod(shape[:i])) for i in range(len(shape)))
    # #28 abcd-eafb-fdec: A wants e innermost in K, B wants f
    shapes = {"A": (72,) * 4, "B": (72,) * 4, "C": (72,) * 4}
    plan = gett.plan_contraction(D(shapes["A"], col(shapes["A"]), "f16"), "eafb",
                                 D(shapes["B"], col(shapes["B"]), "f16"), "fdec",
                                 D(shapes["C"], col(shapes["C"]), "f16"), "abcd")
    tiled = tile_plan(plan, KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32))
    k = tiled.tables["K"]
    assert k.strides_of("A")[0] == 1 and k.strides_of("B")[1] == 1
    assert k.extents[0] * k.extents[1] == 32
