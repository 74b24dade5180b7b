"""CPU tests of the planner: mode classification, merging, ordering, index tables, offset width, the plan
cache, the plan's repr, dtype resolution, and the reference executor on hand-picked cases.

Oracles are hand computations and numpy.einsum in float64 (or Python integers), never gett itself."""
import numpy as np
import pytest

import gett
from gett.dtypes import F16, F32, F64, resolve_compute_type
from gett.layout import IndexTable, coalesce


def f64(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def desc(shape, strides=None, dtype="f32"):
    return gett.TensorDescriptor(shape, strides, dtype)


def flat_modes(table):
    """The table's merged modes, each as a tuple of labels."""
    return tuple(tuple(m) for m in table.modes)


# ---------------------------------------------------------------------------------------------------------
# Mode classification
# ---------------------------------------------------------------------------------------------------------

def test_classification_mnkl():
    """Every mode lands in the group DESIGN.md gives it: M (A,C), N (B,C), K (A,B), L (A,B,C)."""
    A, B, C = desc((2, 3, 5)), desc((5, 4, 2)), desc((2, 3, 4))
    plan = gett.plan_contraction(A, "lmk", B, "knl", C, "lmn")
    assert plan.analysis.group_of == {"l": "L", "m": "M", "k": "K", "n": "N"}
    assert (plan.m, plan.n, plan.k, plan.batch) == (3, 4, 5, 2)
    assert plan.analysis.summed_single == () and plan.analysis.broadcast == ()
    assert plan.flops == 2 * 3 * 4 * 5 * 2


def test_mode_summed_in_one_input_is_k_with_zero_stride_in_the_other():
    """A mode in A only (and one in B only) is summed: a K mode with stride 0 in the other input."""
    A, B, C = desc((3, 4, 5)), desc((4, 6, 7)), desc((3, 6))
    plan = gett.plan_contraction(A, "aks", B, "knt", C, "an")
    assert plan.analysis.group_of["s"] == "K" and plan.analysis.group_of["t"] == "K"
    assert set(plan.analysis.summed_single) == {"s", "t"}
    K = plan.tables["K"]
    assert K.size == 4 * 5 * 7
    pos = {m: i for i, ms in enumerate(K.modes) for m in ms}
    assert K.modes[pos["s"]] == ("s",) and K.modes[pos["t"]] == ("t",)
    assert K.strides_of("B")[pos["s"]] == 0 and K.strides_of("A")[pos["s"]] == 1
    assert K.strides_of("A")[pos["t"]] == 0 and K.strides_of("B")[pos["t"]] == 1


def test_summed_in_one_input_reference_matches_einsum():
    """A mode summed in one input only sums that input over it before the product (einsum semantics)."""
    A, B, C = f64((3, 4, 5), 1), f64((4, 6, 2), 2), np.zeros((3, 6))
    plan = gett.plan_contraction(A, "aks", B, "knt", C, "an")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    np.testing.assert_allclose(C, np.einsum("aks,knt->an", A, B), rtol=1e-12)


def test_broadcast_mode_is_m_with_zero_input_strides():
    """A declared broadcast mode (C only) is an M mode with stride 0 in A; D is replicated along it."""
    A, B = f64((3, 4), 1), f64((4, 5), 2)
    C = np.zeros((3, 5, 6))
    plan = gett.plan_contraction(A, "ak", B, "kn", C, "anz", broadcast=["z"])
    assert plan.analysis.group_of["z"] == "M" and plan.analysis.broadcast == ("z",)
    M = plan.tables["M"]
    pos = {m: i for i, ms in enumerate(M.modes) for m in ms}
    assert M.modes[pos["z"]] == ("z",)
    assert M.strides_of("A")[pos["z"]] == 0 and M.strides_of("C")[pos["z"]] == 1
    assert plan.m == 3 * 6
    gett.contract(plan, 1.0, A, B, 0.0, C)
    expect = np.einsum("ak,kn->an", A, B)[:, :, None] * np.ones(6)
    np.testing.assert_allclose(C, expect, rtol=1e-12)


def test_extent_one_modes_are_dropped_from_tables():
    """Modes of extent 1 are classified but take no part in the tables (of any group)."""
    A, B, C = desc((3, 1, 4, 1)), desc((4, 1, 1, 5)), desc((1, 3, 5, 1))
    plan = gett.plan_contraction(A, "apkq", B, "kprn", C, "panq")
    assert plan.analysis.group_of["p"] == "L" and plan.analysis.group_of["q"] == "M"
    assert plan.analysis.group_of["r"] == "K" and "r" in plan.analysis.summed_single
    labels = {m for g in "MNKL" for ms in plan.tables[g].modes for m in ms}
    assert labels == {"a", "k", "n"}
    assert plan.tables["L"].modes == () and plan.tables["L"].size == 1


def test_extent_one_modes_reference_matches_einsum():
    """Extent-1 modes (L, M and one-input K) don't disturb the result."""
    A, B, C = f64((3, 1, 4, 1), 1), f64((4, 1, 1, 5), 2), f64((1, 3, 5, 1), 3)
    D = np.full(C.shape, np.nan)
    plan = gett.plan_contraction(A, "apkq", B, "kprn", C, "panq", D=D)
    gett.contract(plan, 1.5, A, B, -0.5, C, D)
    np.testing.assert_allclose(D, 1.5 * np.einsum("apkq,kprn->panq", A, B) - 0.5 * C, rtol=1e-12)


def test_int_mode_labels():
    """Modes may be ints (as a sequence); they classify like characters."""
    A, B, C = desc((2, 3)), desc((3, 4)), desc((2, 4))
    plan = gett.plan_contraction(A, [10, 20], B, [20, 30], C, [10, 30])
    assert plan.analysis.group_of == {10: "M", 20: "K", 30: "N"}


# ---------------------------------------------------------------------------------------------------------
# Mode merging
# ---------------------------------------------------------------------------------------------------------

def test_coalesce_merges_contiguous_neighbours():
    """coalesce merges j into i when stride[j] == stride[i]*extent[i] in every tensor."""
    modes, ext, st = coalesce((("i",), ("j",), ("h",)), (3, 4, 5),
                              {"A": (1, 3, 12), "B": (4, 12, 48), "Z": (0, 0, 0)})
    assert modes == (("i", "j", "h"),) and ext == (60,)
    assert st == {"A": (1,), "B": (4,), "Z": (0,)}


def test_coalesce_stops_where_one_tensor_is_not_contiguous():
    """One tensor with a gap (or another order) keeps the modes apart; the others don't force a merge."""
    modes, ext, st = coalesce((("i",), ("j",), ("h",)), (3, 4, 5),
                              {"A": (1, 3, 12), "B": (1, 4, 16)})   # B: gap between i and j
    assert modes == (("i",), ("j", "h")) and ext == (3, 20)
    assert st == {"A": (1, 3), "B": (1, 4)}
    # a gap in B between j and h as well: nothing merges
    modes, _, _ = coalesce((("i",), ("j",), ("h",)), (3, 4, 5), {"A": (1, 3, 12), "B": (1, 4, 12)})
    assert modes == (("i",), ("j",), ("h",))
    # zero stride in one tensor next to a non-zero one: no merge
    modes, ext, st = coalesce((("i",), ("j",)), (3, 4), {"A": (1, 3), "B": (0, 7)})
    assert modes == (("i",), ("j",)) and st == {"A": (1, 3), "B": (0, 7)}


def test_coalesce_negative_strides():
    """A reversed tensor still merges (stride[j] == stride[i]*extent[i] with negative strides)."""
    modes, ext, st = coalesce((("i",), ("j",)), (3, 4), {"A": (-1, -3)})
    assert modes == (("i", "j"),) and ext == (12,) and st == {"A": (-1,)}


def test_plan_merges_m_modes_adjacent_in_a_and_c():
    """C[a,b,c] = A[a,b,k] B[k,c], C-order: a and b merge into one M mode of extent a*b, stride of b."""
    A, B, C = desc((3, 4, 5)), desc((5, 6)), desc((3, 4, 6))
    plan = gett.plan_contraction(A, "abk", B, "kc", C, "abc")
    M = plan.tables["M"]
    assert flat_modes(M) == (("b", "a"),)
    assert M.extents == (12,)
    assert M.strides_of("A") == (5,) and M.strides_of("C") == (6,) and M.strides_of("D") == (6,)
    assert plan.m == 12 and plan.n == 6 and plan.k == 5


def test_plan_merges_through_reference():
    """The merged plan still computes einsum's result."""
    A, B, C = f64((3, 4, 5), 1), f64((5, 6), 2), np.zeros((3, 4, 6))
    plan = gett.plan_contraction(A, "abk", B, "kc", C, "abc")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    np.testing.assert_allclose(C, np.einsum("abk,kc->abc", A, B), rtol=1e-12)


def test_no_merge_when_c_has_other_order():
    """C[b,a,c] holds a, b in the other order: M keeps two modes."""
    A, B, C = desc((3, 4, 5)), desc((5, 6)), desc((4, 3, 6))
    plan = gett.plan_contraction(A, "abk", B, "kc", C, "bac")
    M = plan.tables["M"]
    assert len(M.modes) == 2 and M.size == 12
    assert sorted(flat_modes(M)) == [("a",), ("b",)]
    st = {ms[0]: (a, c) for ms, a, c in zip(M.modes, M.strides_of("A"), M.strides_of("C"))}
    assert st == {"a": (20, 6), "b": (5, 18)}


def test_no_merge_with_gap_in_strided_view():
    """A is a slice A[:, :4, :] of a (3, 5, 5) buffer: a's stride 25 != 4*5, so a and b stay apart."""
    buf = f64((3, 5, 5), 1)
    A = buf[:, :4, :]
    B, C = f64((5, 6), 2), np.zeros((3, 4, 6))
    plan = gett.plan_contraction(A, "abk", B, "kc", C, "abc")
    M = plan.tables["M"]
    assert flat_modes(M) == (("b",), ("a",))
    assert M.extents == (4, 3)
    assert M.strides_of("A") == (5, 25) and M.strides_of("C") == (6, 24)
    gett.contract(plan, 1.0, A, B, 0.0, C)
    np.testing.assert_allclose(C, np.einsum("abk,kc->abc", A, B), rtol=1e-12)


def test_k_modes_merge_and_offsets_match_unmerged():
    """Two K modes contiguous in A and B merge; the merged table's offsets equal the hand-computed ones."""
    A, B, C = desc((3, 4, 5)), desc((4, 5, 6)), desc((3, 6))
    plan = gett.plan_contraction(A, "mpq", B, "pqn", C, "mn")
    K = plan.tables["K"]
    assert flat_modes(K) == (("q", "p"),) and K.extents == (20,)
    # hand: k = q + 5 p  ->  A offset q + 5 p, B offset 6 q + 30 p
    k = np.arange(20)
    q, p = k % 5, k // 5
    assert np.array_equal(K.offsets("A"), q + 5 * p)
    assert np.array_equal(K.offsets("B"), 6 * q + 30 * p)


# ---------------------------------------------------------------------------------------------------------
# Mode order inside a group
# ---------------------------------------------------------------------------------------------------------

def test_order_follows_big_a():
    """A (large K) moves the most bytes: M's innermost mode is A's stride-1 mode (b), not C's (a)."""
    A, B, C = desc((64, 3, 5)), desc((64, 2)), desc((2, 5, 3))
    plan = gett.plan_contraction(A, "kab", B, "kn", C, "nba")
    M = plan.tables["M"]
    assert flat_modes(M) == (("b",), ("a",))
    assert M.strides_of("A") == (1, 5)
    assert M.strides_of("C") == (3, 1)


def test_order_follows_big_c():
    """Swap the sizes (small K, large N): D/C moves the most bytes, so C's stride-1 mode (a) is first."""
    A, B, C = desc((2, 3, 5)), desc((2, 64)), desc((64, 5, 3))
    plan = gett.plan_contraction(A, "kab", B, "kn", C, "nba")
    M = plan.tables["M"]
    assert flat_modes(M) == (("a",), ("b",))
    assert M.strides_of("C") == (1, 3)
    assert M.strides_of("A") == (5, 1)


def test_order_in_n_follows_b():
    """N's innermost mode is the stride-1 mode of B when B is the big tensor."""
    A, B, C = desc((2, 64)), desc((64, 3, 5)), desc((2, 5, 3))
    plan = gett.plan_contraction(A, "mk", B, "kxy", C, "myx")
    N = plan.tables["N"]
    assert flat_modes(N) == (("y",), ("x",))
    assert N.strides_of("B") == (1, 5)
    A, B, C = desc((64, 2)), desc((2, 3, 5)), desc((64, 5, 3))
    N = gett.plan_contraction(A, "mk", B, "kxy", C, "myx").tables["N"]
    assert flat_modes(N) == (("x",), ("y",))
    assert N.strides_of("C") == (1, 3)


# ---------------------------------------------------------------------------------------------------------
# IndexTable in isolation
# ---------------------------------------------------------------------------------------------------------

def _table():
    return IndexTable("M", (("a",), ("b",), ("c",)), (3, 4, 2),
                      (("A", (1, 3, 12)), ("C", (8, 2, -1))))


def test_index_table_size_divisors():
    """size is the product of the extents; divisors are the running products before each mode."""
    t = _table()
    assert t.size == 24
    assert t.divisors == (1, 3, 12)
    assert t.tensors == ("A", "C")
    assert IndexTable("K", (), (), ()).size == 1


def test_index_table_offsets_by_hand():
    """offsets = Σ ((i // div) % ext) * stride, checked element by element for one i and in bulk."""
    t = _table()
    # i = 17: a = 17 % 3 = 2, b = (17 // 3) % 4 = 1, c = 17 // 12 = 1
    assert t.offsets("A", [17]).tolist() == [2 * 1 + 1 * 3 + 1 * 12]
    assert t.offsets("C", [17]).tolist() == [2 * 8 + 1 * 2 + 1 * -1]
    expect_c = [a * 8 + b * 2 - c for c in range(2) for b in range(4) for a in range(3)]
    assert t.offsets("C").tolist() == expect_c
    assert t.offsets("A").tolist() == list(range(24))          # A is column-major over (a, b, c)
    assert t.offsets("Z").tolist() == [0] * 24                  # a tensor without these modes
    assert t.offsets("A").dtype == np.int64


@pytest.mark.parametrize("seed", range(4))
def test_index_table_offsets_match_numpy_strides(seed):
    """For a permuted, reversed, strided numpy view x and a table over all its modes (any order),
    buffer[base + offsets(i)] is x at the colexicographic coordinates of i."""
    rng = np.random.default_rng(seed)
    buf = np.arange(4 * 6 * 10 * 3, dtype=np.float64).reshape(4, 6, 10, 3)
    x = buf[::-1, 1::2, ::3, :].transpose(2, 0, 3, 1)     # shape (4, 4, 3, 3)
    order = rng.permutation(x.ndim)                       # table order of x's axes, innermost first
    ext = tuple(x.shape[d] for d in order)
    st = tuple(x.strides[d] // x.itemsize for d in order)
    t = IndexTable("X", tuple((int(d),) for d in order), ext, (("x", st),))
    i = np.arange(t.size)
    coords = np.unravel_index(i, ext, order="F")          # colexicographic: first mode fastest
    # element offsets from numpy's byte strides, by hand
    expect = sum(c * s for c, s in zip(coords, st))
    assert np.array_equal(t.offsets("x"), expect)
    base = (x.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // buf.itemsize
    full = [None] * x.ndim
    for d, c in zip(order, coords):
        full[d] = c
    assert np.array_equal(buf.ravel()[base + t.offsets("x")], x[tuple(full)])


def test_index_table_offset_range():
    """offset_range is (lowest, highest) reachable offset; negative strides extend the low end."""
    t = _table()
    assert t.offset_range("A") == (0, 23)
    assert t.offset_range("C") == (-1, 16 + 6)
    off = t.offsets("C")
    assert t.offset_range("C") == (off.min(), off.max())
    assert t.offset_range("nope") == (0, 0)


def test_describe_lists_modes_extents_strides():
    """describe() names the group, size, each mode:extent, divisors and every tensor's strides."""
    text = _table().describe()
    assert "M = 24" in text and "a:3 b:4 c:2" in text and "divisors (1, 3, 12)" in text
    assert "A strides (1, 3, 12)" in text and "C strides (8, 2, -1)" in text


# ---------------------------------------------------------------------------------------------------------
# 32- vs 64-bit offsets
# ---------------------------------------------------------------------------------------------------------

def test_offset_bits_32_for_normal_sizes():
    """Ordinary tensors need 32-bit offsets."""
    plan = gett.plan_contraction(desc((64, 32)), "mk", desc((32, 48)), "kn", desc((64, 48)), "mn")
    assert plan.offset_bits == 32


def test_offset_bits_64_for_huge_stride():
    """A stride that puts the last element past 2**31-1 forces 64-bit offsets."""
    A = desc((2, 3), (2**31, 1))
    plan = gett.plan_contraction(A, "mk", desc((3, 4)), "kn", desc((2, 4)), "mn")
    assert plan.offset_bits == 64


def test_offset_bits_boundary():
    """Largest offset exactly 2**31-1 still fits in 32 bits; 2**31 does not."""
    B, C = desc((3, 4)), desc((2, 4))
    fits = desc((2, 3), (2**31 - 1 - 2, 1))     # max offset (2**31 - 3) + 2 = 2**31 - 1
    over = desc((2, 3), (2**31 - 2, 1))         # max offset 2**31
    assert gett.plan_contraction(fits, "mk", B, "kn", C, "mn").offset_bits == 32
    assert gett.plan_contraction(over, "mk", B, "kn", C, "mn").offset_bits == 64


def test_offset_bits_64_for_huge_negative_stride():
    """A huge negative stride (lowest offset below -(2**31-1)) also forces 64-bit offsets."""
    A = desc((2, 3), (-(2**31), 1))
    plan = gett.plan_contraction(A, "mk", desc((3, 4)), "kn", desc((2, 4)), "mn")
    assert plan.offset_bits == 64


def test_offset_bits_sum_over_groups():
    """The reach is summed over groups: M and K each below 2**31 but together above → 64-bit."""
    A = desc((2, 2), (2**30 + 1, 2**30))     # M reach 2**30+1, K reach 2**30
    plan = gett.plan_contraction(A, "mk", desc((2, 4)), "kn", desc((2, 4)), "mn")
    assert plan.offset_bits == 64


def test_offset_bits_64_for_huge_output():
    """The output's reach counts too."""
    D = desc((2, 4), (2**31, 1))
    plan = gett.plan_contraction(desc((2, 3)), "mk", desc((3, 4)), "kn", desc((2, 4)), "mn", D=D)
    assert plan.offset_bits == 64


# ---------------------------------------------------------------------------------------------------------
# Plan cache
# ---------------------------------------------------------------------------------------------------------

def test_plan_cache_same_signature_same_object():
    """Planning the same signature twice returns the very same plan; after clear_plan_cache a new one."""
    from gett.plan import plan_cache_size
    args = (desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn")
    p1 = gett.plan_contraction(*args)
    p2 = gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), list("kn"), desc((3, 5)), ("m", "n"))
    assert p1 is p2
    assert plan_cache_size() >= 1
    gett.clear_plan_cache()
    assert plan_cache_size() == 0
    p3 = gett.plan_contraction(*args)
    assert p3 is not p1 and p3 == p1          # equal signature, fresh object


def test_plan_cache_same_arrays_same_object():
    """Planning twice from the same numpy arrays returns the same plan."""
    A, B, C = f64((3, 4)), f64((4, 5)), np.zeros((3, 5))
    assert gett.plan_contraction(A, "mk", B, "kn", C, "mn") is gett.plan_contraction(A, "mk", B, "kn", C, "mn")


def test_plan_cache_distinguishes_signatures():
    """Different strides, dtypes, compute types, ops, broadcast and modes give different plans."""
    base = gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn")
    variants = [
        gett.plan_contraction(desc((3, 4), (1, 3)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn"),
        gett.plan_contraction(desc((3, 4), dtype="f64"), "mk", desc((4, 5), dtype="f64"), "kn",
                              desc((3, 5), dtype="f64"), "mn"),
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn", compute_type="tf32"),
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn",
                              op_a=lambda x: 2 * x),
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn",
                              op_out=lambda x: x * x),
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn",
                              D=desc((3, 5), (1, 3))),
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 3)), "kn", desc((3, 3)), "mn"),
    ]
    for v in variants:
        assert v is not base and v != base
    assert len({v.signature for v in variants}) == len(variants)


