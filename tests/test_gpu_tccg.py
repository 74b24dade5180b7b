"""All 48 TCCG contractions on the GPU in f16 data with f32 output, f32 and f64, against torch.einsum in
float64 (an independent implementation) with NaN-poisoned outputs; plus the edge cases of DESIGN.md."""
import json

import numpy as np
import pytest

import gett
from gett import plan_db
from gett.config import KernelConfig
from gett.kernel import current_arch, current_model
from tccg_suite.suite import load_suite

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")

TOLERANCE = {("f16", "f32"): 2e-3, ("f32", "f32"): 1e-5, ("f64", "f64"): 1e-12}


def column_major(rng, shape, dtype):
    return cp.asfortranarray(cp.asarray(rng.uniform(-1, 1, size=shape)).astype(dtype))


def rel_error(got, expect):
    got = torch.as_tensor(got, device="cuda").to(torch.float64)
    return float(torch.linalg.norm((got - expect).flatten()) / torch.linalg.norm(expect.flatten()))


@pytest.mark.parametrize("dtypes", list(TOLERANCE), ids=lambda d: "-".join(d))
def test_tccg_suite_correct(dtypes):
    data, out = dtypes
    rng = np.random.default_rng(7)
    failures = []
    for c in load_suite():
        A = column_major(rng, c.shape("A"), {"f16": "float16", "f32": "float32", "f64": "float64"}[data])
        B = column_major(rng, c.shape("B"), A.dtype)
        D = cp.asfortranarray(cp.full(c.shape("C"), cp.nan, dtype={"f32": "float32", "f64": "float64"}[out]))
        plan = gett.plan_contraction(A, c.modes("A"), B, c.modes("B"), D, c.modes("C"), beta=0)
        gett.contract(plan, 1.0, A, B, 0.0, D, D)
        expect = torch.einsum(c.einsum, torch.as_tensor(A, device="cuda").double(),
                              torch.as_tensor(B, device="cuda").double())
        err = rel_error(D, expect)
        if not np.isfinite(err) or err > TOLERANCE[dtypes]:
            failures.append((c.id, c.notation, err))
    assert not failures, f"contractions off: {failures}"


@pytest.mark.parametrize("cid,staged,resident,split", [(17, "B", "b", 1), (19, "B", "", 1), (16, "A", "b", 1)])
def test_small_operand_staged_k_major_in_f16(cid, staged, resident, split):
    """In f16 (data and output) the planner copies a small operand K-major (gett.staging): #17
    ``abc-adc-bd``'s N-major B, whose tile the staged kernel keeps for all of K; #19 ``abc-adec-ebd``'s B
    into A's K order (its database entry: K unsplit); #16 ``abc-ad-bdc``'s A, which the kernel takes as its
    B (exchanged).
    A NaN-poisoned D against torch.einsum in float64."""
    c = next(x for x in load_suite() if x.id == cid)
    rng = np.random.default_rng(cid)
    A, B = column_major(rng, c.shape("A"), "float16"), column_major(rng, c.shape("B"), "float16")
    D = cp.asfortranarray(cp.full(c.shape("C"), cp.nan, dtype="float16"))
    plan = gett.plan_contraction(A, c.modes("A"), B, c.modes("B"), D, c.modes("C"), beta=0)
    config = plan.staged_plan.kernel().config
    assert [st.tensor for st in plan.staging] == [staged] and (config.resident, config.split_k) == (resident, split)
    assert plan.exchanged == (cid == 16)
    gett.contract(plan, 1.0, A, B, 0.0, D, D)
    expect = torch.einsum(c.einsum, torch.as_tensor(A, device="cuda").double(),
                          torch.as_tensor(B, device="cuda").double())
    assert rel_error(D, expect) < 2e-3


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_k_conflict_copy_k_major_in_f16(beta):
    """#14 ``ab-cad-dcb`` in f16 (data and output): A (contiguous along c) is copied K-major in B's K order
    (d, c, a), so both operands of the staged kernel are K-major with K one mode of 97344 (gett.staging
    _a_k_major); the kernel is the database's split-K one. With beta 0.5 the plan reads C (D poisoned
    with NaN, C random). Against torch.einsum in float64."""
    c = next(x for x in load_suite() if x.id == 14)
    rng = np.random.default_rng(14)
    A, B = column_major(rng, c.shape("A"), "float16"), column_major(rng, c.shape("B"), "float16")
    C = column_major(rng, c.shape("C"), "float16")
    D = cp.asfortranarray(cp.full(c.shape("C"), cp.nan, dtype="float16"))
    plan = gett.plan_contraction(A, c.modes("A"), B, c.modes("B"), C, c.modes("C"), D=D, beta=beta)
    assert [("".join(st.order), st.tensor) for st in plan.staging] == [("dca", "A")]
    assert plan.staged_plan.kernel().config.split_k > 1
    gett.contract(plan, 1.0, A, B, beta, C, D)
    expect = torch.einsum(c.einsum, torch.as_tensor(A, device="cuda").double(),
                          torch.as_tensor(B, device="cuda").double())
    expect += beta * torch.as_tensor(C, device="cuda").double()
    assert rel_error(D, expect) < 2e-3


