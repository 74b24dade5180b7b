"""Planning time of the 48 TCCG contractions: a new plan with a cold compile cache, a warm one, a cached one.

    PYTHONPATH=. python benchmarks/planning.py [--dtype f16] [--arch 9.0] [--only 1-8,12] [--beta 0]
                                               [--warm-repeat 5] [--cached-repeat 50] [--json PATH]
                                               [--profile cold|warm|cached] [--no-process]

Each contraction is planned as ``gett-tccg`` plans it (column-major tensors, ``--dtype f16``: f16 data and f32
accumulation, beta = 0), from descriptors with ``device_arch`` set, so ``plan_contraction`` returns only
once the kernel's cubin is on disk. Three times are taken per contraction:

- cold: a fresh, empty ``GETT_CACHE_DIR`` and every in-process cache cleared (plans, the compiled-kernel
  memo, the plan database's memo), and the CUDA driver's compute cache (which NVRTC consults) disabled:
  analysis, tables, configuration, codegen, NVRTC, cache write;
- warm: the in-process plan cache and compiled-kernel memo cleared again, so the cubin comes from the disk
  cache (median of ``--warm-repeat``);
- cached: the same call once more, answered by the in-process plan cache (median of ``--cached-repeat``).

The cold time checks that the plan really compiled (its kernel report says not from cache, the cubin
exists); the warm time that it did not. Costs paid once per process (loading NVRTC, the header digest,
imports) are kept out of the per-contraction times: a first, unrelated plan pays them and is reported
apart, and so is a new interpreter planning with a warm disk cache (``--no-process`` skips that).

Goals (issue #6): median cold ≤ 1.0 s, median warm ≤ 50 ms. Without a GPU the kernels are planned for
``--arch`` (default 9.0, an H100); with one, for the current device. NVRTC does the same work whether a GPU
is there or not, so the times depend on the host CPU and the NVRTC version, both printed with a small
fixed pure-Python workload (``cpu ref``) to compare hosts by. ``--profile`` runs one phase under cProfile
and prints where the time goes (NVRTC, cache key, disk, digest, analysis, tables, codegen, ...).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOAL_COLD_S = 1.0
GOAL_WARM_S = 0.050

# Where the time goes: (label, file name, function name) of functions that do not call one another, so
# their cumulative times add up; whatever is left of the total is "other".
PROFILE_PARTS = (
    ("NVRTC compile", "nvrtc.py", "_compile"),
    ("NVRTC load", "nvrtc.py", "_load"),
    ("toolchain fingerprint", "nvrtc.py", "_toolchain_fingerprint"),
    ("cache key (sha256 of source)", "kernel_cache.py", "kernel_key"),
    ("disk cache read", "kernel_cache.py", "_load_entry"),
    ("disk cache write", "kernel_cache.py", "_atomic_write"),
    ("header digest", "kernel.py", "headers_digest"),
    ("mode analysis", "modes.py", "analyse_modes"),
    ("index tables", "modes.py", "build_tables"),
    ("plan database look-up", "plan_db.py", "lookup"),
    ("configuration heuristic", "config.py", "default_config"),
    ("tiling", "tiling.py", "tile_plan"),
    ("codegen (render_kernel)", "codegen.py", "render_kernel"),
)


# Set-up ------------------------------------------------------------------------------------------------------
def parse_arch(text: str) -> str:
    """``sm_XY`` from "9.0", "90", "sm_90", "sm_90a" or "10.0"; ValueError otherwise."""
    from gett.errors import DeviceError
    from gett.nvrtc import normalize_arch
    t = text.strip()
    if "." in t:
        major, _, minor = t.partition(".")
        if not (major.isdigit() and minor.isdigit() and len(minor) == 1):
            raise ValueError(f"cannot read an architecture from {text!r}; use e.g. 9.0 or sm_90")
        t = f"{int(major)}{minor}"
    try:
        return normalize_arch(t)
    except DeviceError as e:
        raise ValueError(str(e)) from None


def device_arch_and_name() -> tuple:
    """(``sm_XY``, GPU name) of the current CUDA device, or (None, None) without one."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None, None
        from gett.kernel import current_arch
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        return current_arch(), name.decode() if isinstance(name, bytes) else str(name)
    except Exception:   # no CuPy, no driver, no device
        return None, None


