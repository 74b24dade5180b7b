"""What the misalignment of a tensor's rows costs: TCCG contractions timed as the runner lays them out (column-major,
dense) against the same data in buffers whose first mode is padded (rows of 624 bytes become 640: every row starts
on a 128-byte line), both with the configuration the dense plan runs. A probe, not a test (session 54).

    PYTHONPATH=. python benchmarks/probes/padded_rows.py 13:A320,13:B320,17:A320,17:AC320,19:A128 [--runs 30]

Each spec is ``ID:TENSORS PAD``: the tensors (A, B, C; C stands for C and D) whose first extent is padded to PAD.
"""
from __future__ import annotations

import argparse
import sys

import cupy
import numpy

import gett
from tccg_suite.data import buffer_sets, reference, relative_error
from tccg_suite.suite import select
from tccg_suite.timing import median_ms


def padded(x: cupy.ndarray, pad: int) -> cupy.ndarray:
    """``x`` (column-major) copied into a column-major buffer whose first extent is ``pad``, as a view of ``x``'s shape."""
    buf = cupy.empty((pad,) + x.shape[1:], dtype=x.dtype, order="F")
    view = buf[: x.shape[0]]
    view[...] = x
    return view


def time_sets(c, sets, config, runs: int):
    """(median µs, relative error, plan) of gett on ``sets`` with ``config`` (None: the plan's own)."""
    s0 = sets[0]
    plan = gett.plan_contraction(s0.A, c.modes("A"), s0.B, c.modes("B"), s0.C, c.modes("C"), beta=0, config=config)
    s0.D[...] = numpy.nan
    gett.contract(plan, 1.0, s0.A, s0.B, 0.0, s0.C, s0.D)
    err = relative_error(s0.D, reference(c, s0, 1.0, 0.0))
    ms = median_ms(lambda i: gett.contract(plan, 1.0, sets[i].A, sets[i].B, 0.0, sets[i].C, sets[i].D),
                   runs=runs, rotate=len(sets))
    return ms * 1e3, err, plan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    for spec in args.specs.split(","):
        cid, rest = spec.split(":")
        tensors, pad = rest.rstrip("0123456789"), int(rest.lstrip("ABC"))
        c = select([int(cid)])[0]
        dense = buffer_sets(c, numpy.float16, l2, seed=1)
        pads = [type(s)(*(padded(getattr(s, t), pad) if (t if t != "D" else "C") in tensors else getattr(s, t)
                          for t in "ABCD")) for s in dense]
        _, _, plan = time_sets(c, dense, None, 3)
        config = (plan.staged_plan or plan).kernel().config
        staged = lambda p: [st.tensor for st in p.staging]
        for r in range(args.rounds):
            us_d, err_d, _ = time_sets(c, dense, None, args.runs)
            try:
                us_p, err_p, pplan = time_sets(c, pads, config, args.runs)
            except ValueError as e:   # the dense plan's configuration does not fit the padded plan
                print(f"#{c.id} {tensors} -> {pad}: {config.key()} refused ({str(e).splitlines()[0][:90]}); its own plan")
                us_p, err_p, pplan = time_sets(c, pads, None, args.runs)
            print(f"#{c.id} {c.notation:14s} {tensors} -> {pad}: dense {us_d:7.1f} us (err {err_d:.0e}, staged {staged(plan)}) "
                  f"padded {us_p:7.1f} us (err {err_p:.0e}, staged {staged(pplan)})  {us_p / us_d - 1:+.1%}  "
                  f"[{config.key()}] round {r + 1}", flush=True)
        del dense, pads
        cupy.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
