"""Operand staging (gett.staging): which operands the planner copies and into which layout, the copy's
index table evaluated with numpy, staged contractions through the reference executor against
numpy.einsum, and NVRTC compiles of both copy kernels."""
import numpy as np
import pytest
from cases import build_host_arrays, contractions, oracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gett
from gett.reference import execute_reference, flat_view
from gett.staging import choose_staging, copy_table, render_copy, run_bytes
from tccg_suite.suite import select

D = gett.TensorDescriptor


def tccg_plan(cid: int, dtype: str = "f16", **kw):
    c = select([cid])[0]
    mk = lambda t: D(c.shape(t), c.strides(t), dtype)
    return gett.plan_contraction(mk("A"), c.modes("A"), mk("B"), c.modes("B"), mk("C"), c.modes("C"),
                                 beta=0, **kw)


def staged_orders(plan) -> dict:
    return {st.tensor: "".join(st.order) for st in plan.staging}


@pytest.mark.parametrize("cid,dtype,expect", [
    # 72-element runs on the tensor-core path, compute-bound: both copied, A M-major, B K-major (a
    # transposing copy where B is contiguous along N), K in A's order ...
    (20, "f16", {"A": "abef", "B": "efdc"}),
    (22, "f16", {"A": "acef", "B": "efbd"}),
    (21, "f16", {"A": "abfe", "B": "fecd"}),      # ... or where B is contiguous along K, in B's order
    # A and B contiguous along different K modes (e, f): A made M-major, B K-major in its own K order
    (28, "f16", {"A": "abfe", "B": "fecd"}),
    # SIMT (f32) plans with enough flops per copied byte: dense M- and N-major copies (SIMT reads
    # fragments along N best); an operand contiguous along K from 192 flops a copied byte, ...
    (28, "f32", {"A": "abfe", "B": "cdfe"}),
    (30, "f32", {"A": "adfe", "B": "bcfe"}),
    (21, "f32", {"A": "abfe", "B": "cdfe"}),
    (12, "f32", {"B": "bc"}),
    (18, "f32", {"B": "bd"}), (19, "f32", {"B": "bed"}),   # ... the small B alone (A's copy would cost more)
    (20, "f32", {"A": "abef", "B": "dcef"}),   # ... modes that do not merge from 512
    (13, "f32", {}),   # B contiguous along K, but 78 flops a byte of its copy
    # memory-bound with A and B contiguous along different K modes (c, d): A alone, K in B's order, K-major
    # on the tensor-core path (f32, SIMT: compute-bound, but from 64 flops a byte of A's copy A alone too,
    # M-major: #14 does 75)
    (14, "f16", {"A": "dca"}), (14, "f32", {"A": "adc"}),
    # memory-bound with a small N-major B shared by 722 row tiles: B copied K-major (not on the SIMT path,
    # nor where B is K-major already)
    (17, "f16", {"B": "db"}), (17, "f32", {}), (18, "f16", {}), (15, "f16", {}),
    # the same for #16's small A, which the kernel takes as its B (exchanged: see below)
    (16, "f16", {"A": "da"}), (16, "f32", {}),
    # not staged: long runs (#12), memory-bound or not enough flops per copy
    (12, "f16", {}), (13, "f16", {}), (31, "f32", {}), (1, "f32", {}),
    # memory-bound with a small B contiguous along e, across the big M-major A's rows (which continue along
    # d): B copied K-major in A's K order (not #13's big B, not on the SIMT path)
    (19, "f16", {"B": "deb"}),
    (1, "f16", {}), (9, "f16", {}), (31, "f16", {}), (40, "f16", {}),
])
def test_tccg_staging_choices(cid, dtype, expect):
    assert staged_orders(tccg_plan(cid, dtype)) == expect


def test_staged_tccg_plan_is_a_plain_gemm():
    """#21's copies make M, N and K single contiguous modes: the staged plan is a dense GEMM, 32-bit."""
    plan = tccg_plan(21)
    inner = plan.staged_plan
    assert [len(inner.tables[g].extents) for g in "MNK"] == [1, 1, 1]
    assert inner.tables["M"].strides_of("A") == (1,) and inner.tables["K"].strides_of("B") == (1,)
    assert (inner.m, inner.n, inner.k) == (plan.m, plan.n, plan.k) == (5184, 5184, 5184)
    assert run_bytes(plan, "A") == 144 and run_bytes(inner, "A") == 5184 * 2
    assert inner.staging == () and inner.staged_plan is None
    for copy in plan.staging:   # same shape and dtype, dense strides
        assert copy.target.shape == copy.source.shape and copy.target.dtype == copy.source.dtype
        assert sorted(copy.target.strides) == [72 ** i for i in range(4)]
    assert "staged: A copied to modes abfe" in repr(plan)


