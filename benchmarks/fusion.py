"""Fusion benchmark: leaky ReLU on A, B and C fused into gett's contraction, over the 48 TCCG
contractions (f16 data, f32 accumulation, f16 C and D, alpha = 1, beta = 1).

    PYTHONPATH=. python benchmarks/fusion.py [--only 1,7,20-30] [--runs 30] [--json out.json]
    PYTHONPATH=. python benchmarks/fusion.py --compile-only [--arch sm_90]   # no GPU: warm the cache

Three ways to compute ``D = leaky(A)·leaky(B) + leaky(C)`` (leaky(x) = x if x > 0 else 0.01 x):

  (a) gett fused      one kernel: op_a, op_b, op_c applied as elements are loaded;
  (b) gett no ops     the same contraction without the ops (what fusion costs is (a) / (b));
  (c) cuTENSOR + ops  three CuPy elementwise kernels (on flat 1-D views of A, B, C, into fresh
                      temporaries, as a user would call them) then cuTENSOR 2 on the temporaries:
                      cuTENSOR's operators cannot express leaky ReLU. Timed as the whole sequence.

cuTENSOR alone (no ops) is timed too, for context. Before timing, (a) and (c) are checked against a
float64 reference computed from the same f16 inputs (the ops applied in float64) and against each
other; D is poisoned with NaN first. Times are medians of CUDA-event timings after a warm-up,
cycling through several buffer sets when one set would fit in L2. Prints a table and the two
figures the issue asks for:

  fusion cost = geomean(time fused / time no ops)          goal <= 1.05
  speedup     = geomean(time cuTENSOR + kernels / time fused)  goal >= 2

and writes JSON (default ``benchmarks/results/fusion_f16_<date>_<gpu>.json``). Without a GPU it
says so and exits 0 (``--compile-only`` plans and compiles gett's kernels instead).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tccg_suite.precision import PRECISIONS   # noqa: E402
from tccg_suite.report import first_line, format_or_dash, geomean   # noqa: E402
from tccg_suite.suite import Contraction, load_suite, parse_ids, select   # noqa: E402

PRECISION = PRECISIONS["f16"]   # f16 data, f32 accumulation; tolerance against the f64 reference
LEAKY_ALPHA = 0.01
ALPHA, BETA = 1.0, 1.0
MIN_RUNS = 20
WARMUP = 5
FUSION_GOAL, SPEEDUP_GOAL = 1.05, 2.0
IMPLS = ("fused", "noops", "cutensor_ops", "cutensor")
HEADERS = {"fused": "gett fused", "noops": "gett no-ops", "cutensor_ops": "cuT+kernels", "cutensor": "cuTENSOR"}


def leaky_op():
    import gett
    return gett.ops.leaky_relu(LEAKY_ALPHA)


# ---- command line ------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(prog="fusion.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", metavar="IDS", help="contractions to run, e.g. 1,7,31 or 20-30 (default: all 48)")
    p.add_argument("--runs", type=int, default=30, help=f"timed runs per variant, >= {MIN_RUNS} (default: 30)")
    p.add_argument("--json", metavar="PATH",
                   help="JSON results (default: benchmarks/results/fusion_f16_<date>_<gpu>.json)")
    p.add_argument("--compile-only", action="store_true",
                   help="only plan and compile gett's kernels (fused and without ops); no GPU needed")
    p.add_argument("--arch", default="sm_90", help="architecture for --compile-only (default: sm_90)")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1),
                   help="parallel kernel compilations before measuring (default: CPU count, at most 16)")
    args = p.parse_args(argv)
    try:
        args.only = select(parse_ids(args.only)) if args.only else load_suite()
    except ValueError as exc:
        p.error(f"--only: {exc}")
    if args.runs < MIN_RUNS:
        p.error(f"--runs must be at least {MIN_RUNS}")
    return args


def gpu_unavailable() -> str | None:
    """None when CuPy sees a CUDA device, else why not."""
    try:
        from tccg_suite.runner import cuda_unavailable
    except ImportError as exc:   # no CuPy at all
        return first_line(exc)
    return cuda_unavailable()


# ---- planning ----------------------------------------------------------------------------------

def plan_pair(c: Contraction, A, B, C, D=None, device_arch=None):
    """gett's (fused, no-ops) plans for ``c``; A, B, C are arrays or TensorDescriptors."""
    import gett
    common = dict(D=D, beta=BETA, device_arch=device_arch)
    leaky = leaky_op()
    fused = gett.plan_contraction(A, c.modes_A, B, c.modes_B, C, c.modes_C, op_a=leaky, op_b=leaky, op_c=leaky,
                                  **common)
    plain = gett.plan_contraction(A, c.modes_A, B, c.modes_B, C, c.modes_C, **common)
    return fused, plain


