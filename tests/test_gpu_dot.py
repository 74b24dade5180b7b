"""The dot kernel (kernels/dot.cuh) on the GPU against numpy in float64: dot products, row-wise dots and
small output tiles over a long K, in every dtype, over permuted, strided and reversed views, with K split
or not, alpha and beta, a semiring and fused ops; D poisoned with NaN before each run."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gett
from cases import Case, layouts, random_values
from gett.config import KernelConfig, output_tiles
from gett.launch import launcher

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
from test_gpu_kernels import PATHS, check, run_case   # noqa: E402 (after the skip: it needs CuPy)

# (modes of A, B, C; extents): M x N of at most 16 over K of 256 or more (the heuristic's dot kernel)
SHAPES = [
    ("k", "k", "", {"k": 5000}),
    ("lk", "kl", "l", {"l": 37, "k": 700}),
    ("mk", "nk", "mn", {"m": 3, "n": 4, "k": 1000}),
    ("kjm", "jkn", "nm", {"k": 31, "j": 17, "m": 2, "n": 8}),
    ("lkm", "kl", "ml", {"l": 3, "m": 5, "k": 300}),
    ("mk", "k", "m", {"m": 13, "k": 2000}),
    ("k", "k", "", {"k": 65539}),   # odd: scalar loads
    ("kl", "kl", "l", {"k": 600, "l": 300}),   # in row-major order the batch is stride-1: a thread a row
]


@st.composite
def dot_cases(draw, dtype, out):
    a, b, c, extents = draw(st.sampled_from(SHAPES))
    lay = {t: draw(layouts(len(modes), allow_flip=(t != "C"))) for t, modes in zip("ABC", (a, b, c))}
    alpha, beta = draw(st.sampled_from((1.0, 2.0, -0.75))), draw(st.sampled_from((0.0, 0.0, 1.0, -0.5)))
    if dtype[0] == "i":
        alpha, beta = float(int(alpha) or 1), float(int(beta))
    return Case(a, b, c, dict(extents), lay, dtype, out, (), alpha, beta)


def dot_configs(case):
    """The heuristic's choice (None) and three forced ones: 64 threads a tile (two tiles a CTA) with K split
    three ways, one warp a tile (four a CTA), one thread a tile (128 a CTA) with K split."""
    m = int(np.prod([case.extents[x] for x in case.modes_A if x in case.modes_C and x not in case.modes_B]))
    n = int(np.prod([case.extents[x] for x in case.modes_B if x in case.modes_C and x not in case.modes_A]))
    bm, bn = (next(t for t in (1, 2, 4, 8, 16) if t >= e) for e in (m, n))
    k = int(np.prod([case.extents[x] for x in case.modes_A if x in case.modes_B and x not in case.modes_C]))
    # a thread a tile adds its K range in one chain: split it as the heuristic does, to a few hundred terms
    # (a chain of 32768 f32 products of a dot product left a relative error of 1.3e-4 in one run)
    return [None, KernelConfig("dot", bm, bn, 64, 1, split_k=3), KernelConfig("dot", bm, bn, 32, 1),
            KernelConfig("dot", bm, bn, 1, 1, split_k=min(128, max(2, k // 256)))]


@pytest.mark.parametrize("path", [p for p in PATHS if p[2] != "3xtf32"], ids=lambda p: "-".join(x or "default" for x in p))
def test_dot_kernel_matches_numpy(path):
    dtype, out, compute = path

    @settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(case=dot_cases(dtype, out), seed=st.integers(0, 2**31))
    def inner(case, seed):
        if dtype == "bf16":   # torch views cannot have negative steps
            case.layouts = {t: (p, s, tuple(False for _ in f)) for t, (p, s, f) in case.layouts.items()}
        for config in dot_configs(case):
            plan, got, expect = run_case(case, compute, seed, config=config)
            kernel_plan = plan.staged_plan or plan
            cfg = kernel_plan.kernel().config
            assert cfg.math == "dot"
            if dtype != "bf16":   # one CTA a split per tiles_per_cta output tiles
                grid = launcher(kernel_plan, cp.cuda.Device().id, "cupy")._grid[0]
                assert grid == -(-output_tiles(kernel_plan, cfg) // cfg.tiles_per_cta) * cfg.split_k
            try:
                check(case, got, expect, PATHS[path])
            except AssertionError as e:
                raise AssertionError(f"{cfg.key()}: {e}") from None
    inner()


def test_a_dot_product_of_16_million_halves_splits_k_and_is_deterministic():
    rng = np.random.default_rng(1)
    a, b = (random_values(rng, 1 << 24, "f32") for _ in "ab")
    A, B = cp.asarray(a, cp.float16), cp.asarray(b, cp.float16)
    plan = gett.plan_contraction(A, "k", B, "k", cp.zeros((), cp.float32), "")
    assert plan.kernel().config.split_k > 1
    outs = []
    for _ in range(2):
        D = cp.full((), cp.nan, cp.float32)
        gett.contract(plan, 1.0, A, B, 0.0, cp.zeros((), cp.float32), D)
        outs.append(float(D))
    expect = float(np.dot(cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64)))
    assert outs[0] == outs[1]
    assert abs(outs[0] - expect) <= 1e-4 * np.sqrt(1 << 24)


def test_row_wise_max_plus_with_fused_ops():
    """max_k (leaky(A[l,k]) + B[l,k]), then sigmoid, and a row-wise dot through gett.einsum."""
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (40, 3000)).astype(np.float32)
    b = rng.uniform(-1, 1, (40, 3000)).astype(np.float32)
    A, B = cp.asarray(a), cp.asarray(b)
    C, D = cp.zeros(40, cp.float32), cp.full(40, cp.nan, cp.float32)
    plan = gett.plan_contraction(A, "lk", B, "lk", C, "l", op_a=lambda x: x if x > 0 else 0.01 * x,
                                 op_ab=lambda x, y: x + y, reduce=(max, -np.inf), op_out=gett.ops.sigmoid)
    assert plan.kernel().config.math == "dot"
    gett.contract(plan, 1.0, A, B, 0.0, C, D)
    leaky = np.where(a > 0, a, 0.01 * a).astype(np.float64)
    expect = 1 / (1 + np.exp(-np.max(leaky + b, axis=1)))
    np.testing.assert_allclose(cp.asnumpy(D), expect, rtol=1e-5)
    rows = gett.einsum("lk,lk->l", A, B)
    np.testing.assert_allclose(cp.asnumpy(rows), np.einsum("lk,lk->l", a.astype(np.float64), b), rtol=1e-4)


@pytest.mark.parametrize("m, k, dtype, padded", [
    (1001, 700, "float16", False),   # M past its last 4-row tile
    (8192, 4096, "float16", True),   # rows 4104 elements apart (a column slice)
    (999, 516, "float32", False),    # K past its last 256-thread step
    (64, 100000, "float16", False),  # 16 tiles: K split
    (999, 513, "float32", False),    # an odd K: no vectors, so a GEMM tile
])
def test_a_matrix_vector_product_runs_the_dot_kernel_over_row_tiles(m, k, dtype, padded):
    """``mk,k->m`` with K stride-1 in A and x, in vectors: the dot kernel in tiles of 4 rows (config.GEMV_ROWS)
    over M, against numpy in float64; y poisoned with NaN."""
    rng = np.random.default_rng(m + k)
    a = rng.uniform(-1, 1, (m, k + 8 if padded else k)).astype(dtype)
    x = rng.uniform(-1, 1, k).astype(dtype)
    A = cp.asarray(a)[:, :k]
    X = cp.asarray(x)
    Y = cp.full(m, cp.nan, dtype=dtype)
    plan = gett.plan_contraction(A, "mk", X, "k", Y, "m", beta=0.0)
    cfg = plan.kernel().config
    if k % 2:
        assert cfg.math != "dot"
    else:
        assert (cfg.math, cfg.bm, cfg.bn) == ("dot", 4, 1)
        assert (cfg.split_k > 1) == (m == 64)
    gett.contract(plan, 1.0, A, X, 0.0, Y, Y)
    expect = a[:, :k].astype(np.float64) @ x.astype(np.float64)
    got = cp.asnumpy(Y).astype(np.float64)
    tol = 2e-3 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(got, expect, rtol=tol, atol=tol * np.sqrt(k))
