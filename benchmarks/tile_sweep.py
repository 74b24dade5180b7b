"""Time candidate kernel configurations of gett on TCCG contractions (f16 data with f32 accumulation, or
f32 data with exact f32 compute).

    python benchmarks/tile_sweep.py --only 12,20,28 [--configs mma16:128x128x32:s3:w64x32,wgmma:128x256x64:s4:ws,...]
    python benchmarks/tile_sweep.py --dtype f32 --only 12 --configs simt:128x128x16:s3:t8x8

Prints, per contraction, each configuration's median time and fraction of the roofline (3.0 TB/s, and
800 TFLOP/s for f16 or 51 TFLOP/s for f32), next to the default choice (the shipped database's, else the
heuristic's), after checking each result
against a float64 reference. Like the TCCG runner it cycles through enough buffer sets that no timed call
finds its data in L2. ``--staging on|off`` plans with ``staging=True|False`` (a configuration then applies
to the staged plan's kernel). ``--twins 17:abc-adc-db,...`` adds contractions with a TCCG contraction's
extents but other layouts (here #17 with B K-major in memory), to tell what an operand's layout costs.
A tool for tuning the heuristic, not a user-facing tuner.
"""
from __future__ import annotations

import argparse
import sys

DEFAULT_CONFIGS = (
    "mma16:128x128x32:s3:w64x32", "mma16:128x128x32:s4:w64x32", "mma16:128x256x32:s3:w64x64",
    "mma16:256x128x32:s3:w64x64", "mma16:128x128x64:s3:w64x32", "mma16:128x64x32:s4:w64x32",
    "mma16:64x128x32:s4:w32x64", "mma16:128x128x32:s3:w32x64",
)


def parse_config(text: str):
    """``math:BMxBNxBK:sSTAGES[:wWMxWN|:tTMxTN][:kSPLIT][:gGROUP][:ws][:swap][:p][:lm][:ra|:rb][:pp]`` →
    KernelConfig (wgmma has no warp tile; ``t``: the SIMT path's thread tile; ``g``: row tiles a rasterisation
    group; ``ws``: warp-specialised; ``swap``: wgmma with B's tile as the instruction's rows; ``p``: persistent
    CTAs; ``lm``: a SIMT warp's lanes along M; ``ra``/``rb``: A's/B's tile resident, a CTA's tiles one
    row/column; ``pp``: wgmma warpgroups taking tiles in turn)."""
    from gett.config import KernelConfig
    math, tile, stages, *extra = text.split(":")
    bm, bn, bk = (int(x) for x in tile.split("x"))
    fields = {}
    for x in extra:
        if x in ("ws", "swap"):
            fields[x] = True
        elif x == "p":
            fields["persistent"] = True
        elif x == "lm":
            fields["lanes_m"] = True
        elif x == "pp":
            fields["pingpong"] = True
        elif x in ("ra", "rb"):
            fields["resident"] = x[1]
        elif x[0] == "w":
            fields["wm"], fields["wn"] = (int(v) for v in x[1:].split("x"))
        elif x[0] == "t":
            fields["tm"], fields["tn"] = (int(v) for v in x[1:].split("x"))
        elif x[0] == "k":
            fields["split_k"] = int(x[1:])
        elif x[0] == "g":
            fields["group_m"] = int(x[1:])
        else:
            raise ValueError(f"unknown configuration field {x!r} in {text!r}")
    return KernelConfig(math, bm, bn, bk, int(stages[1:]), **fields)


