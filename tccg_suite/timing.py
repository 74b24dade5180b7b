"""GPU timing with CUDA events, reusable by every benchmark in this repository.

Everything is timed on CuPy's current stream. CuPy, PyTorch, cuTENSOR (given that stream) and gett
launch on it, and by default it is the legacy default stream, which orders work from all of them.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable


def sample_ms(fn: Callable[[int], object], runs: int = 30, warmup: int = 5, rotate: int = 1) -> list[float]:
    """Milliseconds of each of ``runs`` timed calls of ``fn(i)``, after ``warmup`` untimed calls.

    ``i`` cycles through ``0 .. rotate-1`` over all calls (warm-up included), so that ``fn`` can
    work on one of ``rotate`` buffer sets in turn and no call finds its data in L2 from the call
    before. Each call is bracketed by its own pair of CUDA events; the host waits once, at the end.
    """
    if runs < 1 or warmup < 0 or rotate < 1:
        raise ValueError(f"need runs >= 1, warmup >= 0, rotate >= 1; got {runs}, {warmup}, {rotate}")
    import cupy

    stream = cupy.cuda.get_current_stream()
    for call in range(warmup):
        fn(call % rotate)
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(runs)]
    for call, (start, end) in enumerate(events, start=warmup):
        start.record(stream)
        fn(call % rotate)
        end.record(stream)
    events[-1][1].synchronize()
    return [cupy.cuda.get_elapsed_time(start, end) for start, end in events]


def median_ms(fn: Callable[[int], object], runs: int = 30, warmup: int = 5, rotate: int = 1) -> float:
    """Median of :func:`sample_ms` (same arguments)."""
    return statistics.median(sample_ms(fn, runs, warmup, rotate))


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
