"""Fused elementwise ops and custom semirings on the CPU.

The reference executor (``gett.contract`` on numpy arrays, which evaluates the plan's translated
expression trees) against an independent oracle: numpy.einsum in float64 on inputs transformed by
numpy versions of the ops written out here, or explicit broadcast-and-reduce loops for semirings.
Also: the plan cache keys ops by what they compute (equal lambdas share a plan, different captured
constants do not, a gett.ops op equals the lambda it stands for), errors for bad op arguments, and
the rendered and compiled (NVRTC, no GPU needed) semiring identities.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gett
from cases import build_host_arrays, contractions, oracle
from gett import ops
from gett.codegen import render_kernel
from gett.config import default_config
from gett.errors import UnsupportedOperation

# ---- the ops, written independently of gett (numpy, float64) -------------------------------------


def np_elu(alpha):
    return lambda x: np.where(x > 0, x, alpha * np.expm1(x))


def np_leaky(alpha):
    return lambda x: np.where(x > 0, x, alpha * x)


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# name -> (op given to gett, its numpy oracle)
UNARY = {
    "elu": (ops.elu(1.0), np_elu(1.0)),
    "elu0.5": (lambda x: x if x > 0 else 0.5 * np.expm1(x), np_elu(0.5)),
    "leaky": (ops.leaky_relu(0.01), np_leaky(0.01)),
    "leaky0.2": (lambda x: max(x, 0.2 * x), np_leaky(0.2)),
    "gelu": (ops.gelu_tanh, np_gelu_tanh),
}
ROLES = ("op_a", "op_b", "op_c", "op_out")


def apply_oracle(case, A, B, C, numpy_ops):
    """einsum in float64 of the op-transformed inputs, then op_out (``numpy_ops``: role -> function)."""
    ident = lambda x: x   # noqa: E731
    f = {r: numpy_ops.get(r) or ident for r in ROLES}
    wide = lambda x: np.asarray(x, dtype=np.float64)   # noqa: E731
    return f["op_out"](oracle(case, f["op_a"](wide(A)), f["op_b"](wide(B)), f["op_c"](wide(C))))


TOL = {"f16": 1e-6, "f32": 1e-6, "f64": 1e-12}   # the reference works in float64 whatever the data


def assert_close(got, expect, dtype):
    tol = TOL[dtype]
    assert np.all(np.isfinite(got)), f"{np.sum(~np.isfinite(got))} of {got.size} outputs not written"
    # the result is rounded to D's dtype once: that is all the difference from a float64 oracle
    rounding = np.finfo(got.dtype).eps if got.dtype != np.float64 else 0.0
    scale = max(np.abs(expect).max(initial=0.0), 1.0)
    np.testing.assert_allclose(got, expect, rtol=tol + rounding, atol=(tol + rounding) * scale)


def run_reference(case, arrays, **op_kwargs):
    A, B, C = (arrays[t][0] for t in "ABC")
    D = np.full(C.shape, np.nan, dtype=C.dtype)
    plan = gett.plan_contraction(A, case.modes_A, B, case.modes_B, C, case.modes_C, D=D,
                                 broadcast=case.broadcast, **op_kwargs)
    gett.contract(plan, case.alpha, A, B, case.beta, C, D)
    return D


# ---- unary ops on A, B, C and the output ---------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", ["elu", "leaky", "gelu"])
def test_unary_op_on_each_tensor(name, role, dtype):
    """One op on one of A, B, C, out: a transposed/strided contraction with odd extents, beta != 0."""
    from cases import Case
    extents = {"a": 13, "b": 7, "c": 37, "d": 5, "e": 3}
    # D[b a d] = sum_{c e} A[c a e] B[e b d c]: M = {a}, N = {b, d}, K = {c, e} (K = 111)
    layouts = {"A": ((2, 0, 1), (1, 2, 1), (False, True, False)),
               "B": ((1, 3, 0, 2), (1, 1, 2, 1), (True, False, False, True)),
               "C": ((2, 1, 0), (1, 2, 1), (False, False, False))}
    out = "f32" if dtype == "f16" else dtype
    case = Case("cae", "ebdc", "bad", extents, layouts, dtype, out, (), -0.75, 0.5)
    arrays = build_host_arrays(case, np.random.default_rng(7))
    op, np_op = UNARY[name]
    got = run_reference(case, arrays, **{role: op})
    expect = apply_oracle(case, *(arrays[t][0] for t in "ABC"), {role: np_op})
    assert_close(got, expect, dtype)
    # the op changes the result: the test would notice an op that is ignored
    plain = apply_oracle(case, *(arrays[t][0] for t in "ABC"), {})
    assert not np.allclose(plain, expect, rtol=1e-3, atol=1e-3)


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=contractions(dtypes=("f16", "f32", "f64"), max_elements=4000,
                         out_dtypes={"f16": ("f16", "f32"), "f32": ("f32",), "f64": ("f64",)}),
       chosen=st.fixed_dictionaries({r: st.sampled_from([None, *UNARY]) for r in ROLES}),
       seed=st.integers(0, 2**32 - 1))
def test_random_contractions_with_random_ops(case, chosen, seed):
    """Every mode class (L, summed in one input, broadcast), views with steps and flips, any ops."""
    arrays = build_host_arrays(case, np.random.default_rng(seed))
    got = run_reference(case, arrays, **{r: UNARY[n][0] for r, n in chosen.items() if n})
    expect = apply_oracle(case, *(arrays[t][0] for t in "ABC"),
                          {r: UNARY[n][1] for r, n in chosen.items() if n})
    if got.dtype == np.float16:   # rounded once to f16, where values may be large
        np.testing.assert_allclose(got, expect, rtol=1e-3, atol=1e-3 * max(np.abs(expect).max(initial=0), 1))
    else:
        assert_close(got, expect, case.dtype)


def test_op_c_is_not_applied_when_beta_is_zero():
    """beta = 0 never reads C: NaN in C with an op on C leaves D finite."""
    rng = np.random.default_rng(1)
    A, B = rng.uniform(-1, 1, (6, 9)), rng.uniform(-1, 1, (9, 4))
    C, D = np.full((6, 4), np.nan), np.full((6, 4), np.nan)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D, op_c=ops.elu(1.0), op_out=ops.gelu_tanh)
    gett.contract(plan, 2.0, A, B, 0.0, C, D)
    np.testing.assert_allclose(D, np_gelu_tanh(2.0 * A @ B), rtol=1e-12, atol=1e-12)


def test_all_four_ops_together():
    """ELU on A, leaky ReLU on B and C, GELU on the output, all at once (f64, K of three modes = 165)."""
    rng = np.random.default_rng(3)
    A = rng.uniform(-2, 2, (5, 3, 7, 11)).transpose(2, 0, 1, 3)        # "mpqr", a transposed view
    B = rng.uniform(-2, 2, (11, 6, 10, 3))[:, :, ::2]                  # "rnpq", a strided view
    C = rng.uniform(-2, 2, (6, 7)).T                                   # "mn", column-major
    D = np.full(C.shape, np.nan)
    kw = dict(op_a=ops.elu(1.0), op_b=ops.leaky_relu(0.01), op_c=ops.leaky_relu(0.01), op_out=ops.gelu_tanh)
    plan = gett.plan_contraction(A, "mpqr", B, "rnpq", C, "mn", D=D, **kw)
    gett.contract(plan, 1.5, A, B, -0.5, C, D)
    s = np.einsum("mpqr,rnpq->mn", np_elu(1.0)(A), np_leaky(0.01)(B))
    np.testing.assert_allclose(D, np_gelu_tanh(1.5 * s - 0.5 * np_leaky(0.01)(C)), rtol=1e-12, atol=1e-12)


# ---- semirings -----------------------------------------------------------------------------------

def semiring_oracle(modes_A, A, modes_B, B, modes_C, mul, add, identity):
    """Explicit (L, M, K, N) broadcast of mul, reduced over K with ``add`` (a numpy ufunc) from
    ``identity``; modes are classified here, tensors permuted with einsum (no summation)."""
    L = [m for m in modes_C if m in modes_A and m in modes_B]
    M = [m for m in modes_C if m in modes_A and m not in modes_B]
    N = [m for m in modes_C if m in modes_B and m not in modes_A]
    K = [m for m in modes_A if m in modes_B and m not in modes_C]
    ext = {m: s for ms, t in ((modes_A, A), (modes_B, B)) for m, s in zip(ms, t.shape)}
    size = lambda ms: math.prod(ext[m] for m in ms)   # noqa: E731
    a = np.einsum(f"{modes_A}->{''.join(L + M + K)}", A).reshape(size(L), size(M), size(K))
    b = np.einsum(f"{modes_B}->{''.join(L + K + N)}", B).reshape(size(L), size(K), size(N))
    acc = np.full((size(L), size(M), size(N)), identity, dtype=np.result_type(A, B))
    for k in range(size(K)):
        acc = add(acc, mul(a[:, :, k, None], b[:, None, k, :]))
    acc = acc.reshape([ext[m] for m in L + M + N])
    return np.einsum(f"{''.join(L + M + N)}->{modes_C}", acc)


SEMIRINGS = {
    "max-plus": (ops.MAX_PLUS, np.add, np.maximum, -np.inf),
    "min-plus": (ops.MIN_PLUS, np.add, np.minimum, np.inf),
    "max-times": (ops.MAX_TIMES, np.multiply, np.maximum, -np.inf),
}
# (modes A, B, C, extents): K extents 1, 7, 13*5, 37, 67, a batch mode, transposed layouts
SEMIRING_CONTRACTIONS = [
    ("mk", "kn", "mn", {"m": 9, "n": 11, "k": 7}),
    ("km", "nk", "nm", {"m": 17, "n": 5, "k": 67}),
    ("akb", "cbk", "cab", {"a": 3, "b": 13, "c": 6, "k": 5}),
    ("lmk", "lkn", "lnm", {"l": 3, "m": 10, "n": 7, "k": 37}),
    ("mk", "kn", "mn", {"m": 4, "n": 3, "k": 1}),
]


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@pytest.mark.parametrize("contraction", range(len(SEMIRING_CONTRACTIONS)))
def test_semirings_match_explicit_loops(semiring, dtype, contraction):
    modes_A, modes_B, modes_C, ext = SEMIRING_CONTRACTIONS[contraction]
    sr, mul, add, identity = SEMIRINGS[semiring]
    np_dtype = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}[dtype]
    rng = np.random.default_rng(contraction)

    def tensor(modes, flip):
        shape = tuple(ext[m] for m in modes)
        if dtype[0] == "i":
            values = rng.integers(-9, 10, shape)
        else:
            values = rng.uniform(-3, 3, shape)
        x = np.asarray(values, dtype=np_dtype)
        return x[::-1] if flip else x.T.copy().T   # a reversed view, or a plain copy

    A, B = tensor(modes_A, True), tensor(modes_B, False)
    C = tensor(modes_C, False)
    D = np.full(C.shape, np.iinfo(np_dtype).min if dtype[0] == "i" else np.nan, dtype=np_dtype)
    alpha, beta = (2, -1) if dtype[0] == "i" else (1.5, -0.25)
    plan = gett.plan_contraction(A, modes_A, B, modes_B, C, modes_C, D=D,
                                 op_ab=sr.multiply, reduce=(sr.add, sr.identity))
    assert plan.ops.reduce_identity == sr.identity_for(np_dtype)
    gett.contract(plan, alpha, A, B, beta, C, D)
    wide = np.int64 if dtype[0] == "i" else np.float64
    r = semiring_oracle(modes_A, A.astype(wide), modes_B, B.astype(wide), modes_C, mul, add,
                        sr.identity_for(wide))
    expect = alpha * r + beta * C.astype(wide)
    if dtype[0] == "i":
        assert np.array_equal(D, expect.astype(np_dtype))
    else:
        assert_close(D, expect, dtype)
    # the semiring matters: plus-times gives something else (with K > 1; for K = 1 max-times is times)
    assert math.prod(ext[m] for m in modes_A if m not in modes_C) == 1 or not np.allclose(expect, alpha * np.einsum(f"{modes_A},{modes_B}->{modes_C}", A.astype(wide),
                                                     B.astype(wide)) + beta * C)


def test_semiring_with_ops_and_negative_values():
    """op_a/op_b feed the semiring's multiply; max-plus over leaky-ReLU'd inputs (f64)."""
    rng = np.random.default_rng(5)
    A, B = rng.uniform(-4, 1, (8, 29)), rng.uniform(-4, 1, (29, 6))
    C, D = rng.uniform(-1, 1, (8, 6)), np.full((8, 6), np.nan)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D, op_a=ops.leaky_relu(0.1),
                                 op_b=ops.elu(1.0), op_ab=lambda x, y: x + y, reduce=(max, -math.inf))
    gett.contract(plan, 1.0, A, B, 1.0, C, D)
    expect = (np_leaky(0.1)(A)[:, :, None] + np_elu(1.0)(B)[None]).max(axis=1) + C
    np.testing.assert_allclose(D, expect, rtol=1e-12, atol=1e-12)


def test_identity_is_in_the_accumulator_type():
    def plan(dtype, identity, out=None):
        d = gett.TensorDescriptor
        return gett.plan_contraction(d((3, 4), None, dtype), "mk", d((4, 5), None, dtype), "kn",
                                     d((3, 5), None, out or dtype), "mn", op_ab=ops.MAX_PLUS.multiply,
                                     reduce=(np.maximum, identity))
    assert plan("i32", -math.inf).ops.reduce_identity == -2**31
    assert plan("i64", math.inf).ops.reduce_identity == 2**63 - 1
    assert plan("i64", -7).ops.reduce_identity == -7
    assert plan("i32", np.int64(-7)).ops.reduce_identity == -7
    assert plan("f16", -math.inf, "f32").ops.reduce_identity == -math.inf   # f16 data: f32 accumulator
    assert plan("f32", 0.1).ops.reduce_identity == float(np.float32(0.1))
    assert plan("f64", 0.1).ops.reduce_identity == 0.1


# ---- plan signatures -----------------------------------------------------------------------------

def _descs(dtype="f32"):
    d = gett.TensorDescriptor
    return d((6, 9), None, dtype), d((9, 4), None, dtype), d((6, 4), None, dtype)


def _plan(**kw):
    A, B, C = _descs(kw.pop("dtype", "f32"))
    return gett.plan_contraction(A, "mk", B, "kn", C, "mn", **kw)


def _leaky_closure(a):
    return lambda x: x if x > 0 else a * x


def test_equal_lambdas_share_a_plan():
    f = lambda x: x if x > 0 else 0.25 * x   # noqa: E731
    g = lambda x: x if x > 0 else 0.25 * x   # noqa: E731
    assert f is not g
    assert _plan(op_a=f) is _plan(op_a=g)
    assert _plan(op_out=f, op_c=g) is _plan(op_out=g, op_c=f)
    assert _plan(op_a=_leaky_closure(0.25)) is _plan(op_a=_leaky_closure(0.25)) is _plan(op_a=f)


def test_different_captured_constants_give_different_plans():
    p1, p2 = _plan(op_a=_leaky_closure(0.25)), _plan(op_a=_leaky_closure(0.5))
    assert p1 is not p2 and p1.signature != p2.signature
    assert _plan(op_b=ops.leaky_relu(0.01)) is not _plan(op_b=ops.leaky_relu(0.02))
    assert _plan(op_b=ops.elu(1.0)) is not _plan(op_b=ops.elu(0.5))
    # the same op on another tensor is another plan
    assert len({id(_plan(**{r: ops.gelu_tanh})) for r in ROLES}) == 4
    # default-argument captures count as well
    assert _plan(op_a=lambda x, a=2.0: a * x) is not _plan(op_a=lambda x, a=3.0: a * x)
    # 1 (int) and 1.0 (float) are different constants: an int keeps integer arithmetic
    assert _plan(op_a=lambda x: x + 1) is not _plan(op_a=lambda x: x + 1.0)


def test_named_ops_equal_their_lambdas():
    assert _plan(op_a=ops.leaky_relu(0.01)) is _plan(op_a=lambda x: x if x > 0 else 0.01 * x)
    assert _plan(op_b=ops.elu(1.0)) is _plan(op_b=lambda x: x if x > 0 else 1.0 * np.expm1(x))
    assert _plan(op_c=ops.relu) is _plan(op_c=lambda x: max(x, 0))
    assert _plan(op_out=ops.gelu_tanh) is _plan(
        op_out=lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))))
    assert _plan(op_out=ops.sigmoid) is _plan(op_out=lambda x: ops.sigmoid(x))
    assert _plan(op_a=ops.identity) is _plan()
    semiring = dict(op_ab=ops.MAX_PLUS.multiply, reduce=(ops.MAX_PLUS.add, ops.MAX_PLUS.identity))
    assert _plan(**semiring) is _plan(op_ab=lambda a, b: a + b, reduce=(np.maximum, -math.inf))
    assert _plan(**semiring) is not _plan(op_ab=lambda a, b: a + b, reduce=(max, -math.inf))  # NaN rules differ
    assert _plan(**semiring) is not _plan(op_ab=lambda a, b: a + b, reduce=(np.maximum, -1e30))
    assert _plan(dtype="i32", **semiring) is _plan(dtype="i32", op_ab=ops.MAX_PLUS.multiply,
                                                  reduce=(np.maximum, -2**31))


def test_op_in_descriptor_equals_op_keyword():
    A, B, C = _descs()
    d = gett.TensorDescriptor
    for role, tensor in (("op_a", 0), ("op_b", 1), ("op_c", 2)):
        descs = [A, B, C]
        x = descs[tensor]
        descs[tensor] = d(x.shape, x.strides, x.dtype, op=ops.leaky_relu(0.01))
        carried = gett.plan_contraction(descs[0], "mk", descs[1], "kn", descs[2], "mn")
        assert carried is _plan(**{role: ops.leaky_relu(0.01)})


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, message", [
    (np.maximum, "reduce must be a pair"),
    ((np.maximum,), "reduce must be a pair"),
    ((np.maximum, -math.inf, 0), "reduce must be a pair"),
    ((np.maximum, "-inf"), "reduce identity must be a number"),
    ((np.maximum, None), "reduce identity must be a number"),
    ((np.maximum, True), "reduce identity must be a number"),
    ((np.maximum, 1j), "reduce identity must be a number"),
    ((lambda x: x, 0.0), "reduce needs 2"),
    ((lambda x, y: x[0], 0.0), "subscript"),
    (("max", 0.0), "cannot translate str"),
])
def test_bad_reduce_spec(spec, message):
    with pytest.raises(UnsupportedOperation, match=message):
        _plan(op_ab=ops.MAX_PLUS.multiply, reduce=spec)


@pytest.mark.parametrize("identity, message", [
    (0.5, "not an integer"), (math.nan, "not an integer"), (2**31, "does not fit"), (-2**31 - 1, "does not fit"),
])
def test_integer_identity_must_fit(identity, message):
    with pytest.raises(UnsupportedOperation, match=message):
        _plan(dtype="i32", reduce=(np.maximum, identity))


def test_bad_op_ab():
    with pytest.raises(UnsupportedOperation, match="op_ab needs 2"):
        _plan(op_ab=lambda x: x)
    with pytest.raises(UnsupportedOperation, match="op_a needs 1"):
        _plan(op_a=lambda x, y: x)


@pytest.mark.parametrize("role, tensor", [("op_a", 0), ("op_b", 1), ("op_c", 2)])
def test_op_in_descriptor_and_keyword(role, tensor):
    descs = list(_descs())
    x = descs[tensor]
    descs[tensor] = gett.TensorDescriptor(x.shape, x.strides, x.dtype, op=ops.relu)
    name = "ABC"[tensor]
    with pytest.raises(UnsupportedOperation, match=f"{name} carries an op in its TensorDescriptor and {role}="):
        gett.plan_contraction(descs[0], "mk", descs[1], "kn", descs[2], "mn", **{role: ops.relu})
    with pytest.raises(ValueError):   # UnsupportedOperation is a ValueError too
        gett.plan_contraction(descs[0], "mk", descs[1], "kn", descs[2], "mn", **{role: ops.relu})


def test_op_the_compute_type_lacks_fails_at_plan_time():
    """exp on an int32 contraction: raised when the kernel is rendered (before NVRTC runs)."""
    with pytest.raises(UnsupportedOperation, match="exp"):
        p = _plan(dtype="i32", op_a=ops.elu(1.0))
        render_kernel(p, default_config(p))


# ---- rendering and compiling (NVRTC, no GPU) -----------------------------------------------------

@pytest.mark.parametrize("dtype, identity, literal", [
    ("i32", -math.inf, "(-2147483647 - 1)"), ("i32", math.inf, "2147483647"),
    ("i64", -math.inf, "(-9223372036854775807LL - 1)"), ("i64", math.inf, "9223372036854775807LL"),
    ("f32", -math.inf, "(-__int_as_float(0x7f800000))"), ("f32", 0.1, "0.1f"),
    ("f64", math.inf, "__longlong_as_double(0x7ff0000000000000LL)"), ("f64", -2.5, "(-2.5)"),
])
def test_identity_literal_is_rendered_like_expr_constants(dtype, identity, literal):
    p = _plan(dtype=dtype, op_ab=ops.MAX_PLUS.multiply, reduce=(np.maximum, identity))
    src, _, _, _ = render_kernel(p, default_config(p))
    assert f"static T identity() {{ return {literal}; }}" in src


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64", "i32", "i64"])
def test_semiring_and_op_kernels_compile_for_sm90(dtype, tmp_path, monkeypatch):
    """The kernels the GPU tests run compile, with no spills."""
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path))
    d = gett.TensorDescriptor
    out = "f32" if dtype == "f16" else dtype
    A, B, C = d((37, 67), None, dtype), d((67, 29), None, dtype), d((37, 29), None, out)
    kw = dict(op_ab=ops.MIN_PLUS.multiply, reduce=(ops.MIN_PLUS.add, ops.MIN_PLUS.identity))
    if dtype[0] == "f":
        kw.update(op_a=ops.leaky_relu(0.01), op_c=ops.elu(1.0))
    p = gett.plan_contraction(A, "mk", B, "kn", C, "mn", device_arch="sm_90", **kw)
    report = p.kernel("sm_90").report
    assert report.spill_stores == 0 and report.spill_loads == 0
