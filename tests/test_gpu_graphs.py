"""A call captured into a CUDA graph (CuPy's stream capture, torch.cuda.graph) and replayed on new inputs:
each replay right against numpy in float64, and arrays made after the capture left alone. A plan's scratch
memory (split-K partials, staged operands) taken from CuPy's pool during capture went back to the pool
after the call while every replay still wrote it: arrays made later were overwritten (H100, session 42)."""
import numpy as np
import pytest

import gett
from small_staged import SUBSCRIPTS, chain_every_plan, layouts, plan as small_plan, SHAPES

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

PLANS = {   # (staging, config, chained): the kernels each call runs and how they are launched
    "kernel, chained": (False, ("wgmma", 128, 128, 64, 4, 1), True),
    "kernel-reduce, chained": (False, ("wgmma", 128, 128, 64, 4, 3), True),
    # K split 2 ways: a plan of its own (the plan above keeps the chained launcher it was first run with)
    "kernel-reduce, plain": (False, ("wgmma", 128, 128, 64, 4, 2), False),
    "copy-kernel-reduce, chained": (True, None, True),   # the heuristic's: mma.sync, K split 24 ways
}


def _plan(name, A, B, D, monkeypatch):
    staging, tile, chained = PLANS[name]
    if chained:
        chain_every_plan(cp, monkeypatch)
    return small_plan(A, B, D, staging, tile)


def _operands(rng):
    """New values for A and B, in their modes' order (k, m, j) and (j, k, n)."""
    a_shape, b_shape, _ = SHAPES
    return rng.standard_normal(a_shape[::-1]), rng.standard_normal(b_shape[::-1])


def _want(a, b):
    return np.einsum(SUBSCRIPTS, a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64))


@pytest.fixture(autouse=True)
def _pool_emptied_after():
    """Each test's bystanders take ~4 GB of CuPy's pool: give it back to the device for the tests running
    beside it (under -n 8 the memcheck run beside these once ran out of device memory at a launch)."""
    yield
    cp.get_default_memory_pool().free_all_blocks()


def _bystanders():
    """CuPy arrays of every size the pool rounds to up to 2 MB, each full of 7: where a replay writes
    memory the pool has handed on, some of them change."""
    return [cp.full(n, 7.0, np.float32) for n in range(128, 1 << 19, 128)]


def _check(D, want, bystanders, tolerance=1e-4):
    overwritten = sum(bool((x != 7.0).any()) for x in bystanders)
    assert overwritten == 0, f"the replay wrote {overwritten} arrays made after the capture"
    err = np.linalg.norm(cp.asnumpy(D) - want) / np.linalg.norm(want)
    assert err < tolerance, err


def _cupy_graph(stream, call):
    """``call()`` run once on ``stream`` (planned, its modules loaded outside the capture), then captured."""
    with stream:
        call()
        stream.begin_capture()
        call()
        return stream.end_capture()