def test_memory_bound_k_conflict_copies_a_into_b_k_order():
    """#14 ``ab-cad-dcb``: A is contiguous along c, B along d, so the kernel's K tile would be a box of 8 x 8
    (16-byte runs of each). A alone is copied, K-major in B's K order (d, c, a) on the tensor-core path: K
    merges into one mode along which both operands are contiguous, each row one run of all 97344."""
    plan = tccg_plan(14)
    inner = plan.staged_plan
    assert [st.tensor for st in plan.staging] == ["A"] and plan.staging[0].op is None
    assert staged_orders(plan) == {"A": "dca"}
    assert inner.tables["K"].extents == (97344,)
    assert inner.tables["K"].strides_of("A") == inner.tables["K"].strides_of("B") == (1,)
    assert inner.tables["M"].strides_of("A") == (97344,) and run_bytes(inner, "A") == 97344 * 2
    assert run_bytes(plan, "A") == 312 * 2 and plan.tables["K"].strides_of("A")[0] == 1   # c: A's K run
    assert staged_orders(tccg_plan(14, "bf16")) == {"A": "dca"}


@pytest.mark.parametrize("a,b,c,d,order", [
    (312, 128, 128, 128, "dca"), (1000, 64, 128, 128, "dca"),   # M's rows not whole lines, K's are: K-major
    (4096, 64, 64, 64, "adc"), (256, 256, 128, 128, "adc"),     # M's rows whole lines: M-major, with a long K
    (4096, 64, 8, 8, "adc"),                                    # ... or a short one
    (1000, 64, 12, 12, "adc"),                                  # neither whole lines (K = 144): M-major
])
def test_k_conflict_copy_order_follows_whole_lines(a, b, c, d, order):
    """A memory-bound ``ab-cad-dcb`` (f16): A's copy is K-major where the M-major copy's rows (all of M) would not
    be whole 128-byte lines and the K-major one's (all of K) are (staging._a_k_major), else M-major."""
    plan = gett.plan_contraction(D((c, a, d), (1, c, c * a), "f16"), "cad", D((d, c, b), (1, d, d * c), "f16"), "dcb",
                                 D((a, b), (1, a), "f16"), "ab", beta=0)
    assert staged_orders(plan) == {"A": order}


def test_small_n_major_b_is_copied_k_major_where_its_tile_stays():
    """#17 ``abc-adc-bd``: B (312 x 296, N-major) is copied K-major, and the staged plan keeps B's tile for
    all of K in shared memory with 5 stages of A (128 x 160: no whole 64-column atoms to round up to); not
    where the kernel would not keep it (an op on A, a read of C, a 32-bit D), nor with ``staging=False``."""
    from gett.config import default_config
    plan = tccg_plan(17)
    inner = plan.staged_plan
    assert [st.tensor for st in plan.staging] == ["B"] and plan.staging[0].op is None
    assert inner.tables["K"].strides_of("B") == (1,) and inner.tables["N"].strides_of("B") == (296,)
    cfg = default_config(inner, "sm_90")
    assert (cfg.bm, cfg.bn, cfg.stages, cfg.ws, cfg.persistent, cfg.resident) == (128, 160, 5, True, True, "b")
    assert tccg_plan(17, op_a=lambda x: 2 * x).staging == ()
    c = select([17])[0]
    mk = lambda t: D(c.shape(t), c.strides(t), "f16")
    read_c = gett.plan_contraction(mk("A"), c.modes("A"), mk("B"), c.modes("B"), mk("C"), c.modes("C"), beta=1)
    assert read_c.staging == () and tccg_plan(17, staging=False).staging == ()
    f32_d = gett.plan_contraction(mk("A"), c.modes("A"), mk("B"), c.modes("B"), D(c.shape("C"), c.strides("C"), "f32"),
                                  c.modes("C"), beta=0)   # a 32-bit D's epilogue tile leaves B no room to stay
    assert f32_d.staging == ()
    with_op = tccg_plan(17, op_b=lambda x: 2 * x)   # copied for its op too: then K-major as well
    assert staged_orders(with_op) == {"B": "db"} and with_op.staging[0].op is not None


