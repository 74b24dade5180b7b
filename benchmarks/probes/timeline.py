"""Where a call's microseconds go: per-CTA %globaltimer marks of each kernel a plan runs (session 52).

With ``benchmarks/probes/timeline.patch`` applied, every kernel writes the GPU's global timer at its marks into a
``__device__`` array of its module (``gett_dbg``): a staging copy at its start, after its wait for the kernel
before it and at its end; the contraction at its entry, after that wait, when its first stage is full (producer
kernels) and at its exit; split-K's reduction at its entry, after its wait and at its end; and each contraction
CTA's SM. This script runs each TCCG contraction queued (warm-up and 30 timed calls), clears the marks, queues
two calls behind a kernel that holds the stream and prints the second call's marks (per event over the CTAs:
min, median, max, in us from the call's first mark; a copy's first mark can precede the end of the kernel before
it, since the copy is launched behind that kernel). ``--npz`` keeps every CTA's marks of ``--calls`` such pairs.

    git apply benchmarks/probes/timeline.patch
    PYTHONPATH=. python benchmarks/probes/timeline.py 13-19 [--calls 6 --npz marks.npz]
    git apply -R benchmarks/probes/timeline.patch

The patch is against the tree of session 52; the marks cost a few instructions per CTA.
"""
from __future__ import annotations

import argparse
import os
import sys

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

EVENTS = ["copy start", "copy after wait", "copy end", "kernel entry", "kernel after wait", "first full stage",
          "kernel exit", "reduce entry", "reduce after wait", "reduce end"]
SLOTS = 16384   # CTAs per event (gett_mark's array)


def marks_of_a_call(call, modules) -> "numpy.ndarray":
    """(11, SLOTS) int64: every kernel's marks (0: none) of the second of two back-to-back calls, both enqueued
    while a kernel holds the stream (so that no kernel waits for the host to launch it)."""
    import cupy
    import numpy

    from tccg_suite.timing import _hold_kernel
    views = [cupy.ndarray((11 * SLOTS,), numpy.uint64, module.get_global("gett_dbg")) for module in modules]
    for view in views:
        view.fill(0)
    _hold_kernel()((1,), (1,), (numpy.uint64(2_000_000),))   # 2 ms
    call()
    call()
    cupy.cuda.Device().synchronize()
    return numpy.maximum.reduce([view.get().astype(numpy.int64).reshape(11, SLOTS) for view in views])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", help="TCCG contractions, e.g. 13-19")
    ap.add_argument("--dtype", default="f16", choices=("f16", "f32"))
    ap.add_argument("--calls", type=int, default=1, help="pairs of calls whose marks --npz keeps")
    ap.add_argument("--npz", help="save every CTA's marks of each contraction (c<id>: calls x 11 x 16384)")
    args = ap.parse_args(argv)
    import numpy

    import gett
    from gett import launch
    from gett.arrays import describe
    from gett.kernel import current_arch
    from tccg_suite.data import make_buffers
    from tccg_suite.suite import parse_ids, select
    from tccg_suite.timing import sample_ms
    dtype = numpy.float16 if args.dtype == "f16" else numpy.float32
    kept = {}
    for c in select(parse_ids(args.ids)):
        buf = make_buffers(c, dtype, 1)
        plan = gett.plan_contraction(buf.A, c.modes("A"), buf.B, c.modes("B"), buf.C, c.modes("C"), beta=0)
        call = lambda: gett.contract(plan, 1.0, buf.A, buf.B, 0.0, buf.C, buf.D)
        median_us = numpy.median(sample_ms(lambda i: call(), runs=30)) * 1e3
        paths = [plan.kernel().cubin_path] + [k.cubin_path for k in (plan.copy_kernels(current_arch())
                                                                     if plan.staging else ())]
        device = describe(buf.D).device
        modules = [launch._modules[(str(p), device)] for p in paths]
        calls = [marks_of_a_call(call, modules) for _ in range(max(args.calls, 1))]
        kept[f"c{c.id}"] = numpy.stack(calls)
        last = calls[-1][:10]
        t0 = last[last > 0].min()
        print(f"#{c.id} {c.notation} {plan.kernel().config.key()}: median {median_us:.1f} us a call")
        for e, name in enumerate(EVENTS):
            v = (last[e][last[e] > 0] - t0) / 1e3
            if len(v):
                print(f"  {name:18s} {len(v):5d} CTAs  min {v.min():7.2f}  median {numpy.median(v):7.2f}  "
                      f"max {v.max():7.2f} us")
    if args.npz:
        numpy.savez_compressed(args.npz, **kept)
    return 0


if __name__ == "__main__":
    sys.exit(main())