def precompile(contractions: list[Contraction], arch: str, jobs: int) -> list[dict]:
    """Plan (from descriptors, as the GPU run plans from column-major 256-byte aligned arrays) and
    compile both kernels of every contraction for ``arch``, ``jobs`` at a time; one record each."""
    import gett
    from tccg_suite import gett_api

    def one(c):
        desc = gett_api.descriptors(gett, c, PRECISION.dtype_name)
        start = time.perf_counter()
        try:
            fused, plain = plan_pair(c, desc["A"], desc["B"], desc["C"], device_arch=arch)
            return {"id": c.id, "seconds": time.perf_counter() - start, "error": None,
                    "fused": _kernel_record(fused, arch), "noops": _kernel_record(plain, arch)}
        except Exception as exc:   # reported, and the contraction fails again (with the same error) later
            return {"id": c.id, "seconds": time.perf_counter() - start, "error": first_line(exc)}

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return list(pool.map(one, contractions))


def _kernel_record(plan, arch=None) -> dict:
    from tccg_suite import gett_api
    kernel = plan.kernel(arch)
    return {"config": kernel.config.key(), **(gett_api.kernel_report(plan) or {})}


def run_compile_only(args) -> int:
    start = time.perf_counter()
    records = precompile(args.only, args.arch, args.jobs)
    print(f"{'#':>3} {'contraction':<18} {'fused kernel':<34} {'regs':>4} {'spills':>6}   "
          f"{'no-ops kernel':<34} {'regs':>4} {'spills':>6}")
    for c, r in zip(args.only, records):
        if r["error"]:
            print(f"{c.id:>3} {c.notation:<18} FAILED: {r['error']}")
            continue
        cells = []
        for k in ("fused", "noops"):
            spills = (r[k]["spill_stores"] or 0) + (r[k]["spill_loads"] or 0)
            cells.append(f"{r[k]['config']:<34} {r[k]['registers']:>4} {spills:>6}")
        print(f"{c.id:>3} {c.notation:<18} " + "   ".join(cells))
    failed = [r for r in records if r["error"]]
    print(f"{2 * len(records)} kernels for {args.arch} in {time.perf_counter() - start:.1f} s"
          f"{f'; {len(failed)} contractions failed' if failed else ''}")
    return 1 if failed else 0


# ---- measuring ---------------------------------------------------------------------------------

def leaky_kernel():
    """leaky(x) for a CuPy elementwise call, computed in f32 and rounded to the data type, as gett's
    loader does; a user's separate kernel."""
    import cupy
    return cupy.ElementwiseKernel(
        "T x", "T y", f"const float v = (float)x; y = (T)(v > 0.0f ? v : {LEAKY_ALPHA!r}f * v);",
        "bench_leaky_relu")


def leaky_f64(x):
    """The reference op: leaky ReLU in float64 of the values x holds."""
    import cupy
    x = x.astype(cupy.float64)
    return cupy.where(x > 0, x, LEAKY_ALPHA * x)


def flat(x):
    """A 1-D view of a column-major (F-contiguous) array."""
    assert x.flags.f_contiguous
    return x.reshape(-1, order="F")