def test_small_b_across_a_rows_is_copied_into_a_k_order():
    """#19 ``abc-adec-ebd``: A's 144-byte rows (a) continue along d, B (746 KB) is contiguous along e. B is
    copied K-major in A's K order (d, e, b), so K merges into one mode along which both operands are
    contiguous and each of A's K tiles is one stream; A is not copied."""
    plan = tccg_plan(19)
    inner = plan.staged_plan
    assert [st.tensor for st in plan.staging] == ["B"] and plan.staging[0].op is None
    assert inner.tables["K"].extents == (5184,)
    assert inner.tables["K"].strides_of("A") == (72,) and inner.tables["K"].strides_of("B") == (1,)
    assert plan.tables["K"].strides_of("B")[0] == 1   # unstaged: K in B's order (e first), A's rows apart
    assert tccg_plan(19, staging=False).staging == ()


def test_a_small_shared_a_is_the_kernel_second_operand():
    """#16 ``abc-ad-bdc``: A (312 x 296) is small and read by 722 column tiles, B (55 MB) is not. The kernel
    takes B first (its tiles' rows along b, c: 92352) and A second, copied K-major as #17's B, in 2 x 160
    columns of a, its math warpgroups taking the tiles in turn (D walked along N); not with an op, a read of C, a configuration given or on the SIMT path (f32), nor for
    #15, #17, #18, whose small operand is B already."""
    plan = tccg_plan(16)
    inner = plan.staged_plan
    assert plan.exchanged and (plan.m, plan.n) == (312, 92352)
    assert (inner.m, inner.n, inner.k) == (92352, 312, 296) and inner.modes["A"] == plan.modes["B"]
    assert inner.descriptors["A"] == plan.descriptors["B"] and inner.modes["B"] == plan.modes["A"]
    [copy] = plan.staging
    assert copy.tensor == "A" and copy.source == plan.descriptors["A"] and inner.descriptors["B"] == copy.target
    assert inner.tables["K"].strides_of("B") == (1,) and not inner.exchanged and inner.staging == ()
    cfg = plan.kernel("sm_90").config
    assert (cfg.bm, cfg.bn, cfg.stages, cfg.ws, cfg.persistent, cfg.resident, cfg.pingpong) == \
        (128, 160, 5, True, True, "b", True)
    assert "exchanged: the kernel takes B as its first operand" in repr(plan)
    from gett.config import KernelConfig
    given = KernelConfig("wgmma", 128, 128, 64, 5, ws=True, persistent=True, resident="a", pingpong=True)
    c = select([16])[0]
    mk = lambda t: D(c.shape(t), c.strides(t), "f16")
    read_c = gett.plan_contraction(mk("A"), c.modes("A"), mk("B"), c.modes("B"), mk("C"), c.modes("C"), beta=1)
    assert not any(p.exchanged for p in (tccg_plan(16, op_a=lambda x: 2 * x), tccg_plan(16, "f32"),
                                         tccg_plan(16, config=given), read_c))
    assert tccg_plan(16, staging=False).exchanged and tccg_plan(16, staging=False).staging == ()
    assert not any(tccg_plan(i).exchanged for i in (15, 17, 18))


@pytest.mark.parametrize("order,copied", [("F", ["A"]), ("C", [])])
def test_an_exchanged_plan_equals_numpy_through_the_reference_executor(order, copied):
    """The kernel's plan of an exchanged contraction (A 128 x 16, shared by 32768 columns of B), run by the
    reference executor on (B, A or its K-major copy where a is A's stride-1 mode), equals numpy.einsum of
    (A, B) in float64."""
    rng = np.random.default_rng(16)
    A = np.asarray(rng.standard_normal((128, 16)), order=order).astype(np.float16, order=order)   # a d
    B = np.asfortranarray(rng.standard_normal((256, 16, 128)).astype(np.float16))   # b d c, b fastest
    C = np.asfortranarray(np.zeros((128, 256, 128), np.float16))
    plan = gett.plan_contraction(A, "ad", B, "bdc", C, "abc", beta=0)
    assert plan.exchanged and [st.tensor for st in plan.staging] == copied
    inner = plan.staged_plan
    second = _staged_copy(A, plan.staging[0].target) if copied else A
    out = np.asfortranarray(np.full(C.shape, np.nan, np.float16))
    execute_reference(inner, 1.0, B, second, 0.0, C, out)
    expect = np.einsum("ad,bdc->abc", A.astype(np.float64), B.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), expect, rtol=2e-3, atol=2e-3)


