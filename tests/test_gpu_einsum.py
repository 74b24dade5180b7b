"""gett.einsum on the GPU: the generated expressions of tests/test_einsum.py on CuPy arrays and PyTorch
tensors against numpy.einsum in float64, work on the caller's stream with no hidden synchronisation,
the opt_einsum backend, __cuda_array_interface__ objects, a second device, and the cached call paths
(of einsum and contract: their own arrays each call, split-K, an output that may not be written).

Every distinct contraction compiles a kernel (~0.3 s), so example counts are small and derandomized."""
import numpy as np
import opt_einsum
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gett
from test_einsum import expressions, run_expression

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

EXAMPLES = 12   # per array library; about 2 contractions each

SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


class _TorchCuda:
    """Just enough of an array namespace for tests/cases.make_view to build CUDA tensors."""
    @staticmethod
    def asarray(values):
        import torch
        return torch.as_tensor(values, device="cuda")


def _unflipped(expression):
    """PyTorch views cannot have negative steps."""
    subscripts, operands, out, alpha, beta = expression
    operands = [(shape, (perm, steps, tuple(False for _ in flips))) for shape, (perm, steps, flips) in operands]
    return subscripts, operands, out, alpha, beta


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(expression=expressions(max_operands=4), seed=st.integers(0, 2**31))
def test_cupy_operands_match_numpy_einsum(expression, seed):
    run_expression(cp, expression, seed, to_host=cp.asnumpy)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(expression=expressions(max_operands=4), seed=st.integers(0, 2**31))
def test_torch_operands_match_numpy_einsum(expression, seed):
    pytest.importorskip("torch")
    run_expression(_TorchCuda, _unflipped(expression), seed, to_host=_torch_to_host)


def _torch_to_host(t):
    import torch
    assert isinstance(t, torch.Tensor) and t.is_cuda   # the caller's type comes back
    return t.cpu().numpy()


def _spin(cycles=400_000_000):
    """Keep the current stream busy for a few hundred milliseconds."""
    cp.RawKernel(SPIN, "spin")((1,), (1,), (np.int64(cycles),))