def measure_contraction(c: Contraction, handle, runs: int, l2_bytes: int) -> dict:
    """Check and time every variant on ``c``; a record for the table and the JSON."""
    import cupy
    import numpy

    import gett
    from tccg_suite.data import Buffers, buffer_sets, reference, relative_error
    from tccg_suite.timing import sample_ms

    dtype = PRECISION.dtype
    rec = {"id": c.id, "notation": c.notation, "m": c.m, "n": c.n, "k": c.k, "status": "ok", "error": None,
           "rel_error": {}, "median_ms": {}, "samples_ms": {}, "kernels": {}}
    sets = buffer_sets(c, dtype, l2_bytes, seed=1000 * c.id)
    rec["rotate"] = rotate = len(sets)
    first = sets[0]
    ref = reference(c, Buffers(leaky_f64(first.A), leaky_f64(first.B), leaky_f64(first.C), None), ALPHA, BETA)
    ref_plain = reference(c, first, ALPHA, BETA)

    fused, plain = plan_pair(c, first.A, first.B, first.C, D=first.D)
    rec["kernels"] = {"fused": _kernel_record(fused), "noops": _kernel_record(plain)}
    kernel = leaky_kernel()

    def run_fused(i):
        s = sets[i]
        gett.contract(fused, ALPHA, s.A, s.B, BETA, s.C, s.D)
        return s.D

    def run_noops(i):
        s = sets[i]
        gett.contract(plain, ALPHA, s.A, s.B, BETA, s.C, s.D)
        return s.D

    run = {"fused": run_fused, "noops": run_noops}
    ct_plan = None
    if handle is not None:
        ct_plan = handle.contraction(first.A, c.modes_A, first.B, c.modes_B, first.C, c.modes_C,
                                     PRECISION.cutensor_compute, jit=False)

        def run_cutensor_ops(i):
            s = sets[i]
            a = kernel(flat(s.A)).reshape(s.A.shape, order="F")
            b = kernel(flat(s.B)).reshape(s.B.shape, order="F")
            cc = kernel(flat(s.C)).reshape(s.C.shape, order="F")
            ct_plan(ALPHA, a, b, BETA, cc, s.D)
            return s.D

        def run_cutensor(i):
            s = sets[i]
            ct_plan(ALPHA, s.A, s.B, BETA, s.C, s.D)
            return s.D

        run.update(cutensor_ops=run_cutensor_ops, cutensor=run_cutensor)
    try:
        outputs = {}
        for name, fn in run.items():   # correctness first, D poisoned with NaN
            first.D.fill(numpy.nan)
            outputs[name] = fn(0).astype(numpy.float64)
            rec["rel_error"][name] = relative_error(outputs[name], ref if name in ("fused", "cutensor_ops")
                                                    else ref_plain)
        if "cutensor_ops" in outputs:
            rec["rel_error"]["fused_vs_cutensor_ops"] = relative_error(outputs["fused"], outputs["cutensor_ops"])
        del outputs
        bad = [k for k, e in rec["rel_error"].items() if not e <= PRECISION.tolerance]   # NaN fails too
        if bad:
            rec["status"] = "failed"
            rec["error"] = ", ".join(f"{k} error {rec['rel_error'][k]:.2e}" for k in bad) + \
                f" > {PRECISION.tolerance:g}"
            return rec
        for name, fn in run.items():
            samples = sample_ms(fn, runs, WARMUP, rotate)
            rec["samples_ms"][name] = samples
            rec["median_ms"][name] = statistics.median(samples)
    finally:
        cupy.cuda.get_current_stream().synchronize()
        if ct_plan is not None:
            ct_plan.close()
    return rec


def ratio(rec, num, den):
    ms = rec["median_ms"]
    return ms[num] / ms[den] if rec["status"] == "ok" and num in ms and den in ms else None


def format_table(records) -> str:
    head = (f"{'#':>3} {'contraction':<18} " + " ".join(f"{HEADERS[k] + ' ms':>15}" for k in IMPLS)
            + f" {'fused/no-ops':>12} {'cuT+k/fused':>11} {'err fused':>9} {'err cuT+k':>9}")
    lines = [head]
    for r in records:
        row = f"{r['id']:>3} {r['notation']:<18} "
        if r["status"] == "error":
            lines.append(row + f"ERROR: {r['error']}")
            continue
        row += " ".join(f"{format_or_dash(r['median_ms'].get(k), '.4f'):>15}" for k in IMPLS)
        row += (f" {format_or_dash(ratio(r, 'fused', 'noops'), '.3f'):>12}"
                f" {format_or_dash(ratio(r, 'cutensor_ops', 'fused'), '.2f'):>11}"
                f" {format_or_dash(r['rel_error'].get('fused'), '.1e'):>9}"
                f" {format_or_dash(r['rel_error'].get('cutensor_ops'), '.1e'):>9}")
        if r["status"] != "ok":
            row += f"  FAILED: {r['error']}"
        lines.append(row)
    return "\n".join(lines)


def summarize(records) -> dict:
    ok = [r for r in records if r["status"] == "ok"]
    return {
        "contractions": len(records), "passed": len(ok),
        "fusion_cost": geomean(ratio(r, "fused", "noops") for r in ok),
        "speedup_vs_cutensor_plus_kernels": geomean(ratio(r, "cutensor_ops", "fused") for r in ok),
        "noops_vs_cutensor": geomean(ratio(r, "cutensor", "noops") for r in ok),
        "elementwise_overhead_cutensor": geomean(ratio(r, "cutensor_ops", "cutensor") for r in ok),
    }