def _row_major(extents: dict, modes: str, dtype: str):
    shape = tuple(extents[m] for m in modes)
    return D(shape, tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape))), dtype)


def _gemm_plan(a: str, b: str, n: int, dtype: str = "f32", **kw):
    ext = {"i": n, "j": n, "k": n}
    return gett.plan_contraction(_row_major(ext, a, dtype), a, _row_major(ext, b, dtype), b,
                                 _row_major(ext, "ij", dtype), "ij", beta=0, **kw)


def test_simt_plans_copy_operands_contiguous_along_k_where_that_pays():
    """f32 SIMT GEMMs of row-major matrices: an operand contiguous along k is copied M- or N-major from
    192 flops a copied byte (2048^3 with both copied: 256), not below (1024^3: 128), not where the matrices
    are M- and N-major already, nor in plans of fewer than 2^30 flops (1001 x 263 x 777); a max-plus plan
    accumulating in f32 likewise; complex and integer SIMT plans (whose tiles fit two CTAs an SM either way)
    and tensor-core plans not."""
    assert staged_orders(_gemm_plan("ik", "jk", 2048)) == {"A": "ik", "B": "jk"}
    assert staged_orders(_gemm_plan("ik", "kj", 1024)) == {"A": "ik"}   # one copy: 256 flops a byte
    assert staged_orders(_gemm_plan("ik", "jk", 1024)) == {}
    assert staged_orders(_gemm_plan("ki", "kj", 4096)) == {}
    # dense but for an extent-1 mode's stride: no copy; the same A beside a B along k: B alone
    dense_a = D((4096, 1, 4096), (1, 7, 4096), "f32")
    n_major, along_k = D((4096, 4096), (1, 4096), "f32"), D((4096, 4096), (4096, 1), "f32")
    c = D((4096, 4096), (1, 4096), "f32")
    assert gett.plan_contraction(dense_a, "izk", n_major, "jk", c, "ij", beta=0).staging == ()
    assert staged_orders(gett.plan_contraction(dense_a, "izk", along_k, "jk", c, "ij", beta=0)) == {"B": "jk"}
    ext = {"i": 1001, "j": 263, "k": 777}
    small = gett.plan_contraction(_row_major(ext, "ki", "f32"), "ki", _row_major(ext, "jk", "f32"), "jk",
                                  _row_major(ext, "ij", "f32"), "ij", beta=0)
    assert small.staging == ()
    leaky = _gemm_plan("ik", "jk", 2048, op_b=lambda x: x if x > 0 else 0.01 * x)   # B's copy applies its op
    assert [(st.tensor, "".join(st.order), st.op is not None) for st in leaky.staging] == [("A", "ik", False),
                                                                                            ("B", "jk", True)]
    # A and B contiguous along different K modes (#14's layout, 2 x 256^4 flops): A copied M-major in B's K
    # order from 64 flops a byte of its copy (256^3 of A: 64), not below (128^2 x 256^2: 32)
    for mn, copied in ((256, {"A": "adc"}), (128, {})):
        ext = {"a": mn, "b": mn, "c": 256, "d": 256}   # row-major: A contiguous along c, B along d
        conflict = gett.plan_contraction(_row_major(ext, "dac", "f32"), "dac",
                                         _row_major(ext, "bcd", "f32"), "bcd", _row_major(ext, "ab", "f32"), "ab",
                                         beta=0)
        assert staged_orders(conflict) == copied, mn
    max_plus = dict(op_ab=lambda x, y: x + y, reduce=(max, float("-inf")))
    assert staged_orders(_gemm_plan("ki", "jk", 2048, **max_plus)) == {"B": "jk"}
    for dtype in ("c64", "i32", "f16", "f64"):
        assert staged_orders(_gemm_plan("ik", "jk", 2048, dtype)) == {}, dtype


