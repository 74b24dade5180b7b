"""Tune the 48 TCCG contractions on this GPU and write the plan database gett ships (plans/<arch>.json).

    PYTHONPATH=. python benchmarks/tune_tccg.py --budget 6 --out plans/sm_90.json [--only 1-8,12]

For each contraction (f16 data, f32 accumulation, beta = 0, as ``gett-tccg`` plans it) this times the
heuristic's kernel, runs the tuner (:func:`gett.tuner.tune`, ``--budget`` seconds), plans again so the
database entry is used, and times that kernel: both with CUDA events, median of ``--runs`` after
warm-up, each result checked against a float64 reference. It prints both times and the configurations,
then the geomean of heuristic speed over tuned speed (issue #6's goal: at least 0.90). The user database
the tuner wrote is copied to ``--out``. Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOAL = 0.90


def plan_and_time(c, buf, ref, runs: int):
    """Plan ``c`` afresh (the plan database is read again), check its result, return (plan, median ms)."""
    import numpy

    import gett
    from gett import plan_db
    from tccg_suite.data import relative_error
    from tccg_suite.timing import median_ms
    gett.clear_cache()
    plan_db.clear_memory_cache()
    plan = gett.plan_contraction(buf.A, c.modes("A"), buf.B, c.modes("B"), buf.C, c.modes("C"), beta=0)
    buf.D.fill(numpy.nan)
    gett.contract(plan, 1.0, buf.A, buf.B, 0.0, buf.C, buf.D)
    err = relative_error(buf.D, ref)
    if not err < 1e-2:
        raise AssertionError(f"#{c.id}: relative error {err:.1e} with {plan.kernel().config.key()}")
    return plan, median_ms(lambda i: gett.contract(plan, 1.0, buf.A, buf.B, 0.0, buf.C, buf.D), runs=runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="1-48")
    ap.add_argument("--budget", type=float, default=6.0, help="tuning seconds per contraction")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", help="where to copy the plan database (e.g. plans/sm_90.json)")
    args = ap.parse_args(argv)
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except (ImportError, RuntimeError) as e:   # no CuPy, driver or device (CUDARuntimeError is one)
        print(f"no GPU ({type(e).__name__}); nothing to tune")
        return 0
    import numpy

    from gett import plan_db, tuner
    from gett.kernel import current_arch
    from tccg_suite.data import make_buffers, reference
    from tccg_suite.suite import parse_ids, select

    arch = current_arch()
    ratios = []
    print(f"{'#':>3} {'contraction':18s} {'heuristic µs':>12} {'tuned µs':>9} {'ratio':>6}  heuristic → tuned")
    for c in select(parse_ids(args.only)):
        buf = make_buffers(c, numpy.float16, seed=1)
        ref = reference(c, buf, 1.0, 0.0)
        plan, heuristic_ms = plan_and_time(c, buf, ref, args.runs)
        heuristic_cfg = plan.kernel().config.key()
        tuner.tune(plan, args.budget)
        plan, tuned_ms = plan_and_time(c, buf, ref, args.runs)
        ratio = tuned_ms / heuristic_ms   # heuristic speed as a fraction of the tuned speed
        ratios.append(ratio)
        print(f"{c.id:3d} {c.notation:18s} {heuristic_ms * 1e3:12.1f} {tuned_ms * 1e3:9.1f} {ratio:6.2f}  "
              f"{heuristic_cfg} → {plan.kernel().config.key()}", flush=True)
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"heuristic speed / tuned speed, geomean over {len(ratios)}: {geomean:.3f} "
          f"(goal ≥ {GOAL:.2f}: {'met' if geomean >= GOAL else 'MISSED'})")
    if args.out:
        shutil.copyfile(plan_db.user_path(arch), args.out)
        print(f"plan database: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