@pytest.mark.parametrize("cid,tile,tma", [(19, (128, 80), False), (14, (128, 160), False), (13, (128, 296), True)])
def test_fused_plans_of_producer_entries(cid, tile, tma):
    """#19, #14 and #13 in f16 with leaky ReLU on A, B and C (fusion.py's work; beta 0.5), whose database
    entries are producer tiles (config.for_load_ops): #19's 64 x 80 and #14's 64 x 160 (on its staged copy
    of A) run as 128 rows without a producer, split K; #13's 128 x 296 (K of two modes, each run's last tile
    zero-filled) keeps its TMA producer, the math threads applying the op to each landed stage. A
    NaN-poisoned D against torch in float64, the ops applied there."""
    if current_arch() != "sm_90":
        pytest.skip("the shipped database is sm_90's")
    c = next(x for x in load_suite() if x.id == cid)
    rng = np.random.default_rng(cid)
    A, B, C = (column_major(rng, c.shape(t), "float16") for t in "ABC")
    D = cp.asfortranarray(cp.full(c.shape("C"), cp.nan, dtype="float16"))
    leaky = gett.ops.leaky_relu(0.01)
    plan = gett.plan_contraction(A, c.modes("A"), B, c.modes("B"), C, c.modes("C"), D=D, beta=0.5,
                                 op_a=leaky, op_b=leaky, op_c=leaky)
    kernel = (plan.staged_plan or plan).kernel()
    config = kernel.config
    assert ((config.bm, config.bn), config.ws, config.split_k > 1, bool(kernel.tma)) == (tile, tma, True, tma)
    gett.contract(plan, 1.0, A, B, 0.5, C, D)

    def f64_leaky(x):
        return torch.nn.functional.leaky_relu(torch.as_tensor(x, device="cuda").double(), 0.01)
    expect = torch.einsum(c.einsum, f64_leaky(A), f64_leaky(B)) + 0.5 * f64_leaky(C)
    assert rel_error(D, expect) < 2e-3


def column_major_torch(gen, shape, dtype):
    """Uniform(-1, 1) values in a column-major torch tensor of ``dtype`` (CuPy has no bfloat16)."""
    t = torch.rand(tuple(reversed(shape)), device="cuda", generator=gen, dtype=torch.float64) * 2 - 1
    return t.permute(*reversed(range(len(shape)))).to(dtype)


@pytest.mark.parametrize("cid,beta", [(13, 0.0), (14, 0.5), (10, 0.0), (19, 0.5)])
def test_bf16_plans_take_their_f16_twins_entries(cid, beta):
    """bf16 TCCG plans (data and output) run the shipped database's f16 entries (gett.plan_db's twin): #13's
    split-K TMA tile, #14's staged K-major split-K one, #10's swapped producer tile, #19's unsplit 64-row tile
    (beta 0.5: read C). The same configuration as the f16 plan's; a NaN-poisoned D against torch.einsum in
    float64."""
    if current_arch() != "sm_90":
        pytest.skip("the shipped database is sm_90's")
    c = next(x for x in load_suite() if x.id == cid)
    gen = torch.Generator(device="cuda").manual_seed(cid)
    A, B, C = (column_major_torch(gen, c.shape(t), torch.bfloat16) for t in "ABC")
    D = C.clone().fill_(float("nan"))   # C's strides

    def f16(x):
        return gett.TensorDescriptor(tuple(x.shape), tuple(x.stride()), "f16")
    plan = gett.plan_contraction(A, c.modes("A"), B, c.modes("B"), C, c.modes("C"), D=D, beta=beta)
    twin = gett.plan_contraction(f16(A), c.modes("A"), f16(B), c.modes("B"), f16(C), c.modes("C"), beta=beta)
    kernel, twin_kernel = ((p.staged_plan or p).kernel() for p in (plan, twin))
    assert kernel.config == twin_kernel.config
    assert plan_db.lookup(twin.staged_plan or twin, "sm_90", exact=True, model=current_model("sm_90")) == \
        twin_kernel.config
    gett.contract(plan, 1.0, A, B, beta, C, D)
    expect = torch.einsum(c.einsum, A.double(), B.double()) + beta * C.double()
    assert rel_error(D, expect) < 1e-2


