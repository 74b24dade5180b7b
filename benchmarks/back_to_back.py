"""GPU time of a TCCG contraction's call timed two ways: alone and back to back.

    PYTHONPATH=. python benchmarks/back_to_back.py [--only 13-19] [--dtype f16] [--peers gett,cutensor]
                                                   [--calls 30] [--batches 9]

"Alone" is the TCCG runner's way: each call between its own pair of CUDA events, median of 40. "Back to
back" is a program's: ``--calls`` calls in a row between one pair of events, per call, median of
``--batches`` batches. Both rotate buffer sets as the runner does, so no call finds its data in L2.
The two differ by what happens between calls: a plan's first kernel is launched behind the kernel before
it on the stream (gett.dependent_launch), which an event recorded between them stops, so only the back
to back figure shows what that launch saves (H100, f16: back to back 1.0-2.6 us a call faster than with the
first kernel launched plainly, session 42). ``--peers`` times the TCCG runner's other implementations
(``tccg_suite.peers``: cutensor, cutensor-jit, torch, cupy) the same two ways, on the same buffers.
Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def back_to_back_us(fn, rotate: int, calls: int, batches: int) -> float:
    """Median over ``batches`` of the GPU time per call of ``calls`` calls of ``fn(i)`` between one pair of
    CUDA events, ``i`` cycling through ``rotate`` buffer sets; after 5 untimed calls."""
    import cupy
    stream = cupy.cuda.get_current_stream()
    for i in range(5):
        fn(i % rotate)
    per_call = []
    for _ in range(batches):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for i in range(calls):
            fn(i % rotate)
        end.record(stream)
        end.synchronize()
        per_call.append(cupy.cuda.get_elapsed_time(start, end) * 1e3 / calls)
    return statistics.median(per_call)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="13-19", help="TCCG contractions, e.g. 13-19 or 1,5,33 (default: 13-19)")
    parser.add_argument("--dtype", choices=("f16", "f32"), default="f16")
    parser.add_argument("--peers", default="gett", help="implementations, e.g. gett,cutensor (default: gett)")
    parser.add_argument("--calls", type=int, default=30, help="calls between one pair of events (default: 30)")
    parser.add_argument("--batches", type=int, default=9, help="batches of those calls (default: 9)")
    args = parser.parse_args(argv)
    from tccg_suite.runner import cuda_unavailable
    reason = cuda_unavailable()
    if reason is not None:
        print(f"back_to_back: {reason}; nothing to measure")
        return 0
    import cupy

    from tccg_suite.data import buffer_sets
    from tccg_suite.peers import Peers, Problem
    from tccg_suite.precision import PRECISIONS, library_math
    from tccg_suite.suite import parse_ids, select
    from tccg_suite.timing import median_ms

    precision = PRECISIONS[args.dtype]
    peers = Peers([name for name in args.peers.split(",") if name])
    for note in peers.notes:
        print(note)
    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    print(f"{'#':>3} {'contraction':<18} {'peer':<13} {'alone µs':>9} {'back to back µs':>16} {'saved':>6}")
    with library_math(precision):
        for c in select(parse_ids(args.only)):
            problem = Problem(c, precision, buffer_sets(c, precision.dtype, l2, seed=1), 1.0, 0.0)
            for name, prepare in peers.prepare.items():
                prepared = prepare(problem)
                rotate = len(problem.sets)
                alone = median_ms(prepared.run, runs=40, rotate=rotate) * 1e3
                piped = back_to_back_us(prepared.run, rotate, args.calls, args.batches)
                prepared.close()
                print(f"{c.id:>3} {c.notation:<18} {name:<13} {alone:9.1f} {piped:16.1f} {1 - piped / alone:6.1%}",
                      flush=True)
    peers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