def test_plan_identity_lambda_is_the_identity_plan():
    """An identity lambda is no op at all: the plan is the same as with no op."""
    base = gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn")
    same = gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn",
                                 op_a=lambda x: x)
    assert same is base


# ---------------------------------------------------------------------------------------------------------
# repr
# ---------------------------------------------------------------------------------------------------------

def test_repr_shows_groups_orders_and_tables():
    """repr(plan) shows the contraction, M/N/K/L sizes, the mode order of each group and the tables."""
    A, B, C = desc((2, 64, 3, 5)), desc((2, 64, 7)), desc((2, 7, 5, 3))
    plan = gett.plan_contraction(A, "lkab", B, "lkn", C, "lnba")
    text = repr(plan)
    assert "D[lnba] = sum A[lkab] * B[lkn]" in text
    assert "GEMM M=15 N=7 K=64 batch=2" in text
    assert "32-bit offsets" in text and "compute f32" in text
    assert "M = 15  [b:5 a:3]  divisors (1, 5)" in text
    assert "N = 7  [n:7]" in text and "K = 64  [k:64]" in text and "L = 2  [l:2]" in text
    assert "A strides (1, 5)" in text           # M strides of A: b then a
    assert "C strides (3, 1)" in text and "D strides (3, 1)" in text