def test_a_simt_plan_staged_for_k_contiguity_equals_numpy_through_the_reference_executor():
    """64 x 4096 x 2048 f32 (2^30 flops) with A row-major (contiguous along k): the planner copies A
    M-major by itself; the staged plan over the copy, through the reference executor, equals numpy in
    float64."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((64, 2048)).astype(np.float32)
    B = rng.standard_normal((2048, 4096)).astype(np.float32)
    C = np.zeros((64, 4096), np.float32)
    plan = gett.plan_contraction(A, "ik", B, "kj", C, "ij", beta=0)
    assert staged_orders(plan) == {"A": "ik"} and plan.staging[0].target.strides == (1, 64)
    assert gett.plan_contraction(A[:, :1024], "ik", B[:1024], "kj", C, "ij", beta=0).staging == ()   # 2^29 flops
    out = np.full(C.shape, np.nan, np.float32)
    execute_reference(plan.staged_plan, 1.0, _staged_copy(A, plan.staging[0].target), B, 0.0, C, out)
    np.testing.assert_allclose(out, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_staging_option():
    assert tccg_plan(20, staging=False).staging == ()
    assert tccg_plan(12, staging=True).staging == ()    # already dense in the target layouts
    # dense but for the stride of an extent-1 mode (the planner reads it as 0): no copy either
    dense_a, b = D((64, 1, 32), (1, 7, 64), "f32"), D((32, 48), (1, 32), "f32")
    forced_dense = gett.plan_contraction(dense_a, "izk", b, "kj", D((64, 48), (1, 64), "f32"), "ij", staging=True)
    assert [st.tensor for st in forced_dense.staging] == ["B"]
    forced = tccg_plan(13, staging=True)
    assert [st.tensor for st in forced.staging] == ["A", "B"]
    assert forced is not tccg_plan(13)
    with pytest.raises(TypeError, match="staging must be None"):
        tccg_plan(20, staging="yes")


def _staged_copy(array: np.ndarray, target) -> np.ndarray:
    """``array`` copied into a fresh buffer laid out with ``target``'s strides (the planner's layout)."""
    span = sum((e - 1) * s for e, s in zip(target.shape, target.strides)) + 1
    buf = np.full(max(span, 1), np.nan if array.dtype.kind in "fc" else 0, dtype=array.dtype)
    view = np.lib.stride_tricks.as_strided(buf, array.shape, [s * array.itemsize for s in target.strides])
    view[...] = array
    return view


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=contractions(dtypes=("f32", "f64", "c128", "i64")), seed=st.integers(0, 2**32 - 1))
def test_forced_staging_through_the_reference_executor(case, seed):
    """Every staged copy's table is a bijection onto the target's elements (dense, or with runs padded to
    whole vectors), and the contraction over the copies (the staged plan, through the reference executor)
    equals numpy.einsum in float64."""
    if case.dtype.startswith("i"):
        case.alpha, case.beta = float(int(case.alpha) or 1), float(int(case.beta))
    arrays = build_host_arrays(case, np.random.default_rng(seed))
    A, B, C = (arrays[t][0] for t in "ABC")
    out = np.full(C.shape, np.nan if C.dtype.kind in "fc" else -999999, dtype=C.dtype)
    plan = gett.plan_contraction(A, case.modes_A, B, case.modes_B, C, case.modes_C, D=out,
                                 broadcast=case.broadcast, staging=True)
    operands = {"A": A, "B": B}
    for staging in plan.staging:
        table = copy_table(staging)
        dst, target = table.offsets("dst"), staging.target
        span = staging.nbytes // target.dtype.itemsize
        positions = np.indices(target.shape).reshape(len(target.shape), -1)
        every = np.sort(np.asarray(target.strides, dtype=np.int64) @ positions) if target.shape else np.zeros(1, int)
        assert np.array_equal(np.sort(dst), every) and every[-1] == span - 1   # each element once, in the span
        src_flat, src_base = flat_view(operands[staging.tensor])
        moved = src_flat[src_base + table.offsets("src")]
        copied = _staged_copy(operands[staging.tensor], target)
        assert np.array_equal(flat_view(copied)[0][dst], moved)
        operands[staging.tensor] = copied
    expect = oracle(case, A, B, C)
    execute_reference(plan.staged_plan or plan, case.alpha, operands["A"], operands["B"], case.beta, C, out)
    if case.dtype.startswith("i"):
        assert np.array_equal(out, expect)
    else:
        tol = 1e-5 if case.dtype in ("f32", "c64") else 1e-12
        assert np.all(np.isfinite(out))   # every element written
        np.testing.assert_allclose(out, expect, rtol=tol, atol=tol * max(np.abs(expect).max(initial=0.0), 1.0))


@pytest.mark.parametrize("cid,tensor,kernel", [(20, "A", "copy_runs"), (28, "A", "transpose_tiles"),
                                               (28, "B", "copy_runs")])
def test_copy_kernels_compile(cid, tensor, kernel):
    """Both copy kernels render and compile with NVRTC (no GPU needed), with vectors along the 72-runs."""
    from gett.kernel import build_copy
    staging = next(st for st in tccg_plan(cid).staging if st.tensor == tensor)
    source = render_copy(staging).source
    assert f"gett::{kernel}<" in source
    if kernel == "copy_runs":
        assert ", 8, 4>(src, dst" in source   # 8 halves a vector, 4 vectors in flight a thread
    else:
        assert ", 72, 72, 8, 256, 72, 72," in source   # whole 72 x 72 blocks, 8 halves (16 bytes) an access
    copy = build_copy(staging, "sm_90")
    assert copy.cubin_path.is_file() and copy.cubin_path.stat().st_size > 0


@pytest.mark.parametrize("tensor", ["A", "B"])   # #28: A by transposed blocks, B by runs
def test_copy_stores_ask_the_l2_to_keep_their_lines(tensor):
    """Both copy kernels store with an L2 evict_last policy where the architecture has one (sm_80+): the
    contraction reads the copy next (kernels/copy.cuh, store_global_kept); on sm_75 plain stores."""
    from gett import nvrtc
    from gett.kernel import kernels_dir
    staging = next(st for st in tccg_plan(28).staging if st.tensor == tensor)
    source = render_copy(staging).source
    ptx = {arch: nvrtc.compile_ptx(source, arch=arch, include_dirs=[str(kernels_dir())])
           for arch in ("sm_90", "sm_75")}
    assert "createpolicy.fractional.L2::evict_last" in ptx["sm_90"]
    assert "st.global.L2::cache_hint.v4" in ptx["sm_90"]
    assert "cache_hint" not in ptx["sm_75"] and "st.global.v4" in ptx["sm_75"]


def test_transposed_blocks_span_the_destination_runs_where_blocks_remain_enough():
    """A transposing copy's block takes all of the destination's stride-1 mode (Q) where that fits 40 KB
    beside the source side's 64 and the copy keeps 256 blocks: #14's A, 312 planes of 312 x 312, is
    written in whole runs of a. A copy those sides leave with fewer than 256 blocks takes sides of 16, or 32
    where 16 would make more than one wave of blocks (1024): #17's B, one 296 x 312 plane, in 380 blocks
    instead of 25 (5 whole ones ran slower still); #19's B, 72 planes of 72 x 72, in 360 blocks of 72 x 16
    instead of 72 whole."""
    from gett.staging import _tile_sides
    assert _tile_sides(312, 312, 312, 2) == (312, 64)
    assert _tile_sides(296, 312, 1, 2) == (16, 16)
    assert _tile_sides(312, 312, 312, 4) == (32, 32)     # f32: 312 x 33 x 4 bytes is over 40 KB
    assert _tile_sides(72, 72, 5184, 2) == (72, 72)      # whole 72s either way
    assert _tile_sides(72, 72, 72, 2) == (72, 16)        # 72 x 5 blocks of 16: enough to span Q whole
    # eight such planes as #17's: 200 blocks, but 16 x 16 would be 3040 (several waves): 32 x 32, 800 blocks
    assert _tile_sides(296, 312, 8, 2) == (32, 32)
    assert _tile_sides(296, 312, 64, 2) == (296, 64)     # 320 blocks, Q whole: as it was
    staging = next(st for st in tccg_plan(14).staging if st.tensor == "A")
    assert "gett::transpose_tiles<__half, Acc, Op, Index, Offset, 312, 64, 8, 256, 312, 312," in \
        render_copy(staging).source.replace("\n", "")


def test_copy_of_a_large_tensor_uses_64_bit_offsets():
    big = D((70000, 40000), (40000, 1), "f16")          # 2.8e9 elements, K-major: past 32-bit indices
    plan = gett.plan_contraction(big, "ak", D((40000, 8), None, "f16"), "kn", D((70000, 8), None, "f16"), "an",
                                 staging=True)
    assert choose_staging(plan, force=True) == plan.staging
    source = render_copy(next(s for s in plan.staging if s.tensor == "A")).source
    assert "using Offset = long long;" in source and "using Index = long long;" in source


def leaky(x):
    return x if x > 0 else 0.01 * x


def tccg_fused_staging(cid: int, dtype: str = "f16") -> dict:
    """{tensor: (order, has op)} of the staged copies of TCCG ``cid`` with leaky ReLU on A, B and C."""
    plan = tccg_plan(cid, dtype, op_a=leaky, op_b=leaky, op_c=leaky)
    return {st.tensor: ("".join(st.order), st.op is not None) for st in plan.staging}


@pytest.mark.parametrize("cid,dtype,expect", [
    # compute-bound: both op'd operands copied, also where their layouts are already dense (#12)
    (12, "f16", {"A": ("ac", True), "B": ("cb", True)}),
    (20, "f32", {"A": ("abef", True), "B": ("dcef", True)}),    # SIMT: staged for the op alone
    (21, "f16", {"A": ("abfe", True), "B": ("fecd", True)}),    # staged for the layout, the copy takes the op
    # small operands that fill whole tiles, read by hundreds of tiles: B (296 x 312) of #15, A of #16
    (15, "f16", {"B": ("db", True)}), (16, "f16", {"A": ("ad", True)}), (17, "f32", {"B": ("bd", True)}),
    # not staged: narrower than a tile (#9's 72 x 72 A, #1's 24 x 312 B), both large and memory-bound
    # (#13), small but shared by few tiles (#31, #40: K = 24)
    (9, "f16", {}), (1, "f16", {}), (13, "f16", {}), (31, "f16", {}),
    # staged for its layout (a K conflict), the copy takes the op; B keeps its op in the kernel
    (14, "f16", {"A": ("dca", True)}),
    # staged for its layout (small, across A's rows), the copy takes the op; A keeps its op in the kernel
    (19, "f16", {"B": ("deb", True)}),
    (40, "f16", {}),
])
def test_tccg_op_staging_choices(cid, dtype, expect):
    assert tccg_fused_staging(cid, dtype) == expect


def test_op_staging_needs_the_op():
    """Without ops #12 and #15 stage nothing; op_b alone stages only B; the staged plan keeps op_a."""
    assert tccg_plan(12).staging == () and tccg_plan(15).staging == ()
    plan = tccg_plan(12, op_b=leaky)
    assert [(st.tensor, st.op is not None) for st in plan.staging] == [("B", True)]
    assert plan.staged_plan.ops.op_b is None
    plan = tccg_plan(15, op_a=leaky, op_b=leaky)
    assert plan.staged_plan.ops.op_a is not None and plan.staged_plan.ops.op_b is None
    assert tccg_plan(15, op_b=leaky, staging=False).staging == ()


