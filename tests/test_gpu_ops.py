"""Fused elementwise ops and custom semirings on the GPU, against numpy in float64.

Unary ops (ELU, leaky ReLU, GELU-tanh) on A, B, C and the output, one at a time and all four at
once, for f16 data with f32 output (tensor cores), f32 (SIMT) and f64 (DMMA); beta != 0 so op_c
matters; D poisoned with NaN; transposed, strided and reversed views with odd extents. Max-plus and
min-plus on f32 and int32 (SIMT path, K padding masked) against explicit loops. Long K over a
small output makes the planner split K, so the split-K reduction is covered too. 57 kernels in all.

Tolerances (relative Frobenius): f16 data 2e-3 — the oracle applies the op in float64 to the
values f16 really holds; the kernel applies it in f32 and stores op(x) in f16 in shared memory, so
each transformed element is rounded once more (about 2e-4 relative on these sums, measured on
an H100); f32 1e-5; f64 1e-12; integers exact. Where op_out is ill-conditioned in f32 — GELU-tanh on
sums mostly below -2, where 1 + tanh(y) cancels — twice the error of numpy's float32 evaluation of
the same op on the exact sums is added to the f16/f32 bound (1e-4 for the f32 "all" case, whose
kernel error is 5e-5; ~1e-8 everywhere else).
"""
import math
import zlib

import numpy as np
import pytest

import gett
from cases import Case, buffer_size, make_view
from gett import ops
from test_ops_reference import ROLES, UNARY, apply_oracle, semiring_oracle

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32}
# data dtype -> (output dtype, tolerance)
PATHS = {"f16": ("f32", 2e-3), "f32": ("f32", 1e-5), "f64": ("f64", 1e-12)}

# Contractions for the unary ops: (modes A, B, C, extents, layouts per tensor as (perm, steps, flips)).
# perm is the memory order (last = stride 1); steps > 1 make strided views, flips reversed ones.
CONTRACTIONS = {
    # plain row-major GEMM, K contiguous and a multiple of 8: the 16-byte vector loads with an op
    "gemm": ("mk", "kn", "mn", {"m": 96, "n": 64, "k": 40},
             {"A": ((0, 1), (1, 1), (False, False)), "B": ((0, 1), (1, 1), (False, False)),
              "C": ((0, 1), (1, 1), (False, False))}),
    # transposed A and B, strided and reversed, odd extents (K = 37)
    "transposed": ("ka", "bk", "ab", {"a": 45, "b": 23, "k": 37},
                   {"A": ((1, 0), (2, 1), (True, False)), "B": ((1, 0), (1, 2), (False, True)),
                    "C": ((1, 0), (1, 1), (False, False))}),
    # a batch mode, C permuted and strided
    "batched": ("lak", "lkb", "bla", {"l": 3, "a": 17, "k": 29, "b": 31},
                {"A": ((0, 2, 1), (1, 1, 1), (False, False, True)), "B": ((2, 0, 1), (1, 2, 1), (False, False, False)),
                 "C": ((1, 0, 2), (2, 1, 1), (False, False, False))}),
    # two M/N/K modes each side, K = 37 * 3 spread over the tensors
    "multi": ("cae", "ebdc", "bad", {"a": 13, "b": 7, "c": 37, "d": 5, "e": 3},
              {"A": ((2, 0, 1), (1, 2, 1), (False, True, False)),
               "B": ((1, 3, 0, 2), (1, 1, 2, 1), (True, False, False, True)),
               "C": ((2, 1, 0), (1, 2, 1), (False, False, False))}),
    # K of three modes (693) and a small output: split-K, the epilogue (op_c, op_out) in the reduction
    "deep": ("mpqr", "rnpq", "nm", {"m": 33, "n": 19, "p": 9, "q": 7, "r": 11},
             {"A": ((1, 2, 0, 3), (1, 1, 1, 1), (False, False, True, False)),
              "B": ((1, 0, 3, 2), (1, 2, 1, 1), (False, False, False, False)),
              "C": ((1, 0), (1, 1), (False, False))}),
}
# which ops each contraction carries: one role each, then all four together
ROLE_SETS = {"op_a": ("gemm", ("op_a",)), "op_b": ("transposed", ("op_b",)), "op_c": ("batched", ("op_c",)),
             "op_out": ("multi", ("op_out",)), "all": ("deep", ROLES)}


def host_and_device(rng, shape, layout, dtype, values=None):
    """The same logical tensor as a numpy view and a CuPy view of the same layout."""
    n = buffer_size(shape, layout)
    vals = (rng.uniform(-2, 2, n) if values is None else values(n)).astype(NP[dtype])
    return make_view(np, vals, shape, layout), make_view(cp, vals, shape, layout)