def test_repr_mentions_single_input_and_broadcast_modes():
    """repr lists modes summed in one input only and broadcast modes."""
    plan = gett.plan_contraction(desc((3, 4, 2)), "aks", desc((4, 5)), "kn", desc((3, 5, 6)), "anz",
                                 broadcast="z")
    text = repr(plan)
    assert "summed in one input only: ('s',)" in text
    assert "broadcast in D: ('z',)" in text


# ---------------------------------------------------------------------------------------------------------
# dtype resolution
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,compute", [("f16", "f32"), ("f32", "f32"), ("f64", "f64"),
                                           ("c64", "c64"), ("c128", "c128"), ("i32", "i32"),
                                           ("i64", "i64"), ("bf16", "f32")])
def test_default_compute_types(dtype, compute):
    """Default compute type per data type: f16/bf16/f32 → f32, others their own type."""
    plan = gett.plan_contraction(desc((2, 3), dtype=dtype), "mk", desc((3, 4), dtype=dtype), "kn",
                                 desc((2, 4), dtype=dtype), "mn")
    assert plan.compute_type.name == compute


def test_f16_inputs_with_f32_output():
    """f16 inputs may write an f32 output; accumulation is f32."""
    plan = gett.plan_contraction(desc((2, 3), dtype="f16"), "mk", desc((3, 4), dtype="f16"), "kn",
                                 desc((2, 4), dtype="f32"), "mn")
    assert plan.compute_type.name == "f32" and plan.compute_type.accumulator == F32
    assert plan.descriptors["D"].dtype == F32