def test_work_lands_on_the_callers_cupy_stream():
    """Behind a long kernel on a user stream, einsum's result appears only once that stream has run it;
    the call returns at once (no synchronisation) and the default stream does not run it."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((40, 30)), rng.standard_normal((30, 20))
    A, B = cp.asarray(a), cp.asarray(b)
    out = cp.full((40, 20), np.nan)
    gett.einsum("ij,jk->ik", A, B, out=out)   # plan and compile outside the timed part
    out.fill(np.nan)
    cp.cuda.Device().synchronize()
    stream, other = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with stream:
        _spin()
        assert gett.einsum("ij,jk->ik", A, B, out=out) is out
        done = stream.record()
    assert not done.done, "einsum synchronised the stream it ran on"
    cp.cuda.Stream.null.synchronize()
    assert np.isnan(cp.asnumpy(out, stream=other)).all(), "einsum ran before the work queued on its stream"
    stream.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), a @ b, rtol=1e-12)


def test_work_lands_on_the_callers_torch_stream():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((40, 30)), rng.standard_normal((30, 20))
    A, B = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    out = torch.full((40, 20), float("nan"), dtype=torch.float64, device="cuda")
    gett.einsum("ij,jk->ik", A, B, out=out)   # plan and compile both calls outside the timed part
    gett.einsum("ij,jk->ik", A, B)
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    stream, other = torch.cuda.Stream(), cp.cuda.Stream(non_blocking=True)
    with torch.cuda.stream(stream):
        torch.cuda._sleep(400_000_000)   # keep the stream busy for a few hundred milliseconds
        result = gett.einsum("ij,jk->ik", A, B)   # allocated by torch on its current stream
        assert gett.einsum("ij,jk->ik", A, B, out=out) is out
        done = torch.cuda.Event()
        done.record(stream)
    assert not done.query(), "einsum synchronised the stream it ran on"
    torch.cuda.default_stream().synchronize()
    assert np.isnan(cp.asnumpy(cp.asarray(out), stream=other)).all(), "einsum ran outside the torch stream"
    stream.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(result.cpu().numpy(), a @ b, rtol=1e-12)


@pytest.mark.parametrize("subscripts, shapes", [
    ("abc,bcd,de->ae", [(6, 5, 4), (5, 4, 7), (7, 3)]),
    ("ab,ab,bc->ac", [(9, 8), (9, 8), (8, 5)]),
])
def test_opt_einsum_backend_on_cupy(subscripts, shapes):
    rng = np.random.default_rng(5)
    host = [rng.standard_normal(s) for s in shapes]
    got = opt_einsum.contract(subscripts, *(cp.asarray(h) for h in host), backend="gett")
    assert isinstance(got, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(got), np.einsum(subscripts, *host), rtol=1e-12, atol=1e-12)


class _Interface:
    """A foreign device array: only ``__cuda_array_interface__`` (as Numba's or JAX's arrays offer)."""
    def __init__(self, array):
        self._array = array
        self.__cuda_array_interface__ = array.__cuda_array_interface__


def test_cuda_array_interface_objects_zero_copy():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((7, 6)), rng.standard_normal((6, 5))
    out = cp.zeros((7, 5))
    result = gett.einsum("ij,jk->ik", _Interface(cp.asarray(a)), _Interface(cp.asarray(b)), out=_Interface(out))
    np.testing.assert_allclose(cp.asnumpy(out), a @ b, rtol=1e-12)   # written in place, through the interface
    assert isinstance(result, _Interface)
    got = gett.einsum("ij,jk->ik", _Interface(cp.asarray(a)), _Interface(cp.asarray(b)))
    np.testing.assert_allclose(cp.asnumpy(got), a @ b, rtol=1e-12)


def test_cached_calls_do_not_replan():
    A, B = cp.ones((8, 9)), cp.ones((9, 10))
    gett.einsum("ij,jk", A, B)
    before = gett.cache_info()
    for _ in range(5):
        gett.einsum("ij,jk", cp.ones((8, 9)), cp.ones((9, 10)))
    after = gett.cache_info()
    assert after.hits - before.hits == 5 and after.misses == before.misses


def test_second_device():
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one CUDA device")
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((12, 11)), rng.standard_normal((11, 10))
    with cp.cuda.Device(1):
        A, B = cp.asarray(a), cp.asarray(b)
    got = gett.einsum("ij,jk->ik", A, B)   # current device is 0
    assert got.device.id == 1
    np.testing.assert_allclose(cp.asnumpy(got), a @ b, rtol=1e-12)


def test_second_device_torch_and_split_k():
    """torch tensors on cuda:1 while cuda:0 is current: planned, launched (split-K too) and cached there."""
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one CUDA device")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((40, 6000)), rng.standard_normal((6000, 30))
    A, B = torch.from_numpy(a).to("cuda:1"), torch.from_numpy(b).to("cuda:1")
    for _ in range(3):   # planned, then cached calls
        got = gett.einsum("ik,kj->ij", A, B)
        assert got.device == torch.device("cuda:1")
        np.testing.assert_allclose(got.cpu().numpy(), a @ b, rtol=1e-10)
    assert cp.cuda.runtime.getDevice() == 0


def test_cached_calls_launch_on_their_own_arrays():
    """Repeated calls take the cached path: each one reads and writes its own arrays."""
    rng = np.random.default_rng(8)
    A, B = cp.ones((16, 8)), cp.ones((8, 4))
    plan = gett.plan_contraction(A, "ij", B, "jk", cp.empty((16, 4)), "ik")
    for _ in range(3):
        a, b = rng.standard_normal((16, 8)), rng.standard_normal((8, 4))
        A, B, out = cp.asarray(a), cp.asarray(b), cp.full((16, 4), np.nan)
        np.testing.assert_allclose(cp.asnumpy(gett.einsum("ij,jk->ik", A, B)), a @ b, rtol=1e-12)
        gett.einsum("ij,jk->ik", A, B, out=out, alpha=2.0)
        np.testing.assert_allclose(cp.asnumpy(out), 2 * a @ b, rtol=1e-12)
        D = cp.full((16, 4), np.nan)
        gett.contract(plan, -1.0, A, B, 0.0, D)
        np.testing.assert_allclose(cp.asnumpy(D), -a @ b, rtol=1e-12)


def test_split_k_through_the_cached_paths():
    """A split-K plan (its partial sums in a CuPy array on the caller's stream), cached, on CuPy and torch."""
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((30, 5000), (5000, 20)))
    A, B = cp.asarray(a), cp.asarray(b)
    plan = gett.plan_contraction(A, "mk", B, "kn", cp.empty((30, 20), np.float32), "mn", beta=0)
    if plan.kernel().config.split_k == 1:
        pytest.skip("the heuristic picks no split-K for this shape")
    arrays = [(A, B)]
    try:
        import torch
        arrays.append((torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")))
    except ImportError:
        pass
    expect = a.astype(np.float64) @ b.astype(np.float64)
    for X, Y in arrays:
        for _ in range(2):
            got = gett.einsum("mk,kn->mn", X, Y)
            got = cp.asnumpy(got) if isinstance(got, cp.ndarray) else got.cpu().numpy()
            np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-3)


def test_torch_out_that_requires_grad_is_refused_after_cached_calls():
    """Whether a tensor may be written is part of the cached signature: a leaf that requires grad is
    refused even after calls with a plain tensor of the same layout took the cached path."""
    torch = pytest.importorskip("torch")
    A, B = torch.ones((6, 5), device="cuda"), torch.ones((5, 4), device="cuda")
    plan = gett.plan_contraction(A, "ij", B, "jk", torch.empty((6, 4), device="cuda"), "ik")
    for _ in range(2):
        gett.einsum("ij,jk->ik", A, B, out=torch.empty((6, 4), device="cuda"))
        gett.contract(plan, 1.0, A, B, 0.0, torch.empty((6, 4), device="cuda"))
    leaf = torch.zeros((6, 4), device="cuda", requires_grad=True)
    with pytest.raises(gett.OutputNotWritableError):
        gett.einsum("ij,jk->ik", A, B, out=leaf)
    with pytest.raises(gett.OutputNotWritableError):
        gett.contract(plan, 1.0, A, B, 0.0, leaf)
    assert not leaf.detach().any()


def test_lazy_conjugate_torch_views_are_refused():
    """A torch .conj() view holds the unconjugated values in memory: refused, also after cached calls."""
    torch = pytest.importorskip("torch")
    a = torch.randn(8, 9, dtype=torch.complex64, device="cuda")
    b = torch.randn(9, 7, dtype=torch.complex64, device="cuda")
    expect = (a @ b).cpu().numpy()
    np.testing.assert_allclose(gett.einsum("ij,jk->ik", a, b).cpu().numpy(), expect, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="lazy conjugate"):
        gett.einsum("ij,jk->ik", a.conj(), b)
    np.testing.assert_allclose(gett.einsum("ij,jk->ik", a.conj().resolve_conj(), b).cpu().numpy(),
                               (a.conj() @ b).cpu().numpy(), rtol=1e-4, atol=1e-4)