def test_staged_copies_apply_the_operand_ops():
    """op_a/op_b move into the copies (the staged plan has none); the staged plan on op'd copies equals
    the plan with the ops, through the reference executor, and numpy in float64."""
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((7, 5, 6)).transpose(2, 0, 1), rng.standard_normal((5, 9, 6))   # A k-fast
    C = rng.standard_normal((7, 9))
    plan = gett.plan_contraction(A, "kmc", B, "cnk", C, "mn", op_a=leaky, op_b=abs, op_c=leaky, staging=True)
    assert {s.tensor for s in plan.staging} == {"A", "B"}
    assert all(s.op is not None for s in plan.staging)
    inner = plan.staged_plan
    assert inner.ops.op_a is None and inner.ops.op_b is None and inner.ops.op_c is not None
    copies = {s.tensor: _staged_copy(s.op.evaluate({"A": A, "B": B}[s.tensor]), s.target) for s in plan.staging}
    got = np.full(C.shape, np.nan)
    execute_reference(inner, 2.0, copies["A"], copies["B"], 0.5, C, got)
    la, lb = np.where(A > 0, A, 0.01 * A), np.abs(B)
    expect = 2.0 * np.einsum("kmc,cnk->mn", la, lb) + 0.5 * np.where(C > 0, C, 0.01 * C)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)
    assert "#include \"elementwise.cuh\"" in render_copy(plan.staging[0]).source