def test_f16_inputs_f32_output_reference():
    """f16 inputs, f32 output on the reference executor agree with einsum of the f16 values."""
    A, B = f64((5, 6), 1, np.float16), f64((6, 7), 2, np.float16)
    C = np.zeros((5, 7), np.float32)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    expect = np.einsum("mk,kn->mn", A.astype(np.float64), B.astype(np.float64))
    np.testing.assert_allclose(C, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ct", ["tf32", "3xtf32", "f32", "float32"])
def test_tf32_compute_types_for_f32(ct):
    """f32 data accepts compute_type tf32, 3xtf32, f32 (also spelled float32)."""
    plan = gett.plan_contraction(desc((2, 3)), "mk", desc((3, 4)), "kn", desc((2, 4)), "mn", compute_type=ct)
    assert plan.compute_type.name == {"float32": "f32"}.get(ct, ct)


def test_resolve_compute_type_directly():
    """resolve_compute_type: allowed combinations pass, the rest raise DTypeError."""
    assert resolve_compute_type(F16, F16, F16, F16).name == "f32"
    assert resolve_compute_type(F16, F16, F32, F32).name == "f32"
    assert resolve_compute_type(F32, F32, F32, F32, "3xtf32").name == "3xtf32"
    assert resolve_compute_type(F64, F64, F64, F64).name == "f64"
    for args in [(F16, F16, F16, F16, "tf32"), (F64, F64, F64, F64, "tf32"), (F32, F32, F64, F64),
                 (F32, F64, F32, F32), (F32, F32, F32, F64)]:
        with pytest.raises(gett.DTypeError):
            resolve_compute_type(*args[:4], *args[4:])


@pytest.mark.parametrize("spelling", ["float32", np.float32, np.dtype("float32"), "f32"])
def test_dtype_spellings(spelling):
    """Descriptors accept the usual spellings of f32."""
    assert desc((2,), dtype=spelling).dtype == F32


# ---------------------------------------------------------------------------------------------------------
# Reference executor on hand-picked cases (oracle: numpy.einsum in float64)
# ---------------------------------------------------------------------------------------------------------

def test_reference_transposed_output():
    """The output is a transposed (column-major) view: D[m,n] lives at n*M + m."""
    A, B = f64((4, 5), 1), f64((5, 6), 2)
    store = np.full((6, 4), np.nan)
    D = store.T
    plan = gett.plan_contraction(A, "mk", B, "kn", D, "mn")
    out = gett.contract(plan, 1.0, A, B, 0.0, D)
    assert out is D
    np.testing.assert_allclose(store, np.einsum("mk,kn->nm", A, B), rtol=1e-12)


def test_reference_negative_stride_inputs():
    """Inputs that are reversed and stepped views (negative strides) read the right elements."""
    a_buf, b_buf = f64((8, 10), 1), f64((5, 12), 2)
    A = a_buf[::-2, ::-2]         # (4, 5), strides (-20, -2)
    B = b_buf[::-1, 1::2].T       # (6, 5) transposed view of a reversed buffer
    C = np.zeros((4, 6))
    plan = gett.plan_contraction(A, "mk", B, "nk", C, "mn")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    np.testing.assert_allclose(C, np.einsum("mk,nk->mn", A, B), rtol=1e-12)


def test_reference_full_contraction_to_0d():
    """A 0-d output: every mode summed."""
    A, B = f64((3, 4, 5), 1), f64((5, 3, 4), 2)
    C = np.array(7.0)
    D = np.array(np.nan)
    plan = gett.plan_contraction(A, "abc", B, "cab", C, "", D=D)
    assert (plan.m, plan.n, plan.k, plan.batch) == (1, 1, 60, 1)
    gett.contract(plan, 2.0, A, B, 3.0, C, D)
    np.testing.assert_allclose(D, 2.0 * np.einsum("abc,cab->", A, B) + 3.0 * 7.0, rtol=1e-12)


def test_reference_batch_mode():
    """An L (batch) mode, not outermost in any tensor."""
    A, B = f64((4, 3, 5), 1), f64((5, 3, 6), 2)
    C = np.zeros((6, 3, 4))
    plan = gett.plan_contraction(A, "mlk", B, "kln", C, "nlm")
    assert plan.batch == 3
    gett.contract(plan, 1.0, A, B, 0.0, C)
    np.testing.assert_allclose(C, np.einsum("mlk,kln->nlm", A, B), rtol=1e-12)


def test_reference_alpha_beta_separate_d():
    """alpha/beta with beta != 0, D separate from C: C is left alone."""
    A, B, C = f64((4, 5), 1), f64((5, 6), 2), f64((4, 6), 3)
    C0 = C.copy()
    D = np.full((4, 6), np.nan)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    out = gett.contract(plan, -1.25, A, B, 0.75, C, D)
    assert out is D
    np.testing.assert_array_equal(C, C0)
    np.testing.assert_allclose(D, -1.25 * (A @ B) + 0.75 * C0, rtol=1e-12)


def test_reference_in_place_d_is_c():
    """contract(plan, alpha, A, B, beta, C) with no D writes C in place and returns C."""
    A, B, C = f64((4, 5), 1), f64((5, 6), 2), f64((4, 6), 3)
    C0 = C.copy()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    out = gett.contract(plan, 2.0, A, B, -1.0, C)
    assert out is C
    np.testing.assert_allclose(C, 2.0 * (A @ B) - C0, rtol=1e-12)


def test_reference_beta_zero_ignores_nan_in_c():
    """beta == 0 never reads C: NaN in C does not reach D."""
    A, B = f64((4, 5), 1), f64((5, 6), 2)
    C = np.full((4, 6), np.nan)
    D = np.zeros((4, 6))
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    gett.contract(plan, 1.0, A, B, 0.0, C, D)
    np.testing.assert_allclose(D, A @ B, rtol=1e-12)


def test_reference_empty_k_gives_beta_c():
    """An empty K (extent 0): the sum is 0, so D = beta*C."""
    A, B, C = np.zeros((3, 0)), np.zeros((0, 4)), f64((3, 4), 3)
    D = np.full((3, 4), np.nan)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    assert plan.is_empty and plan.k == 0
    gett.contract(plan, 2.0, A, B, 1.5, C, D)
    np.testing.assert_allclose(D, 1.5 * C, rtol=1e-15)
    gett.contract(plan, 2.0, A, B, 0.0, C, D)
    assert np.array_equal(D, np.zeros((3, 4)))


def test_reference_empty_k_sliced_view():
    """An empty K that comes from slicing (A = X[:, :0], strides kept by numpy) works like a fresh one."""
    A = f64((3, 5), 1)[:, :0]
    B, C = np.zeros((0, 4)), f64((3, 4), 3)
    D = np.full((3, 4), np.nan)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    gett.contract(plan, 2.0, A, B, 1.5, C, D)
    np.testing.assert_allclose(D, 1.5 * C, rtol=1e-15)


def _empty_m_operands():
    return np.zeros((0, 5)), f64((5, 4), 2), np.zeros((0, 4))


def test_reference_empty_m_leaves_d_untouched():
    """An empty M: D (an empty view into a sentinel-filled buffer) is returned, the buffer is unchanged.

    D's strides are (0, 1) by construction so that neither empty-array bug below gets in the way."""
    buf = np.full(8, -7.0)
    D = np.lib.stride_tricks.as_strided(buf, shape=(0, 4), strides=(0, 8))
    A, B, C = _empty_m_operands()
    C = np.lib.stride_tricks.as_strided(np.zeros(4), shape=(0, 4), strides=(0, 8))
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    assert plan.is_empty and plan.m == 0 and plan.n == 4
    assert gett.contract(plan, 1.0, A, B, 1.0, C, D) is D
    assert np.all(buf == -7.0)


def test_reference_empty_m_fresh_numpy_output():
    """An empty M with freshly allocated numpy arrays (np.zeros((0, 4))) plans and runs."""
    A, B, C = _empty_m_operands()
    D = np.zeros((0, 4))
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    assert gett.contract(plan, 1.0, A, B, 1.0, C, D) is D


def test_reference_empty_m_sliced_output():
    """An empty M where D is a slice buf[:0] of a bigger array: runs, and the buffer stays unchanged."""
    buf = np.full((5, 4), -7.0)
    D = buf[:0]
    A, B, _ = _empty_m_operands()
    C = np.ones((5, 4))[:0]
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    gett.contract(plan, 1.0, A, B, 1.0, C, D)
    assert np.all(buf == -7.0)


def _wrap64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


def test_reference_int64_wraps_like_int64():
    """int64 contraction with products beyond 2**63 wraps modulo 2**64, exactly (Python-int oracle)."""
    rng = np.random.default_rng(5)
    A = rng.integers(-(2**40), 2**40, size=(3, 4), dtype=np.int64)
    B = rng.integers(-(2**40), 2**40, size=(4, 2), dtype=np.int64)
    C = rng.integers(-(2**62), 2**62, size=(3, 2), dtype=np.int64)
    D = np.zeros((3, 2), np.int64)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    gett.contract(plan, 3, A, B, 5, C, D)
    expect = [[_wrap64(3 * sum(int(A[m, k]) * int(B[k, n]) for k in range(4)) + 5 * int(C[m, n]))
               for n in range(2)] for m in range(3)]
    assert D.tolist() == expect
    assert any(abs(3 * sum(int(A[m, k]) * int(B[k, n]) for k in range(4))) > 2**63
               for m in range(3) for n in range(2))   # the case really overflows


def test_reference_int64_exact_large_values():
    """int64 results that fit are exact (float64 would lose the low bits)."""
    A = np.array([[2**53 + 1, 3]], dtype=np.int64)
    B = np.array([[1], [1]], dtype=np.int64)
    C = np.zeros((1, 1), np.int64)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    gett.contract(plan, 1, A, B, 0, C)
    assert int(C[0, 0]) == 2**53 + 4


def test_group_order_follows_the_tensor_that_loads_along_it():
    """TCCG #21 abcd-aebf-fdec: A's stride-1 mode (a) is in M, so A loads along M and the K order must
    serve B, whose stride-1 mode f is a K mode — f innermost in K even though A is larger."""
    D = gett.TensorDescriptor

    def colmajor(shape):
        strides, s = [], 1
        for e in shape:
            strides.append(s)
            s *= e
        return tuple(strides)
    A = D((72,) * 4, colmajor((72,) * 4), "f16")
    B = D((72,) * 4, colmajor((72,) * 4), "f16")
    C = D((72,) * 4, colmajor((72,) * 4), "f16")
    plan = gett.plan_contraction(A, "aebf", B, "fdec", C, "abcd")
    assert plan.tables["K"].modes[0] == ("f",)
    assert plan.tables["K"].strides_of("B")[0] == 1
    assert plan.tables["M"].modes[0] == ("a",)
