"""A call captured into a CUDA graph (CuPy's stream capture, torch.cuda.graph) and replayed on new inputs:
each replay right against numpy in float64, and arrays made after the capture left alone. A plan's scratch
memory (split-K partials, staged operands) taken from CuPy's pool during capture went back to the pool
after the call while every replay still wrote it: arrays made later were overwritten (H100, session 42)."""
import numpy as np
import pytest

import gett

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

# #14's shape in small: A "kmj" and B "jkn" (column-major) disagree on K's stride-1 mode, so A can be staged
K1, K2, M, N = 64, 96, 40, 50
PLANS = {   # (staging, config, chained): the kernels each call runs and how they are launched
    "kernel, chained": (False, ("wgmma", 128, 128, 64, 4, 1), True),
    "kernel-reduce, chained": (False, ("wgmma", 128, 128, 64, 4, 3), True),
    # K split 2 ways: a plan of its own (the plan above keeps the chained launcher it was first run with)
    "kernel-reduce, plain": (False, ("wgmma", 128, 128, 64, 4, 2), False),
    "copy-kernel-reduce, chained": (True, None, True),   # the heuristic's: mma.sync, K split 24 ways
}


def _plan(name, A, B, D, monkeypatch):
    from gett.config import KernelConfig
    staging, tile, chained = PLANS[name]
    if chained:
        if int(cp.cuda.Device().compute_capability) < 90:
            pytest.skip("programmatic dependent launch needs sm_90")
        monkeypatch.setattr("gett.launch.CHAIN_MIN_SECONDS", 0.0)   # chain these small plans too
    config = None if tile is None else KernelConfig(*tile[:5], split_k=tile[5], ws=True)
    return gett.plan_contraction(A, "kmj", B, "jkn", D, "mn", beta=0, staging=staging, config=config)


def _operands(rng):
    return rng.standard_normal((K1, M, K2)), rng.standard_normal((K2, K1, N))


def _want(a, b):
    return np.einsum("kmj,jkn->mn", a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64))


def _bystanders():
    """CuPy arrays of every size the pool rounds to up to 2 MB, each full of 7: where a replay writes
    memory the pool has handed on, some of them change."""
    return [cp.full(n, 7.0, np.float32) for n in range(128, 1 << 19, 128)]


def _check(D, want, bystanders):
    overwritten = sum(bool((x != 7.0).any()) for x in bystanders)
    assert overwritten == 0, f"the replay wrote {overwritten} arrays made after the capture"
    err = np.linalg.norm(cp.asnumpy(D) - want) / np.linalg.norm(want)
    assert err < 1e-4, err


@pytest.mark.parametrize("name", list(PLANS))
def test_a_cupy_graph_replays_a_call_on_new_inputs(name, monkeypatch):
    A = cp.empty((K2, M, K1), np.float16).transpose(2, 1, 0)   # k fastest
    B = cp.empty((N, K1, K2), np.float16).transpose(2, 1, 0)   # j fastest
    D = cp.empty((N, M), np.float32).T                         # m fastest
    plan = _plan(name, A, B, D, monkeypatch)
    from gett.launch import launcher
    run = launcher(plan, cp.cuda.Device().id, "cupy")
    assert bool(plan.staging) == PLANS[name][0]
    assert ((run._inner if plan.staging else run)._chain is not None) == PLANS[name][2]
    rng = np.random.default_rng(42)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        A[...], B[...] = 1, 1
        gett.contract(plan, 1.0, A, B, 0.0, D)   # the launcher made, its module loaded, outside the capture
        stream.begin_capture()
        gett.contract(plan, 1.0, A, B, 0.0, D)
        graph = stream.end_capture()
    for _ in range(3):
        a, b = _operands(rng)
        with stream:
            A[...], B[...] = cp.asarray(a), cp.asarray(b)
            D.fill(cp.nan)
            bystanders = _bystanders()
            graph.launch(stream)
        stream.synchronize()
        _check(D, _want(a, b), bystanders)


@pytest.mark.parametrize("name", ["kernel-reduce, chained", "copy-kernel-reduce, chained"])
def test_a_torch_graph_replays_a_call_on_new_inputs(name, monkeypatch):
    torch = pytest.importorskip("torch")
    A = torch.empty((K2, M, K1), dtype=torch.float16, device="cuda").permute(2, 1, 0)
    B = torch.empty((N, K1, K2), dtype=torch.float16, device="cuda").permute(2, 1, 0)
    D = torch.empty((N, M), dtype=torch.float32, device="cuda").t()
    plan = _plan(name, A, B, D, monkeypatch)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # torch's way: warm up on a side stream before capturing
        A.fill_(1)
        B.fill_(1)
        gett.contract(plan, 1.0, A, B, 0.0, D)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gett.contract(plan, 1.0, A, B, 0.0, D)
    rng = np.random.default_rng(43)
    for _ in range(3):
        a, b = _operands(rng)
        A.copy_(torch.from_numpy(a.astype(np.float16)))
        B.copy_(torch.from_numpy(b.astype(np.float16)))
        D.fill_(float("nan"))
        torch.cuda.synchronize()
        bystanders = _bystanders()
        cp.cuda.Device().synchronize()
        graph.replay()
        torch.cuda.synchronize()
        _check(cp.asarray(D), _want(a, b), bystanders)