def row_major(shape, dtype):
    strides, step = [], 1
    for e in reversed(shape):
        strides.append(step)
        step *= e
    return gett.TensorDescriptor(shape, tuple(reversed(strides)), dtype)


def test_unaligned_16_bit_operands_are_copied_into_padded_runs():
    """Row-major f16 matrices with odd row lengths load one element at a time: a GEMM copies them in
    their own order with each row padded to 128 bytes (16 where that would add over an eighth), and its kernel
    then loads 16-byte vectors (wgmma); so does a view one element into its rows (a 2-byte aligned pointer);
    not f32 (asynchronous scalars), tiny GEMMs, thin ones, matrix-vector products, aligned rows, or rows whose pairs
    are aligned (4-byte copies already: a row length of 778, or runs of 36 and 28 in 'abcd,dcef->fabe')."""
    def plan(m, n, k, dtype="f16", **kw):
        return gett.plan_contraction(row_major((m, k), dtype), "mk", row_major((k, n), dtype), "kn",
                                     row_major((m, n), dtype), "mn", **kw)
    p = plan(4095, 129, 777)   # A's rows in whole lines (777 -> 832), B's in whole vectors (129 -> 136, not 192)
    assert [(st.tensor, st.order, st.target.strides) for st in p.staging] == [("A", ("k", "m"), (832, 1)),
                                                                                ("B", ("n", "k"), (136, 1))]
    assert p.staging[0].nbytes == (4094 * 832 + 777) * 2   # the span, padding between rows included
    assert p.staged_plan.kernel("sm_90").config.math == "wgmma"
    assert [st.tensor for st in plan(1001, 1001, 1001, dtype="bf16").staging] == ["A", "B"]
    assert [st.tensor for st in plan(255, 255, 255).staging] == ["A", "B"]   # 18.9 -> 11.6 us on an H100
    assert plan(8191, 33, 1001).staging == ()   # 32 flops a byte: 30.6 -> 35.3 us with the copies
    for small_or_aligned in (plan(127, 127, 127), plan(300, 300, 300), plan(4095, 129, 777, dtype="f32"),
                             plan(8191, 1, 8191), plan(4096, 128, 776), plan(4095, 129, 777, staging=False),
                             plan(4095, 130, 778)):
        assert small_or_aligned.staging == ()
    shifted = gett.TensorDescriptor((777, 263), (264, 1), "f16", alignment=2)   # x[:, 1:] of 264 columns
    p = gett.plan_contraction(row_major((1001, 777), "f16"), "mk", shifted, "kn", row_major((1001, 263), "f32"), "mn")
    assert [(st.tensor, st.target.strides) for st in p.staging] == [("A", (832, 1)), ("B", (264, 1))]
    ext = dict(a=24, b=48, c=40, d=36, e=20, f=28)
    d = {t: row_major(tuple(ext[x] for x in t), "f16") for t in ("abcd", "dcef", "fabe")}
    assert gett.plan_contraction(d["abcd"], "abcd", d["dcef"], "dcef", d["fabe"], "fabe").staging == ()