def poisoned_output(shape, layout, dtype):
    fill = np.iinfo(NP[dtype]).min if dtype[0] == "i" else np.nan
    return make_view(cp, np.full(buffer_size(shape, layout), fill, NP[dtype]), shape, layout)


def relative_error(got, expect):
    assert np.all(np.isfinite(got)), f"{np.sum(~np.isfinite(got))} of {got.size} outputs not written"
    return np.linalg.norm((got.astype(np.float64) - expect).ravel()) / (np.linalg.norm(expect.ravel()) or 1.0)


def output_op_f32_error(case, host, chosen, numpy_op):
    """Relative error of op_out evaluated by numpy in float32 (the compute type of f16 and f32 data) on
    the exact float64 sums: no f32 kernel can do much better. It is ~1e-8 but for GELU-tanh on sums that
    are mostly well below 0, where 1 + tanh cancels (1e-4 in the "all" case)."""
    if case.dtype == "f64" or "op_out" not in chosen:
        return 0.0
    pre = apply_oracle(case, host["A"], host["B"], host["C"], {r: numpy_op for r in chosen if r != "op_out"})
    exact = numpy_op(pre)
    return np.linalg.norm((numpy_op(pre.astype(np.float32)) - exact).ravel()) / np.linalg.norm(exact.ravel())


@pytest.mark.parametrize("roles", list(ROLE_SETS))
@pytest.mark.parametrize("op", ["elu", "leaky", "gelu"])
@pytest.mark.parametrize("dtype", list(PATHS))
def test_fused_unary_ops(dtype, op, roles):
    name, chosen = ROLE_SETS[roles]
    modes_A, modes_B, modes_C, extents, layouts = CONTRACTIONS[name]
    out, tol = PATHS[dtype]
    k = math.prod(e for m, e in extents.items() if m not in modes_C)
    # alpha ~ 1/sqrt(K) keeps the sums O(1) and of both signs, where GELU and ELU on the output bend
    alpha, beta = (-1.5 / math.sqrt(k), 0.5) if dtype != "f64" else (1.25 / math.sqrt(k), -0.5)
    case = Case(modes_A, modes_B, modes_C, extents, layouts, dtype, out, (), alpha, beta)
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{op}-{roles}".encode()))
    host, dev = {}, {}
    for t in "ABC":
        host[t], dev[t] = host_and_device(rng, case.shape(t), layouts[t], dtype if t != "C" else out)
    D = poisoned_output(case.shape("C"), layouts["C"], out)
    gett_op, numpy_op = UNARY[op]
    plan = gett.plan_contraction(dev["A"], modes_A, dev["B"], modes_B, dev["C"], modes_C, D=D,
                                 beta=beta, **{r: gett_op for r in chosen})
    gett.contract(plan, alpha, dev["A"], dev["B"], beta, dev["C"], D)
    expect = apply_oracle(case, host["A"], host["B"], host["C"], {r: numpy_op for r in chosen})
    err = relative_error(cp.asnumpy(D), expect)
    bound = tol + 2 * output_op_f32_error(case, host, chosen, numpy_op)
    assert err <= bound, f"relative error {err:.2e} > {bound:.1e} ({plan.kernel().config.key()})"
    # an op that were dropped would be noticed: without it the result is far off
    plain = apply_oracle(case, host["A"], host["B"], host["C"], {})
    assert np.linalg.norm((plain - expect).ravel()) / np.linalg.norm(expect.ravel()) > 10 * tol


SEMIRING_CONTRACTIONS = {
    # K = 67: not a multiple of the K tile, padding must stay out of the reduction
    "transposed": ("km", "nk", "nm", {"m": 45, "n": 23, "k": 67},
                   {"A": ((0, 1), (1, 2), (False, False)), "B": ((1, 0), (1, 1), (True, False)),
                    "C": ((1, 0), (1, 1), (False, False))}),
    # K = 1003 over one output tile: split-K, the partials reduced with the semiring's add
    "long-k": ("mk", "kn", "mn", {"m": 40, "n": 24, "k": 1003},
               {"A": ((1, 0), (1, 1), (False, False)), "B": ((0, 1), (1, 1), (True, False)),
                "C": ((0, 1), (1, 1), (False, False))}),
    "batched": ("lak", "lkb", "lba", {"l": 3, "a": 33, "k": 37, "b": 20},
                {"A": ((0, 2, 1), (1, 1, 1), (False, True, False)), "B": ((0, 1, 2), (1, 1, 2), (False, False, False)),
                 "C": ((0, 2, 1), (1, 1, 1), (False, False, False))}),
}
SEMIRINGS = {"max-plus": (ops.MAX_PLUS, np.maximum), "min-plus": (ops.MIN_PLUS, np.minimum)}


