"""GPU timing with CUDA events, reusable by every benchmark in this repository.

Everything is timed on CuPy's current stream. CuPy, PyTorch, cuTENSOR (given that stream) and gett
launch on it, and by default it is the legacy default stream, which orders work from all of them.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from typing import Callable


HOLD_SOURCE = r"""
extern "C" __global__ void hold(unsigned long long ns) {   // one thread keeps the stream busy for ns
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""
HOLD_TRIES_MS = (2.0, 8.0, 32.0, 128.0)   # hold lengths tried in turn until the enqueueing fits in one


class Samples(list):
    """Milliseconds of each timed call (a list), with ``enqueue_ms``: the host's time per timed call
    (events included) and ``held``: whether the GPU was held until every call was enqueued."""
    enqueue_ms: float = float("nan")
    held: bool = False


@functools.cache
def _hold_kernel():
    """The hold kernel (CuPy compiles it for each device on its first launch there)."""
    import cupy
    return cupy.RawKernel(HOLD_SOURCE, "hold")


def sample_ms(fn: Callable[[int], object], runs: int = 30, warmup: int = 5, rotate: int = 1,
              queued: bool = True) -> Samples:
    """Milliseconds of each of ``runs`` timed calls of ``fn(i)``, after ``warmup`` untimed calls.

    ``i`` cycles through ``0 .. rotate-1`` over all calls (warm-up included), so that ``fn`` can
    work on one of ``rotate`` buffer sets in turn and no call finds its data in L2 from the call
    before. Each call is bracketed by its own pair of CUDA events; the host waits once, at the end.
    ``queued`` (the default): the timed calls are enqueued while a kernel holds the stream (nvbench's
    blocking kernel), then run back to back, so that each pair of events brackets GPU work only. Without
    it a call whose host time exceeds its GPU time, or a host that stalls mid-run, leaves the GPU waiting
    between the events, and the figure is the host's. The hold is made longer and the calls timed again
    when their enqueueing outlasted it.
    """
    if runs < 1 or warmup < 0 or rotate < 1:
        raise ValueError(f"need runs >= 1, warmup >= 0, rotate >= 1; got {runs}, {warmup}, {rotate}")
    import cupy
    import numpy

    stream = cupy.cuda.get_current_stream()
    for call in range(warmup):
        fn(call % rotate)
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(runs)]
    for hold_ms in HOLD_TRIES_MS if queued else (None,):
        hold_end = None
        if hold_ms is not None:
            stream.synchronize()
            _hold_kernel()((1,), (1,), (numpy.uint64(hold_ms * 1e6),))
            hold_end = cupy.cuda.Event()
            hold_end.record(stream)
        start_s = time.perf_counter()
        for call, (start, end) in enumerate(events, start=warmup):
            start.record(stream)
            fn(call % rotate)
            end.record(stream)
        enqueue_ms = (time.perf_counter() - start_s) * 1e3 / runs
        fitted = hold_end is not None and not hold_end.done   # still holding once all is enqueued: none waited
        if hold_end is None or fitted:
            break
    events[-1][1].synchronize()
    samples = Samples(cupy.cuda.get_elapsed_time(start, end) for start, end in events)
    samples.enqueue_ms, samples.held = enqueue_ms, fitted
    return samples


def median_ms(fn: Callable[[int], object], runs: int = 30, warmup: int = 5, rotate: int = 1,
              queued: bool = True) -> float:
    """Median of :func:`sample_ms` (same arguments)."""
    return statistics.median(sample_ms(fn, runs, warmup, rotate, queued))


def rotation_count(set_bytes: int, l2_bytes: int, limit: int = 32) -> int:
    """How many buffer sets of ``set_bytes`` to cycle through so that timings don't measure L2.

    One set when a set is at least twice the L2 size (it evicts itself); otherwise enough sets that
    the others together cover twice L2 before a set comes round again, at most ``limit``.
    """
    if set_bytes <= 0 or l2_bytes <= 0 or limit < 1:
        raise ValueError(f"need positive sizes and limit; got {set_bytes}, {l2_bytes}, {limit}")
    if set_bytes >= 2 * l2_bytes:
        return 1
    return min(limit, math.ceil(2 * l2_bytes / set_bytes) + 1)
