"""tccg_suite.timing on the GPU: queued behind a held stream, the events time the GPU's work even where the
host takes longer per call than the GPU; not queued, they time the host."""
import statistics
import time

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")


def _busy_host(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:   # sleep() is too coarse for a few hundred microseconds
        pass


def test_queued_samples_time_the_gpu_not_a_slow_host():
    from tccg_suite.timing import HOLD_TRIES_MS, _hold_kernel, sample_ms
    if cupy.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device")
    kernel = _hold_kernel()

    # 2 ms of host work, then 20 us of GPU work. Where other processes share the GPU (pytest -n 8), this
    # context's start event can wait for it while their kernels run: behind a 300 us gap the kernel then ran
    # right after the event (plain samples of 23 us, session 54), hence a gap of 2 ms.
    def call(i):
        _busy_host(2000)
        kernel((1,), (1,), (np.uint64(20_000),))

    queued = sample_ms(call, runs=20, warmup=2)
    plain = sample_ms(call, runs=20, warmup=2, queued=False)
    assert queued.held and not plain.held
    assert 0.02 <= statistics.median(queued) < 0.1, queued   # the kernel's 20 us and a launch's gap
    assert statistics.median(plain) > 0.3, plain                # the host's 2 ms between the events
    assert queued.enqueue_ms > 0.3 and 20 * queued.enqueue_ms > HOLD_TRIES_MS[0]   # it took a longer hold
