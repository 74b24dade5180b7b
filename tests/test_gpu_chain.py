"""A plan's kernels launched behind one another (gett/dependent_launch.py, sm_90: a staging copy, the
contraction, the split-K reduction), the first behind whatever the stream ran before: each must read what
the kernel before it wrote. Call after call on one stream with no synchronisation, the inputs rewritten
and D poisoned by CuPy kernels just before each call (so each call's first kernel launches behind CuPy's)
and copied out just after; every result against numpy in float64."""
import numpy as np
import pytest

import gett
from small_staged import SHAPES, SUBSCRIPTS, chain_every_plan, layouts, plan as small_plan

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

CHAINS = {   # (staging, config, ops on A and B): the kernels each call runs
    "kernel": (False, ("wgmma", 128, 128, 64, 4, 1), False),
    "copy-kernel": (True, ("wgmma", 128, 128, 64, 4, 1), False),
    "kernel-reduce": (False, ("wgmma", 128, 128, 64, 4, 3), False),
    "copy-kernel-reduce": (True, None, False),   # the heuristic's: mma.sync, K split 24 ways
    "copy-copy-kernel-reduce": (True, None, True),   # ops on both: both copied (the copies apply them)
}


def _half_negatives(x):
    return x if x > 0 else 0.5 * x   # exact in float16


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_chained_kernels_read_what_the_kernel_before_wrote(chain, kind, monkeypatch):
    chain_every_plan(cp, monkeypatch)
    from gett.dependent_launch import DependentLaunch
    from gett.launch import launcher
    staging, tile, ops = CHAINS[chain]
    rng = np.random.default_rng(35)
    a_shape, b_shape, d_shape = SHAPES
    base_a, base_b, D = layouts(cp.asarray(rng.standard_normal(a_shape).astype(np.float16)),
                                cp.asarray(rng.standard_normal(b_shape).astype(np.float16)),
                                cp.empty(d_shape, np.float32), cp.transpose)
    A, B = cp.empty_like(base_a), cp.empty_like(base_b)
    op = _half_negatives if ops else None
    plan = small_plan(A, B, D, staging, tile, op_a=op, op_b=op)
    run = launcher(plan, cp.cuda.Device().id, "cupy")
    chained = run._inner if staging else run
    assert len(plan.staging) == staging + ops and chained._chain is not None
    assert all(copy.chained and isinstance(copy._fn, DependentLaunch) for copy in getattr(run, "_copies", ()))
    assert (chained._chain[1] is not None) == (plan.kernel().config.split_k > 1) == (chain.endswith("reduce"))

    stream = cp.cuda.Stream(non_blocking=True)
    torch = pytest.importorskip("torch") if kind == "torch" else None
    results, scales = [], [(0.5, 2.0), (-2.0, 0.25), (1.0, -1.0), (4.0, 0.5), (-0.25, -4.0), (2.0, 2.0)]
    with stream:
        for sa, sb in scales:   # each call's inputs and poisoned D written by CuPy kernels just before it
            cp.multiply(base_a, np.float16(sa), out=A)   # powers of two: exact in float16
            cp.multiply(base_b, np.float16(sb), out=B)
            D.fill(cp.nan)
            if torch is None:
                gett.contract(plan, 1.0, A, B, 0.0, D)
            else:
                with torch.cuda.StreamContext(torch.cuda.ExternalStream(stream.ptr)):
                    gett.contract(plan, 1.0, torch.as_tensor(A), torch.as_tensor(B), 0.0, torch.as_tensor(D))
            results.append(D.copy())
    stream.synchronize()
    a = cp.asnumpy(base_a).astype(np.float64)
    b = cp.asnumpy(base_b).astype(np.float64)
    f = (lambda x: np.where(x > 0, x, 0.5 * x)) if ops else (lambda x: x)
    for (sa, sb), got in zip(scales, results):   # a stale input or a poisoned D is off by far more
        want = np.einsum(SUBSCRIPTS, f(sa * a), f(sb * b))
        err = np.linalg.norm(cp.asnumpy(got) - want) / np.linalg.norm(want)
        assert err < 1e-4, (sa, sb, err)


def test_small_plans_launch_their_kernels_plainly():
    """Below gett.launch.CHAIN_MIN_SECONDS of GPU time the chained launch's host cost does not pay."""
    from gett.launch import launcher
    rng = np.random.default_rng(36)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 1024), (1024, 64)))
    A, B, D = cp.asarray(a), cp.asarray(b), cp.full((64, 64), cp.nan, np.float32)
    plan = gett.plan_contraction(A, "ik", B, "kj", D, "ij", beta=0)
    if plan.kernel().config.split_k == 1:
        pytest.skip("the heuristic picks no split-K for this shape")
    assert launcher(plan, cp.cuda.Device().id, "cupy")._chain is None
    gett.contract(plan, 1.0, A, B, 0.0, D)
    expect = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(cp.asnumpy(D) - expect) / np.linalg.norm(expect) < 1e-5


@pytest.mark.parametrize("staging", [False, True])
def test_a_chained_plan_on_a_second_device(staging, monkeypatch):
    """A plan's kernels on cuda:1 while cuda:0 is current: loaded, launched behind one another and
    given their scratch memory there."""
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one CUDA device")
    chain_every_plan(cp, monkeypatch)
    from gett.launch import launcher
    rng = np.random.default_rng(37)
    a_shape, b_shape, d_shape = SHAPES
    with cp.cuda.Device(1):
        A, B, D = layouts(cp.asarray(rng.standard_normal(a_shape).astype(np.float16)),
                          cp.asarray(rng.standard_normal(b_shape).astype(np.float16)),
                          cp.full(d_shape, cp.nan, np.float32), cp.transpose)
    plan = small_plan(A, B, D, staging, None if staging else ("wgmma", 128, 128, 64, 4, 3))
    run = launcher(plan, 1, "cupy")
    assert (run._inner if staging else run)._chain is not None
    for _ in range(2):   # made and run, then the cached launcher
        gett.contract(plan, 1.0, A, B, 0.0, D)
    assert cp.cuda.runtime.getDevice() == 0
    with cp.cuda.Device(1):
        got = cp.asnumpy(D)
    want = np.einsum(SUBSCRIPTS, cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64))
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-4