def test_the_gpus_own_models_database_is_read(tmp_path, monkeypatch):
    """The current device's model is the one its name gives (gett.plan_db.model_of), and where the shipped
    plans have a database for it over the architecture's (plans/sm_90-h200.json on an H200), each f16 TCCG
    plan with an entry there compiles with that entry's configuration (no user database in the way)."""
    arch = current_arch()
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    model = current_model(arch)
    assert model == plan_db.model_of(name)
    path = plan_db.shipped_path(arch, model) if model else None
    if path is None or not path.exists():
        pytest.skip(f"no shipped plan database for the {name}")
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path))
    plan_db.clear_memory_cache()
    entries = json.loads(path.read_text())["entries"]
    d = gett.TensorDescriptor
    checked = 0
    for c in load_suite():
        operands = [x for t in "ABC" for x in (d(c.shape(t), c.strides(t), "f16"), c.modes(t))]
        plan = gett.plan_contraction(*operands, beta=0, device_arch=arch)
        inner = plan.staged_plan or plan
        entry = entries.get(plan_db.plan_key(inner, arch))
        if entry is not None:
            assert inner.kernel().config == KernelConfig(**entry["config"]), f"#{c.id}"
            checked += 1
    plan_db.clear_memory_cache()
    assert checked > 0


def _plan(A, mA, B, mB, C, mC, **kw):
    return gett.plan_contraction(A, mA, B, mB, C, mC, **kw)


def test_beta_zero_never_reads_c():
    rng = np.random.default_rng(1)
    A, B = cp.asarray(rng.standard_normal((37, 29))), cp.asarray(rng.standard_normal((29, 41)))
    C = cp.full((37, 41), cp.nan)
    plan = _plan(A, "mk", B, "kn", C, "mn")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    np.testing.assert_allclose(cp.asnumpy(C), cp.asnumpy(A) @ cp.asnumpy(B), rtol=1e-12)


def test_in_place_d_is_c_with_beta():
    rng = np.random.default_rng(2)
    A, B = cp.asarray(rng.standard_normal((33, 20))), cp.asarray(rng.standard_normal((20, 65)))
    C0 = rng.standard_normal((33, 65))
    C = cp.asarray(C0)
    plan = _plan(A, "mk", B, "kn", C, "mn")
    out = gett.contract(plan, 2.0, A, B, -0.5, C)
    assert out is C
    np.testing.assert_allclose(cp.asnumpy(C), 2 * cp.asnumpy(A) @ cp.asnumpy(B) - 0.5 * C0, rtol=1e-12)


def test_empty_k_gives_beta_c():
    A, B = cp.zeros((5, 0), dtype=cp.float32), cp.zeros((0, 7), dtype=cp.float32)
    C = cp.asarray(np.random.default_rng(3).standard_normal((5, 7)), dtype=cp.float32)
    D = cp.full((5, 7), cp.nan, dtype=cp.float32)
    plan = _plan(A, "mk", B, "kn", C, "mn", D=D)
    gett.contract(plan, 1.0, A, B, 3.0, C, D)
    np.testing.assert_allclose(cp.asnumpy(D), 3 * cp.asnumpy(C), rtol=1e-6)


def test_empty_m_writes_nothing():
    A, B = cp.ones((0, 4), dtype=cp.float32), cp.ones((4, 6), dtype=cp.float32)
    D = cp.full((0, 6), cp.nan, dtype=cp.float32)
    gett.contract(_plan(A, "mk", B, "kn", D, "mn"), 1.0, A, B, 0.0, D)


@pytest.mark.parametrize("dtype,compute", [("float16", None), ("float32", None), ("float32", "3xtf32")])
def test_results_are_bitwise_deterministic(dtype, compute):
    rng = np.random.default_rng(4)
    A = cp.asarray(rng.uniform(-1, 1, (72, 72, 72, 72))).astype(dtype)
    B = cp.asarray(rng.uniform(-1, 1, (72, 72))).astype(dtype)
    D1 = cp.full((72, 72, 72, 72), cp.nan, dtype=cp.float32)
    D2 = D1.copy()
    plan = _plan(A, "abed", B, "ec", D1, "abcd", compute_type=compute)
    gett.contract(plan, 1.0, A, B, 0.0, D1, D1)
    gett.contract(plan, 1.0, A, B, 0.0, D2, D2)
    assert cp.array_equal(D1.view(cp.uint32), D2.view(cp.uint32))


def test_many_batches_and_torch_tensors():
    """70 000 batch entries (a grid far beyond one row of CTAs) on torch tensors, on torch's stream."""
    g = torch.Generator(device="cuda").manual_seed(5)
    A = torch.rand((70000, 3, 5), device="cuda", generator=g, dtype=torch.float64)
    B = torch.rand((5, 70000, 2), device="cuda", generator=g, dtype=torch.float64)
    D = torch.full((2, 3, 70000), float("nan"), device="cuda", dtype=torch.float64)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan = _plan(A, "lmk", B, "kln", D, "nml")
        gett.contract(plan, 1.0, A, B, 0.0, D)
    s.synchronize()
    expect = torch.einsum("lmk,kln->nml", A, B)
    assert torch.allclose(D, expect, rtol=1e-12, atol=1e-12)
