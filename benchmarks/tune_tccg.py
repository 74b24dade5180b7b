"""Tune the 48 TCCG contractions on this GPU and write the plan database gett ships (plans/<arch>.json).

    PYTHONPATH=. python benchmarks/tune_tccg.py --budget 6 --out plans/sm_90.json [--only 1-8,12] [--margin 0.03]
        [--dtype f16|bf16|f32] [--candidates wgmma:128x160x64:s4:k22:ws,...]
    PYTHONPATH=. python benchmarks/tune_tccg.py --budget 3 --out plans/sm_90-h200.json --base plans/sm_90.json

For each contraction (``--dtype`` data as the TCCG runner plans it: f16 with f32 accumulation by
default, bf16 likewise, or exact f32; beta = 0) this times the
heuristic's kernel, runs the tuner (:func:`gett.tuner.tune`, ``--budget`` seconds), plans again so the
database entry is used, and times that kernel: both with CUDA events, median of ``--runs`` after
warm-up, each result checked against a float64 reference. It prints both times and the configurations,
then the geomean of heuristic speed over tuned speed (issue #6's goal: at least 0.90).

The heuristic is timed with no database at all: the shipped one is ignored and the user database starts
empty (an existing file is moved aside to ``<file>.bak`` and put back at the end, so the tuning entries
steer no later run on the machine), and every heuristic time is taken before any
tuning, so no tuned entry of a near-identical shape (found by family) stands in for the heuristic.
``--out`` receives the tuned entries whose configuration differs from the heuristic's and beats it by
more than ``--margin``: what the shipped database is for; and the entry of any other tuned contraction to
which the database would otherwise lend a near-identical shape's configuration (:func:`lent_entries`).
An existing file is updated: the entries of the contractions tuned in this run are replaced (or dropped),
the others (another ``--dtype``) kept. The tuner times one call at a time on cold caches; the runner's calls
back to back can rank tiles otherwise (H100, session 60: #10's shipped 72 x 256 persistent tile runs 50.5 us
there against the heuristic's 54.5, while the tuner has them even and drops the entry), so compare a new
database with the runner's figures before shipping it.
A GPU model's database (``--out plans/<arch>-<model>.json``, read over the architecture's on that model:
gett.plan_db) names the architecture's file as ``--base``: a contraction to which the two together would
give another configuration than the one tuning settled on here gets an entry of its own, as a lent one does.
Check each such entry with the runner: on an H200 (session 64) a run over all 48 wrote 11 entries (2 beating
the heuristic, 9 setting aside the H100's), with which the runner timed #6 14% faster but #3, #10, #32 and
#38 4-11% slower; the shipped file is #6's alone (`--only 6,7`).
Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOAL = 0.90


def plan_and_time(c, buf, ref, runs: int, precision):
    """Plan ``c`` afresh (the plan database is read again), check its result, return (plan, median ms)."""
    import numpy

    import gett
    from gett import plan_db
    from tccg_suite.data import relative_error
    from tccg_suite.timing import median_ms
    gett.clear_cache()
    plan_db.clear_memory_cache()
    plan = gett.plan_contraction(buf.A, c.modes("A"), buf.B, c.modes("B"), buf.C, c.modes("C"), beta=0,
                                 compute_type=precision.gett_compute)
    buf.D.fill(numpy.nan)
    gett.contract(plan, 1.0, buf.A, buf.B, 0.0, buf.C, buf.D)
    err = relative_error(buf.D, ref)
    if not err < precision.tolerance:
        raise AssertionError(f"#{c.id}: relative error {err:.1e} with {plan.kernel().config.key()}")
    return plan, median_ms(lambda i: gett.contract(plan, 1.0, buf.A, buf.B, 0.0, buf.C, buf.D), runs=runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="1-48")
    ap.add_argument("--budget", type=float, default=6.0, help="tuning seconds per contraction")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--margin", type=float, default=0.03,
                    help="ship a tuned entry only if it beats the heuristic by more than this fraction")
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16", "f32"),
                    help="data type as the TCCG runner's --dtype (f16, bf16: f32 accumulation; f32: exact); "
                         "bf16 plans without entries of their own take f16's (gett.plan_db)")
    ap.add_argument("--out", help="where to write the shipped plan database (e.g. plans/sm_90.json)")
    ap.add_argument("--base", help="the database --out goes over on this GPU model (e.g. plans/sm_90.json "
                                    "for --out plans/sm_90-h200.json)")
    ap.add_argument("--candidates", default="",
                    help="configurations the tuner times first, before its own (tile_sweep.py's syntax, "
                         "e.g. wgmma:128x160x64:s4:k22:ws): ones found by a sweep that its list leaves out")
    args = ap.parse_args(argv)
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except (ImportError, RuntimeError) as e:   # no CuPy, driver or device (CUDARuntimeError is one)
        print(f"no GPU ({type(e).__name__}); nothing to tune")
        return 0
    from gett import plan_db
    from gett.kernel import current_arch

    arch = current_arch()
    plan_db.shipped_path = lambda arch, model=None: None   # the heuristic alone, then what tuning adds to it
    with user_database_aside(arch) as user:
        return _tune(args, arch, user)


@contextlib.contextmanager
def user_database_aside(arch):
    """Yield the path of an empty user plan database for ``arch``; the user's own file (moved to
    ``<file>.bak`` meanwhile) is back afterwards, so the tuning entries steer no later run."""
    from gett import plan_db
    user = plan_db.user_path(arch)
    saved = user.with_name(user.name + ".bak")
    if user.exists():
        user.replace(saved)
    plan_db.clear_memory_cache()
    try:
        yield user
    finally:
        user.unlink(missing_ok=True)
        if saved.exists():
            saved.replace(user)
        plan_db.clear_memory_cache()


def _tune(args, arch, user) -> int:
    from tile_sweep import parse_config

    from gett import plan_db, tuner
    from tccg_suite.data import make_buffers, reference
    from tccg_suite.precision import PRECISIONS
    from tccg_suite.suite import parse_ids, select
    precision = PRECISIONS[args.dtype]
    extra = [parse_config(x) for x in args.candidates.split(",") if x]
    cases = []
    for c in select(parse_ids(args.only)):   # every heuristic time before any tuning
        buf = make_buffers(c, precision.dtype, seed=1)
        ref = reference(c, buf, 1.0, 0.0)
        cases.append((c, buf, ref, *plan_and_time(c, buf, ref, args.runs, precision)))
    ratios, keep, tried, settled = [], set(), set(), []
    print(f"{'#':>3} {'contraction':18s} {'heuristic µs':>12} {'tuned µs':>9} {'ratio':>6}  heuristic → tuned")
    for c, buf, ref, plan, heuristic_ms in cases:
        heuristic_cfg = plan.kernel().config.key()
        key = plan_db.plan_key(plan.staged_plan or plan, arch)   # the tuner's entry: the kernel's plan's
        # entries of the plan itself (an earlier, unstaged layout's) and of the kernel's plan (staged) go
        tried.update({plan_db.plan_key(plan, arch), key})
        tuner.tune(plan, args.budget, candidates=extra + tuner.candidate_configs(plan.staged_plan or plan, arch)[1:])
        plan, tuned_ms = plan_and_time(c, buf, ref, args.runs, precision)
        tuned = plan.kernel().config
        tuned_cfg = tuned.key()
        ratio = tuned_ms / heuristic_ms   # heuristic speed as a fraction of the tuned speed
        ratios.append(ratio)
        if tuned_cfg != heuristic_cfg and tuned_ms < (1 - args.margin) * heuristic_ms:
            keep.add(key)
        else:
            settled.append((key, plan.staged_plan or plan, tuned))
        print(f"{c.id:3d} {c.notation:18s} {heuristic_ms * 1e3:12.1f} {tuned_ms * 1e3:9.1f} {ratio:6.2f}  "
              f"{heuristic_cfg} → {tuned_cfg}", flush=True)
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"heuristic speed / tuned speed, geomean over {len(ratios)}: {geomean:.3f} "
          f"(goal ≥ {GOAL:.2f}: {'met' if geomean >= GOAL else 'MISSED'})")
    if args.out:
        out = Path(args.out)
        shipped, tuned = json.loads(out.read_text()) if out.exists() else None, json.loads(user.read_text())
        data = merge_database(shipped, tuned, tried, keep)
        base = json.loads(Path(args.base).read_text()) if args.base else None
        lent = set()
        while more := lent_entries(data, settled, arch, base) - lent:   # an entry shipped for one can lend to another
            lent |= more
            data = merge_database(shipped, tuned, tried, keep | lent)
        with open(out, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"plan database: {args.out} ({len(keep)} entries of this run beating the heuristic by more than "
              f"{args.margin:.0%}, {len(lent)} keeping a plan from a near-identical shape's entry, "
              f"{len(data['entries'])} in all)")
    return 0


def lent_entries(data: dict, settled: list, arch, base: dict | None = None) -> set:
    """Keys of the ``settled`` plans ((key, plan, the configuration tuning settled on) whose tuning did not beat
    the heuristic by the margin) to which the database ``data`` would lend another configuration: a
    near-identical shape's entry (gett.plan_db.lookup's family rule), or with ``base`` (the database ``data``
    goes over) any entry of the two together. Shipping their own entry keeps them on what was measured for
    them (TCCG #11 took #10's entry and ran 1-3% slower than on its heuristic's tile, H100, sessions 55-60;
    on an H200 #6's H100 entry runs 98 us against its heuristic's 85, session 64)."""
    from gett import plan_db
    view = data if base is None else {**data, "entries": {**base["entries"], **data["entries"]}}
    return {key for key, plan, config in settled if plan_db.lookup(plan, arch, data=view) not in (None, config)}


def merge_database(shipped: dict | None, tuned: dict, tried: set, keep: set) -> dict:
    """The database to ship: ``shipped`` (None: none yet) with the entries of the plans ``tried`` in this
    run replaced by those of ``tuned`` in ``keep``; entries of other plans (another dtype) stay."""
    base = shipped if shipped is not None else {**tuned, "entries": {}}
    entries = {k: v for k, v in base["entries"].items() if k not in tried}
    entries.update({k: v for k, v in tuned["entries"].items() if k in keep})
    return {**base, "entries": entries}


if __name__ == "__main__":
    sys.exit(main())