def _torch_graph(torch, call):
    """``call()`` run once on a side stream (torch's way before capturing), then captured into a torch graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph


def _replay_torch_graph(torch, graph):
    """Replay ``graph`` once its inputs are written; returns the bystanders made just before the replay."""
    torch.cuda.synchronize()
    bystanders = _bystanders()
    cp.cuda.Device().synchronize()
    graph.replay()
    torch.cuda.synchronize()
    return bystanders


@pytest.mark.parametrize("name", list(PLANS))
def test_a_cupy_graph_replays_a_call_on_new_inputs(name, monkeypatch):
    a_shape, b_shape, d_shape = SHAPES
    A, B, D = layouts(cp.empty(a_shape, np.float16), cp.empty(b_shape, np.float16), cp.empty(d_shape, np.float32),
                      cp.transpose)
    plan = _plan(name, A, B, D, monkeypatch)
    from gett.launch import launcher
    run = launcher(plan, cp.cuda.Device().id, "cupy")
    assert bool(plan.staging) == PLANS[name][0]
    assert ((run._inner if plan.staging else run)._chain is not None) == PLANS[name][2]
    rng = np.random.default_rng(42)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        A[...], B[...] = 1, 1
    graph = _cupy_graph(stream, lambda: gett.contract(plan, 1.0, A, B, 0.0, D))
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
    a_shape, b_shape, d_shape = SHAPES
    A, B, D = layouts(torch.empty(a_shape, dtype=torch.float16, device="cuda"),
                      torch.empty(b_shape, dtype=torch.float16, device="cuda"),
                      torch.empty(d_shape, dtype=torch.float32, device="cuda"), torch.permute)
    plan = _plan(name, A, B, D, monkeypatch)
    A.fill_(1)
    B.fill_(1)
    graph = _torch_graph(torch, lambda: gett.contract(plan, 1.0, A, B, 0.0, D))
    rng = np.random.default_rng(43)
    for _ in range(3):
        a, b = _operands(rng)
        A.copy_(torch.from_numpy(a.astype(np.float16)))
        B.copy_(torch.from_numpy(b.astype(np.float16)))
        D.fill_(float("nan"))
        bystanders = _replay_torch_graph(torch, graph)
        _check(cp.asarray(D), _want(a, b), bystanders)


def test_a_cupy_graph_replays_a_three_operand_einsum_on_new_inputs():
    """The intermediate of a three-operand einsum, made and dropped inside the captured call, came from
    CuPy's pool like the scratch memory above."""
    x = cp.empty((64, 48), np.float32)
    y = cp.empty((48, 96), np.float32)
    z = cp.empty((96, 40), np.float32)
    out = cp.empty((64, 40), np.float32)
    rng = np.random.default_rng(44)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x[...], y[...], z[...] = 1, 1, 1
    graph = _cupy_graph(stream, lambda: gett.einsum("ij,jk,kl->il", x, y, z, out=out, optimize=[(0, 1), (0, 1)]))
    for _ in range(3):
        a, b, c = (rng.standard_normal(t.shape) for t in (x, y, z))
        with stream:
            x[...], y[...], z[...] = cp.asarray(a), cp.asarray(b), cp.asarray(c)
            out.fill(cp.nan)
            bystanders = _bystanders()
            graph.launch(stream)
        stream.synchronize()
        want = a @ b @ c
        _check(out, want, bystanders, tolerance=1e-5)


def test_a_cupy_graph_of_a_three_operand_einsum_on_a_second_device():
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one CUDA device")
    rng = np.random.default_rng(45)
    a, b, c = (rng.standard_normal(s) for s in ((64, 48), (48, 96), (96, 40)))
    with cp.cuda.Device(1):
        x, y, z = cp.asarray(a), cp.asarray(b), cp.asarray(c)
        out = cp.full((64, 40), cp.nan)
        stream = cp.cuda.Stream(non_blocking=True)
        graph = _cupy_graph(stream, lambda: gett.einsum("ij,jk,kl->il", x, y, z, out=out,
                                                         optimize=[(0, 1), (0, 1)]))
        with stream:
            out.fill(cp.nan)
            bystanders = _bystanders()
            graph.launch(stream)
        stream.synchronize()
        _check(out, a @ b @ c, bystanders, tolerance=1e-12)


def test_a_torch_graph_replays_a_three_operand_einsum_on_new_inputs():
    """torch tensors' intermediates come from torch's allocator, which serves a capture from the graph's pool."""
    torch = pytest.importorskip("torch")
    x, y, z = (torch.ones(s, dtype=torch.float64, device="cuda") for s in ((64, 48), (48, 96), (96, 40)))
    out = torch.empty((64, 40), dtype=torch.float64, device="cuda")
    graph = _torch_graph(torch, lambda: gett.einsum("ij,jk,kl->il", x, y, z, out=out, optimize=[(0, 1), (0, 1)]))
    rng = np.random.default_rng(46)
    for _ in range(3):
        a, b, c = (rng.standard_normal(tuple(t.shape)) for t in (x, y, z))
        for t, v in zip((x, y, z), (a, b, c)):
            t.copy_(torch.from_numpy(v))
        out.fill_(float("nan"))
        bystanders = _replay_torch_graph(torch, graph)
        _check(cp.asarray(out), a @ b @ c, bystanders, tolerance=1e-12)