def cpu_reference_ms() -> float:
    """Median of 5 runs of a fixed pure-Python workload, in ms: a yardstick to compare hosts' CPUs by."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for i in range(300_000):
            total += (i * i) % 7
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def machine() -> dict:
    """Host, CPU, Python, NVRTC and gett revision, for the report."""
    from gett import nvrtc
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    repo = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "-C", str(repo), "describe", "--always", "--dirty"], check=False,
                             capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        rev = None
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    return {"host": platform.node(), "cpu": cpu, "cores": cores, "load_1min": load,
            "python": platform.python_version(), "nvrtc": ".".join(map(str, nvrtc.nvrtc_version())),
            "gett_revision": rev, "cpu_ref_ms": round(cpu_reference_ms(), 2)}


def clear_in_process(plan_db_too: bool) -> None:
    """Forget plans and compiled-kernel memos (and the plan database's parsed files): the disk stays."""
    import gett
    from gett import kernel_cache, plan_db
    gett.clear_cache()
    kernel_cache.clear_memory_cache()
    if plan_db_too:
        plan_db.clear_memory_cache()


def planner(contraction, precision, arch: str, beta: float):
    """A function planning ``contraction`` as gett-tccg does, with the kernel compiled for ``arch``."""
    import gett
    from tccg_suite import gett_api
    d = gett_api.descriptors(gett, contraction, precision.dtype_name)

    def plan():
        return gett.plan_contraction(d["A"], contraction.modes_A, d["B"], contraction.modes_B, d["C"],
                                     contraction.modes_C, compute_type=precision.gett_compute, beta=beta,
                                     device_arch=arch)
    return plan


# Measuring ---------------------------------------------------------------------------------------------------
def first_plan_seconds(precision, arch: str, root: Path) -> float:
    """Plan and compile a small matrix product in a cache of its own: what the first plan of a process
    pays on top of a cold plan (NVRTC loaded, header digest, imports of the code paths)."""
    import gett
    os.environ["GETT_CACHE_DIR"] = str(root / "first")
    desc = gett.TensorDescriptor((64, 64), (1, 64), precision.dtype_name)
    start = time.perf_counter()
    gett.plan_contraction(desc, "ij", desc, "jk", desc, "ik", compute_type=precision.gett_compute, beta=0.0,
                          device_arch=arch)
    return time.perf_counter() - start


def measure_one(contraction, precision, arch: str, beta: float, root: Path, warm_repeat: int,
                cached_repeat: int, profiles: dict | None = None) -> dict:
    """Cold, warm and cached planning times of one contraction (module docstring). ``profiles`` maps a
    phase to a cProfile.Profile to run that phase under."""
    plan = planner(contraction, precision, arch, beta)
    profiles = profiles or {}

    def timed(phase):
        prof = profiles.get(phase)
        start = time.perf_counter()
        if prof is not None:
            prof.enable()
        p = plan()
        if prof is not None:
            prof.disable()
        return p, time.perf_counter() - start

    os.environ["GETT_CACHE_DIR"] = str(root / f"c{contraction.id:02d}")
    clear_in_process(plan_db_too=True)
    cold_plan, cold = timed("cold")
    kernel = cold_plan.kernel(arch)
    if kernel.report.from_cache or not Path(kernel.cubin_path).is_file():
        raise RuntimeError(f"#{contraction.id}: the cold plan did not compile a cubin "
                           f"(from_cache={kernel.report.from_cache}, {kernel.cubin_path})")
    warm = []
    for _ in range(warm_repeat):
        clear_in_process(plan_db_too=False)
        warm_plan, seconds = timed("warm")
        report = warm_plan.kernel(arch).report
        if warm_plan is cold_plan or not report.from_cache:
            raise RuntimeError(f"#{contraction.id}: the warm plan did not come from the disk cache")
        warm.append(seconds)
    cached = []
    last = None
    for _ in range(cached_repeat):
        last, seconds = timed("cached")
        cached.append(seconds)
    if cached_repeat and last is not warm_plan:
        raise RuntimeError(f"#{contraction.id}: the re-plan did not come from the in-process plan cache")
    r = kernel.report
    return {"id": contraction.id, "notation": contraction.notation, "m": contraction.m, "n": contraction.n,
            "k": contraction.k, "config": r.config, "registers": r.registers, "cold_s": cold,
            "nvrtc_s": r.compile_seconds, "planning_s": cold - r.compile_seconds,
            "warm_s": statistics.median(warm) if warm else None, "warm_min_s": min(warm) if warm else None,
            "cached_s": statistics.median(cached) if cached else None,
            "cubin_bytes": Path(kernel.cubin_path).stat().st_size}


def new_process(contraction, precision, arch: str, beta: float, cache: Path) -> dict | None:
    """A fresh interpreter planning ``contraction`` against the warm disk cache in ``cache``: seconds to
    import gett and seconds of that first plan (which pays loading NVRTC and the digests). None on failure."""
    repo = Path(__file__).resolve().parent.parent
    code = (
        "import json, sys, time\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "t0 = time.perf_counter()\n"
        "import gett\n"
        "t1 = time.perf_counter()\n"
        "from tccg_suite import select, gett_api\n"
        f"c = select([{contraction.id}])[0]\n"
        f"d = gett_api.descriptors(gett, c, {precision.dtype_name!r})\n"
        "t2 = time.perf_counter()\n"
        "p = gett.plan_contraction(d['A'], c.modes_A, d['B'], c.modes_B, d['C'], c.modes_C, "
        f"compute_type={precision.gett_compute!r}, beta={beta!r}, device_arch={arch!r})\n"
        "t3 = time.perf_counter()\n"
        "nvrtc = sys.modules.get('gett.nvrtc')\n"
        "print(json.dumps({'import_s': t1 - t0, 'plan_s': t3 - t2, "
        f"'from_cache': p.kernel({arch!r}).report.from_cache, "
        "'nvrtc_loaded': nvrtc is not None and nvrtc._lib is not None}))\n"
    )
    env = {**os.environ, "GETT_CACHE_DIR": str(cache)}
    result = None
    for _ in range(2):   # the second run finds the OS's file cache (and bytecode, where Python writes it) warm
        try:
            out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                                 env=env, timeout=300)
            result = json.loads(out.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None
    result["bytecode_written"] = not sys.dont_write_bytecode
    return result


def profile_parts(prof: cProfile.Profile, total: float) -> list:
    """[(label, seconds)] of PROFILE_PARTS in ``prof`` (cumulative times), then "other" and the total."""
    stats = pstats.Stats(prof).stats   # (file, line, function) -> (cc, nc, tottime, cumtime, callers)
    parts = []
    for label, filename, function in PROFILE_PARTS:
        seconds = sum(v[3] for (f, _, fn), v in stats.items()
                      if fn == function and os.path.basename(f) == filename and f"{os.sep}gett{os.sep}" in f)
        parts.append((label, seconds))
    parts.append(("other (signature, descriptors, Python glue)", max(total - sum(s for _, s in parts), 0.0)))
    parts.append(("total under the profiler", total))
    return parts


# Report ------------------------------------------------------------------------------------------------------
def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def main(argv=None) -> int:
    # With a CUDA driver present, NVRTC answers a compile it has seen on this machine before from the
    # driver's compute cache (no ptxas, no report): a "cold" plan of a kernel compiled earlier by another
    # process took 0.05 s instead of 0.6 (H100 host, 2026-11-22). Cold means no cache at all.
    os.environ["CUDA_CACHE_DISABLE"] = "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="f16", help="f16 (default, f32 accumulation), bf16, tf32, f32, f64")
    parser.add_argument("--arch", default=None,
                        help="architecture to plan for, e.g. 9.0 or sm_90 (default: the current GPU, else 9.0)")
    parser.add_argument("--only", default=None, help="contraction ids, e.g. 1,7,20-30 (default: all 48)")
    parser.add_argument("--beta", type=float, default=0.0, help="beta hint, as gett-tccg's --beta (default 0)")
    parser.add_argument("--warm-repeat", type=int, default=5)
    parser.add_argument("--cached-repeat", type=int, default=50)
    parser.add_argument("--json", default=None, help="write the records and medians to this file")
    parser.add_argument("--profile", choices=("cold", "warm", "cached"), default=None,
                        help="run this phase under cProfile and print where its time goes")
    parser.add_argument("--no-process", action="store_true", help="skip the fresh-interpreter measurement")
    args = parser.parse_args(argv)

    from tccg_suite import load_suite, parse_ids, select
    from tccg_suite.precision import PRECISIONS
    if args.dtype not in PRECISIONS:
        parser.error(f"--dtype must be one of {', '.join(PRECISIONS)}")
    precision = PRECISIONS[args.dtype]
    contractions = select(parse_ids(args.only)) if args.only else load_suite()
    gpu_arch, gpu_name = device_arch_and_name()
    try:
        arch = parse_arch(args.arch) if args.arch else (gpu_arch or "sm_90")
    except ValueError as e:
        parser.error(str(e))

    saved_cache_dir = os.environ.get("GETT_CACHE_DIR")
    root = Path(tempfile.mkdtemp(prefix="gett-planning-"))
    try:
        first = first_plan_seconds(precision, arch, root)   # before anything else loads NVRTC
        info = machine()
        print(f"gett planning time: {len(contractions)} TCCG contractions, {precision.description}, "
              f"beta {args.beta:g}, kernels for {arch}" + (f" (GPU: {gpu_name})" if gpu_name else " (no GPU)"))
        print(f"host {info['host']}: {info['cpu']}, {info['cores']} cores, load {info['load_1min']}, "
              f"Python {info['python']}, NVRTC {info['nvrtc']}, gett {info['gett_revision']}, "
              f"cpu ref {info['cpu_ref_ms']:.1f} ms")
        print(f"first plan of the process (small matmul, cold; pays one-time costs): {first:.3f} s")
        header = (f"{'#':>3} {'contraction':<18} {'config':<34} {'regs':>4} {'cold s':>7} {'nvrtc s':>7} "
                  f"{'other ms':>8} {'warm ms':>8} {'cached us':>9}")
        print(header, flush=True)
        prof = cProfile.Profile() if args.profile else None
        records = []
        for c in contractions:
            rec = measure_one(c, precision, arch, args.beta, root, args.warm_repeat, args.cached_repeat,
                              {args.profile: prof} if prof else None)
            records.append(rec)
            print(f"{rec['id']:>3} {rec['notation']:<18} {rec['config']:<34} {rec['registers']:>4} "
                  f"{rec['cold_s']:>7.3f} {rec['nvrtc_s']:>7.3f} {rec['planning_s'] * 1e3:>8.1f} "
                  f"{_ms(rec['warm_s']):>8} {(rec['cached_s'] or 0) * 1e6:>9.1f}", flush=True)

        def median(field):
            values = [r[field] for r in records if r[field] is not None]
            return statistics.median(values) if values else None

        medians = {f: median(f) for f in ("cold_s", "nvrtc_s", "planning_s", "warm_s", "cached_s")}
        cold_ok = medians["cold_s"] <= GOAL_COLD_S
        warm_ok = medians["warm_s"] is not None and medians["warm_s"] <= GOAL_WARM_S
        n = len(records)
        print(f"\nmedians over {n}: cold {medians['cold_s']:.3f} s (NVRTC {medians['nvrtc_s']:.3f} s, the rest "
              f"{medians['planning_s'] * 1e3:.1f} ms), warm {_ms(medians['warm_s'])} ms, "
              f"cached {(medians['cached_s'] or 0) * 1e6:.1f} us")
        print(f"cold: min {min(r['cold_s'] for r in records):.3f} s, max {max(r['cold_s'] for r in records):.3f} s")
        print(f"goal cold ≤ {GOAL_COLD_S:.1f} s median: {'met' if cold_ok else 'MISSED'}; "
              f"goal warm ≤ {GOAL_WARM_S * 1e3:.0f} ms median: {'met' if warm_ok else 'MISSED'}")

        process = None if args.no_process else new_process(contractions[0], precision, arch, args.beta,
                                                           root / f"c{contractions[0].id:02d}")
        if process is not None:
            print(f"new interpreter, warm disk cache, #{contractions[0].id}: import gett "
                  f"{process['import_s'] * 1e3:.0f} ms, first plan {process['plan_s'] * 1e3:.1f} ms "
                  f"(from cache: {process['from_cache']}, NVRTC loaded: {process['nvrtc_loaded']}"
                  + ("" if process["bytecode_written"] else "; PYTHONDONTWRITEBYTECODE: imports compile from source")
                  + ")")

        parts = None
        if prof is not None:
            stats = pstats.Stats(prof)
            parts = profile_parts(prof, stats.total_tt)
            print(f"\nprofile of the {args.profile} phase over {n} contractions "
                  f"(cProfile slows Python code down, not NVRTC):")
            for label, seconds in parts:
                share = 100 * seconds / stats.total_tt if stats.total_tt else 0.0
                print(f"  {label:<44} {seconds:>9.4f} s {share:>5.1f} %")
            print()
            stats.sort_stats("cumulative").print_stats(25)

        if args.json:
            doc = {"benchmark": "planning", "machine": info, "arch": arch, "gpu": gpu_name, "dtype": precision.name,
                   "beta": args.beta, "warm_repeat": args.warm_repeat, "cached_repeat": args.cached_repeat,
                   "first_plan_s": first, "new_process": process, "records": records, "medians": medians,
                   "goals": {"cold_s": GOAL_COLD_S, "warm_s": GOAL_WARM_S, "cold_met": cold_ok, "warm_met": warm_ok},
                   "profile": None if parts is None else {"phase": args.profile, "parts": dict(parts)}}
            Path(args.json).write_text(json.dumps(doc, indent=1))
            print(f"wrote {args.json}")
    finally:
        if saved_cache_dir is None:
            os.environ.pop("GETT_CACHE_DIR", None)
        else:
            os.environ["GETT_CACHE_DIR"] = saved_cache_dir
        clear_in_process(plan_db_too=True)
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