def parse_twins(text: str) -> list:
    """``ID:C-A-B,...`` → Contraction objects with TCCG contraction ID's extents and the modes of C, A and B
    given (first mode = stride-1 mode), e.g. ``17:abc-adc-db``; ValueError for a mode ID does not have."""
    from tccg_suite.suite import Contraction, select
    twins = []
    for item in filter(None, text.split(",")):
        cid, notation = item.split(":")
        base = select([int(cid)])[0]
        modes_c, modes_a, modes_b = notation.split("-")
        unknown = sorted(set(modes_a + modes_b + modes_c) - set(base.extents))
        if unknown:
            raise ValueError(f"twin {item!r}: #{cid} has no mode {', '.join(unknown)}")
        twins.append(Contraction(base.id, notation, modes_c, modes_a, modes_b, dict(base.extents)))
    return twins


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="12,20,28")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dtype", choices=("f16", "f32"), default="f16",
                    help="f16 data with f32 accumulation, or f32 data with exact f32 compute (SIMT)")
    ap.add_argument("--leaky", action="store_true",
                    help="time the fusion benchmark's work instead: leaky ReLU on A, B and C, beta = 1")
    ap.add_argument("--jobs", type=int, default=16, help="kernels compiled at a time before timing")
    ap.add_argument("--staging", choices=("auto", "on", "off"), default="auto",
                    help="plan_contraction's staging: the planner decides (auto), stage A and B (on), or never (off)")
    ap.add_argument("--twins", default="", metavar="ID:C-A-B,...",
                    help="also time contractions with TCCG #ID's extents in these layouts (e.g. 17:abc-adc-db)")
    args = ap.parse_args(argv)
    twins = parse_twins(args.twins)
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        print(f"no GPU ({type(e).__name__}); nothing to time")
        return 0
    import numpy
    import gett
    from gett.kernel import current_arch
    from tccg_suite.data import Buffers, buffer_sets, reference, relative_error
    from tccg_suite.runner import device_info
    from tccg_suite.suite import parse_ids, select
    from tccg_suite.timing import median_ms
    configs = [parse_config(c) for c in args.configs.split(",") if c]
    beta = 1.0 if args.leaky else 0.0
    ops = {}
    if args.leaky:
        from fusion import leaky_f64, leaky_op
        ops = dict(op_a=leaky_op(), op_b=leaky_op(), op_c=leaky_op())
    dtype, size, flops = {"f16": (numpy.float16, 2, 800e12), "f32": (numpy.float32, 4, 51e12)}[args.dtype]
    staging = {"auto": None, "on": True, "off": False}[args.staging]
    contractions = (select(parse_ids(args.only)) if args.only else []) + twins
    # the L2 set aside for persisting accesses moves staged plans (#14 by ~4 us: its copy's lines are kept there)
    device = device_info()
    print(f"GPU: {device['name']}, L2 {device['l2_bytes'] / 2**20:.0f} MiB, "
          f"{device['l2_persisting_bytes'] / 2**20:.1f} MiB of it set aside for persisting accesses", flush=True)
    precompile(contractions, configs, numpy.dtype(dtype).name, beta, ops, args.jobs, staging)
    for c in contractions:
        # as the TCCG runner does: enough buffer sets that no timed call finds its data in L2
        sets = buffer_sets(c, dtype, cupy.cuda.Device().attributes["L2CacheSize"], seed=1)
        buf, rotate = sets[0], len(sets)
        ref = reference(c, Buffers(*(leaky_f64(x) for x in (buf.A, buf.B, buf.C)), None) if ops else buf, 1.0, beta)
        roof_us = max(c.flops / flops, c.min_bytes(size, size, bool(beta)) / 3.0e12) * 1e6
        base = gett.plan_contraction(buf.A, c.modes("A"), buf.B, c.modes("B"), buf.C, c.modes("C"), beta=beta,
                                     staging=staging, **ops)
        # the configuration the plan runs: the shipped database's where it has one, else the heuristic's
        print(f"#{c.id} {c.notation}  M×N×K {c.m}×{c.n}×{c.k}  roofline {roof_us:.1f} µs  "
              f"default {(base.staged_plan or base).kernel(current_arch()).config.key()}")
        if base.exchanged and configs:   # gett.plan: a configuration is one for the plan as given
            print("  (the default plan exchanges A and B; the configurations below run on the plan as given)")
        for cfg in [None] + configs:
            try:
                plan = gett.plan_contraction(buf.A, c.modes("A"), buf.B, c.modes("B"), buf.C, c.modes("C"),
                                             beta=beta, config=cfg, staging=staging, **ops)
                buf.D.fill(numpy.nan)
                gett.contract(plan, 1.0, buf.A, buf.B, beta, buf.C, buf.D)
                err = relative_error(buf.D, ref)
                ms = median_ms(lambda i: gett.contract(plan, 1.0, sets[i].A, sets[i].B, beta, sets[i].C, sets[i].D),
                               runs=args.runs, rotate=rotate)
                r = plan.kernel_report
                print(f"  {(cfg.key() if cfg else 'default'):44s} {ms * 1e3:9.1f} µs  {roof_us / (ms * 1e3):5.1%}"
                      f"  err {err:.1e}  regs {r.registers} spills {r.spill_stores} smem {r.shared_bytes}")
            except Exception as e:   # a configuration that doesn't fit is reported, not fatal
                print(f"  {(cfg.key() if cfg else 'default'):44s} {type(e).__name__}: {str(e).splitlines()[0][:80]}")
    return 0


def precompile(contractions, configs, dtype_name: str, beta: float, ops: dict, jobs: int, staging=None) -> None:
    """Compile every (contraction, configuration) kernel ``jobs`` at a time into the disk cache, planning
    from descriptors as the timed plans do from column-major arrays; failures are left to the timing loop,
    which reports them."""
    from concurrent.futures import ThreadPoolExecutor

    import gett
    from gett.kernel import current_arch
    from tccg_suite import gett_api
    arch = current_arch()

    def one(job):
        c, cfg = job
        d = gett_api.descriptors(gett, c, dtype_name)
        try:
            plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"),
                                         beta=beta, config=cfg, staging=staging, **ops)
            plan.kernel(arch)
            plan.copy_kernels(arch)
        except Exception:  # noqa: BLE001, S110 - the timing loop plans it again and reports the error
            pass

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, [(c, cfg) for c in contractions for cfg in [None] + configs]))


if __name__ == "__main__":
    sys.exit(main())