def test_padded_copy_kernels_compile():
    """A copy into padded runs writes through the destination's table; a dense one keeps linear stores."""
    from gett.kernel import build_copy
    p = gett.plan_contraction(row_major((4095, 777), "f16"), "mk", row_major((777, 129), "f16"), "kn",
                              row_major((4095, 129), "f16"), "mn")
    source = render_copy(p.staging[0]).source
    assert "gett::copy_runs<" in source and source.count("gett::Table<Offset") == 2
    assert build_copy(p.staging[0], "sm_90").cubin_path.is_file()
    assert render_copy(tccg_plan(28).staging[1]).source.count("gett::Table<Offset") == 1


def test_unaligned_copies_through_the_reference_executor(monkeypatch):
    """A small unaligned f16 GEMM (the size rules switched off) staged into padded runs, run by the reference
    executor over the copies, equals numpy.einsum in float64."""
    monkeypatch.setattr(gett.staging, "ALIGN_MIN_FLOPS", 0)
    monkeypatch.setattr(gett.staging, "ALIGN_MIN_INTENSITY", 0)
    rng = np.random.default_rng(50)
    A = rng.standard_normal((37, 45)).astype(np.float16)
    B = rng.standard_normal((45, 29)).astype(np.float16)
    out = np.full((37, 29), np.nan, np.float16)
    plan = gett.plan_contraction(A, "mk", B, "kn", out, "mn", beta=0)
    assert [(st.tensor, st.target.strides) for st in plan.staging] == [("A", (48, 1)), ("B", (32, 1))]   # 16 bytes
    copies = {st.tensor: _staged_copy({"A": A, "B": B}[st.tensor], st.target) for st in plan.staging}
    execute_reference(plan.staged_plan, 1.0, copies["A"], copies["B"], 0.0, out, out)
    expect = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), expect, rtol=3e-3, atol=3e-3)