@pytest.mark.parametrize("name", list(SEMIRING_CONTRACTIONS))
@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_semirings(dtype, semiring, name):
    """Max-plus over negative values and min-plus over positive ones: a zero-filled K padding that
    entered the reduction would win and show."""
    modes_A, modes_B, modes_C, extents, layouts = SEMIRING_CONTRACTIONS[name]
    sr, add = SEMIRINGS[semiring]
    sign = -1 if semiring == "max-plus" else 1
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{semiring}-{name}".encode()))
    if dtype == "i32":
        values = lambda n: sign * rng.integers(1, 1000, n)   # noqa: E731
        alpha, beta = 2, -1
    else:
        values = lambda n: sign * rng.uniform(0.25, 4, n)   # noqa: E731
        alpha, beta = 1.5, -0.25
    case = Case(modes_A, modes_B, modes_C, extents, layouts, dtype, dtype, (), alpha, beta)
    host, dev = {}, {}
    for t in "ABC":
        host[t], dev[t] = host_and_device(rng, case.shape(t), layouts[t], dtype, values)
    D = poisoned_output(case.shape("C"), layouts["C"], dtype)
    plan = gett.plan_contraction(dev["A"], modes_A, dev["B"], modes_B, dev["C"], modes_C, D=D,
                                 op_ab=sr.multiply, reduce=(sr.add, sr.identity))
    assert plan.kernel().config.math == "simt"
    gett.contract(plan, alpha, dev["A"], dev["B"], beta, dev["C"], D)
    wide = np.int64 if dtype == "i32" else np.float64
    r = semiring_oracle(modes_A, host["A"].astype(wide), modes_B, host["B"].astype(wide), modes_C,
                        np.add, add, sr.identity_for(wide))
    expect = alpha * r + beta * host["C"].astype(wide)
    got = cp.asnumpy(D)
    if dtype == "i32":
        assert np.array_equal(got, expect.astype(np.int32)), f"{np.sum(got != expect)} of {got.size} differ"
    else:
        err = relative_error(got, expect)
        assert err <= 1e-5, f"relative error {err:.2e} > 1e-5"


@pytest.mark.parametrize("dtype,op_a,op_b,tma", [
    ("f16", "leaky", "elu", True),               # both keep 0: the TMA loads, the math threads apply them
    ("bf16", "leaky", "elu", True),
    ("f16", "leaky", "shift", False),            # op_b(0) != 0: a cp.async producer applies the ops
])
def test_ops_on_tiles_a_tma_producer_loads(dtype, op_a, op_b, tma):
    """A warp-specialised wgmma kernel (128 x 128 s4, f16 or bf16 through torch, A and B K-major) with ops
    on A and B, K = 200 (its last K tile three quarters past the end: the TMA's zero fill, which the op must
    leave 0) and M, N not multiples of the tile; beta 0.5. D poisoned with NaN, against numpy in float64 on
    the values the 16-bit inputs hold."""
    torch = pytest.importorskip("torch")
    from gett.config import KernelConfig
    from gett.kernel import current_arch
    if current_arch() != "sm_90":
        pytest.skip("wgmma and the TMA need sm_90")
    fns = {"leaky": (ops.leaky_relu(0.01), lambda x: np.where(x > 0, x, 0.01 * x)),
           "elu": (ops.elu(1.0), lambda x: np.where(x > 0, x, np.expm1(x))),
           "shift": (lambda x: x + 0.25, lambda x: x + 0.25)}
    m, n, k = 300, 200, 200
    gen = torch.Generator(device="cuda").manual_seed(k)
    kind = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b, c = (torch.rand(s, device="cuda", generator=gen, dtype=torch.float64).mul(4).sub(2).to(kind)
               for s in ((m, k), (n, k), (m, n)))
    D = torch.full((m, n), float("nan"), device="cuda", dtype=kind)
    cfg = KernelConfig("wgmma", 128, 128, 64, 4, ws=True)
    plan = gett.plan_contraction(a, "mk", b, "nk", c, "mn", D=D, beta=0.5, config=cfg,
                                 op_a=fns[op_a][0], op_b=fns[op_b][0])
    kernel = plan.kernel()
    assert kernel.config == cfg and bool(kernel.tma) == tma
    gett.contract(plan, 1.0, a, b, 0.5, c, D)
    a64, b64, c64 = (x.double().cpu().numpy() for x in (a, b, c))
    expect = fns[op_a][1](a64) @ fns[op_b][1](b64).T + 0.5 * c64
    tol = 2e-3 if dtype == "f16" else 1e-2   # bf16 keeps 8 bits: the op's output rounded once more
    assert relative_error(D.double().cpu().numpy(), expect) < tol