def run_benchmark(args) -> int:
    import cupy

    from tccg_suite import runner
    from tccg_suite.cutensor import Cutensor, load_library

    device = runner.device_info()
    print(f"GPU: {device['name']} (compute capability {device['compute_capability']}); {PRECISION.description}, "
          f"C and D f16, alpha = {ALPHA:g}, beta = {BETA:g}; leaky ReLU ({LEAKY_ALPHA}) on A, B and C", flush=True)
    arch = "sm_" + cupy.cuda.Device().compute_capability
    start = time.perf_counter()
    compiled = precompile(args.only, arch, args.jobs)
    from_cache = sum(bool(r[k].get("from_cache")) for r in compiled if not r["error"] for k in ("fused", "noops"))
    print(f"Planned and compiled {2 * len(compiled)} gett kernels in {time.perf_counter() - start:.1f} s "
          f"({from_cache} from the cache, {args.jobs} at a time)", flush=True)

    import gett
    notes, handle, versions = [], None, {"gett": gett.__version__}
    try:
        handle = Cutensor(load_library())
        versions["cutensor"] = str(handle.version)
    except Exception as exc:   # then only the fusion cost can be reported
        notes.append(f"cuTENSOR not run ({first_line(exc)})")
        print(f"note: {notes[-1]}", flush=True)
    records, interrupted = [], False
    try:
        for i, c in enumerate(args.only):
            print(f"[{i + 1}/{len(args.only)}] #{c.id} {c.notation}", end="\r", flush=True)
            try:
                records.append(measure_contraction(c, handle, args.runs, device["l2_bytes"]))
            except Exception as exc:
                records.append({"id": c.id, "notation": c.notation, "status": "error", "error": first_line(exc),
                                "rel_error": {}, "median_ms": {}, "samples_ms": {}})
            runner._free_device_memory()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if handle is not None:
            handle.close()
    print(" " * 60, end="\r")
    print(format_table(records))
    s = summarize(records)
    print()
    print(f"{s['passed']} of {s['contractions']} contractions checked and timed "
          f"(median of {args.runs} runs after {WARMUP} warm-up calls)")
    print(f"fusion cost = geomean(fused / no-ops)           = {format_or_dash(s['fusion_cost'], '.3f')}"
          f"   (goal <= {FUSION_GOAL})")
    print(f"speedup     = geomean(cuTENSOR+kernels / fused) = "
          f"{format_or_dash(s['speedup_vs_cutensor_plus_kernels'], '.2f')}   (goal >= {SPEEDUP_GOAL:g})")
    print(f"context: geomean(cuTENSOR / gett no-ops) = {format_or_dash(s['noops_vs_cutensor'], '.2f')}, "
          f"geomean(cuTENSOR+kernels / cuTENSOR) = {format_or_dash(s['elementwise_overhead_cutensor'], '.2f')}")

    now = datetime.datetime.now()
    default = runner.default_json_path(PRECISION, device["name"], now.date())   # .../tccg_f16_<date>_<gpu>.json
    path = args.json or os.path.join(os.path.dirname(default), os.path.basename(default).replace("tccg_", "fusion_", 1))
    meta = {
        "benchmark": "fusion: leaky ReLU on A, B, C (TCCG 48)",
        "date": now.isoformat(timespec="seconds"),
        "gpu": device,
        "versions": runner._versions(versions),
        "precision": {"name": PRECISION.name, "description": PRECISION.description,
                      "tolerance": PRECISION.tolerance},
        "options": {"runs": args.runs, "warmup": WARMUP, "alpha": ALPHA, "beta": BETA, "leaky_alpha": LEAKY_ALPHA,
                    "only": [c.id for c in args.only]},
        "variants": {"fused": "gett, op_a = op_b = op_c = leaky ReLU", "noops": "gett, no ops",
                     "cutensor_ops": "3 CuPy ElementwiseKernel calls (A, B, C into temporaries) + cuTENSOR",
                     "cutensor": "cuTENSOR alone, no ops"},
        "notes": notes,
        "interrupted": interrupted,
        "summary": s,
        "goals": {"fusion_cost_at_most": FUSION_GOAL, "speedup_at_least": SPEEDUP_GOAL},
    }
    runner._write_json(path, {**meta, "contractions": records})
    bad = [r for r in records if r["status"] != "ok"]
    return 1 if bad or interrupted else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compile_only:
        return run_compile_only(args)
    reason = gpu_unavailable()
    if reason is not None:
        print(f"No GPU visible to CuPy ({reason}): nothing to time. The benchmark needs a CUDA device; "
              f"--compile-only compiles its kernels here.")
        return 0
    return run_benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
