"""``gett-tccg``: run the TCCG suite with gett and its peers, or compile it where there is no GPU.

    gett-tccg --dtype f16 --only 1,7,20-30 --peers gett,cutensor --json out.json
    python -m tccg_suite.runner --compile-only --arch sm_90

Without a GPU (or with ``--compile-only``) it plans and compiles gett's kernels for ``--arch`` and
prints registers, spills, shared memory and compile time per contraction. With a GPU it measures the
ceilings (copy bandwidth, cuBLAS GEMM rate), then for each contraction checks and times every
implementation, and prints a table, geomeans per group, a JSON file and a PNG plot.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import sys

from .compile_report import compile_suite
from .peers import NAMES
from .precision import PRECISIONS, Precision
from .progress import Progress
from .report import OK, first_line, format_summary, format_table, to_json
from .suite import Contraction, load_suite, parse_ids, select

MIN_RUNS = 20
ALPHA = 1.0


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``gett-tccg``."""
    p = argparse.ArgumentParser(prog="gett-tccg", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", choices=list(PRECISIONS), default="f16",
                   help="f16/bf16: 16-bit data, f32 accumulation; tf32: f32 data on TF32 tensor cores; "
                        "f32: exact f32; f64 (default: f16)")
    p.add_argument("--only", metavar="IDS", help="contractions to run, e.g. 1,7,31 or 20-30 (default: all 48)")
    p.add_argument("--peers", metavar="NAMES", default=",".join(NAMES),
                   help=f"implementations, from {','.join(NAMES)} (default: all that can run here)")
    p.add_argument("--json", metavar="PATH",
                   help="JSON results (default with a GPU: benchmarks/results/tccg_<dtype>_<date>_<gpu>.json)")
    p.add_argument("--plot", metavar="PATH", help="PNG plot (default: the JSON path with .png)")
    p.add_argument("--runs", type=int, default=30, help=f"timed runs per implementation, >= {MIN_RUNS} (default: 30)")
    p.add_argument("--beta", type=float, default=0.0, help="beta of D = alpha A B + beta C (default: 0)")
    p.add_argument("--compile-only", action="store_true", help="only plan and compile gett's kernels (no GPU needed)")
    p.add_argument("--arch", default="sm_90", help="architecture for --compile-only (default: sm_90)")
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse and check the options; ``only`` becomes a list of contractions, ``peers`` a list of
    names. Exits with a usage error (status 2) on a bad value."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.only = select(parse_ids(args.only)) if args.only else load_suite()
    except ValueError as exc:
        parser.error(f"--only: {exc}")
    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    unknown = [name for name in args.peers if name not in NAMES]
    if unknown or not args.peers:
        parser.error(f"--peers: unknown {','.join(unknown) or '(none given)'}; choose from {','.join(NAMES)}")
    if args.runs < MIN_RUNS:
        parser.error(f"--runs must be at least {MIN_RUNS}")
    return args


def cuda_unavailable() -> str | None:
    """None when CuPy sees a CUDA device, else the reason it does not."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device, or a driver too old for the runtime
        return first_line(exc)
    return None if count > 0 else "no CUDA device"


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]).

    Exit status: 0 when everything ran; 1 when a gett kernel failed to compile (compile-only), or
    gett failed or raised on a contraction, or the run was interrupted; 2 for bad options.
    """
    args = parse_args(argv)
    precision = PRECISIONS[args.dtype]
    reason = None if args.compile_only else cuda_unavailable()
    if reason is not None:
        print(f"No GPU visible to CuPy ({reason}): compile-only report for {args.arch} instead.", flush=True)
    if args.compile_only or reason is not None:
        return run_compile_only(args, precision)
    return run_benchmark(args, precision)


def run_compile_only(args: argparse.Namespace, precision: Precision) -> int:
    """Plan and compile gett's kernels from descriptors for ``args.arch`` and print the report."""
    try:
        records = compile_suite(args.only, precision, args.arch, args.beta)
    except ImportError as exc:  # gett's planner is not there (yet)
        print(f"error: cannot compile: {first_line(exc)}", file=sys.stderr)
        return 1
    if args.json:
        _write_json(args.json, {"mode": "compile-only", "arch": args.arch, "dtype": precision.name, "beta": args.beta,
                                "date": datetime.datetime.now().isoformat(timespec="seconds"),
                                "contractions": records})
    failed = [r for r in records if r["error"] is not None]
    if failed:
        print(f"error: {len(failed)} of {len(records)} contractions failed to compile: "
              + ", ".join(f"#{r['id']}" for r in failed), file=sys.stderr)
        return 1
    return 0


def _json_safe(value):
    """``value`` with every NaN or infinite float replaced by None, so the file is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(_json_safe(data), f, indent=1, allow_nan=False, default=str)  # str: odd report values
        f.write("\n")
    print(f"JSON: {path}")


def device_info() -> dict:
    """Name and properties of the current CUDA device (also for the benchmarks' headers)."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props.get("name", b"unknown GPU")
    try:   # cudaLimitPersistingL2CacheSize (the runner asks CuPy itself: it also times a stand-in gett)
        persisting = cupy.cuda.runtime.deviceGetLimit(0x06)
    except Exception:  # noqa: BLE001 - no such limit (before sm_80)
        persisting = 0
    return {
        "name": name.decode(errors="replace").strip("\x00 ") if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props.get('major')}.{props.get('minor')}",
        "multiprocessors": props.get("multiProcessorCount"),
        "l2_bytes": props.get("l2CacheSize") or 50 * 2**20,  # H100's, should the driver not say
        # set aside for persisting accesses: gett's staging copies keep their lines there (#14 101.5 against
        # 104.6 us without a set-aside, session 44)
        "l2_persisting_bytes": persisting,
        "memory_bytes": props.get("totalGlobalMem"),
    }


def _versions(peer_versions: dict) -> dict:
    """Versions of the driver, CUDA runtime, NVRTC (CuPy's, and the one gett loads where gett is imported),
    CuPy, Python and of the peers found."""
    import cupy

    versions = {
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        "cupy": cupy.__version__,
        "python": platform.python_version(),
    }
    # gett loads its own NVRTC (pip's nvidia-cuda-nvrtc, or one found first on the path): it may differ
    # from CuPy's, and it decides the registers of gett's kernels
    gett_nvrtc = sys.modules.get("gett.nvrtc")
    if gett_nvrtc is not None:
        try:
            versions["gett_nvrtc"] = ".".join(map(str, gett_nvrtc.nvrtc_version()))
        except sys.modules["gett"].CompileError as exc:   # no NVRTC: gett's rows say why; keep the results
            versions["gett_nvrtc"] = f"unavailable ({exc})"
    if "torch" not in peer_versions and "torch" in sys.modules:
        peer_versions = {**peer_versions, "torch": sys.modules["torch"].__version__}
    return {**versions, **peer_versions}


def default_json_path(precision: Precision, gpu_name: str, today: datetime.date) -> str:
    """``benchmarks/results/tccg_<dtype>_<date>_<gpu>.json``, the GPU name as a lower-case slug."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-") or "gpu"
    return os.path.join("benchmarks", "results", f"tccg_{precision.name}_{today.isoformat()}_{slug}.json")


def _free_device_memory() -> None:
    """Return cached device memory of CuPy (and PyTorch, when loaded) between contractions."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules:
        sys.modules["torch"].cuda.empty_cache()


def _measure_all(args: argparse.Namespace, precision: Precision, peers, ceiling, l2_bytes: int):
    """Every runnable peer on every contraction, with a progress bar; (cases, interrupted). Ctrl-C
    stops after the results so far."""
    from .measure import measure_case

    contractions: list[Contraction] = args.only
    cases, progress = [], Progress(len(contractions))
    try:
        for done, c in enumerate(contractions):
            cases.append(measure_case(
                c, precision, peers.prepare, ceiling, l2_bytes, args.runs, ALPHA, args.beta,
                on_impl=lambda name, done=done, c=c: progress.update(done, f"#{c.id} {c.notation} {name}")))
            _free_device_memory()
        progress.update(len(contractions), "done")
    except KeyboardInterrupt:
        return cases, True
    finally:
        progress.close()
    return cases, False


def run_benchmark(args: argparse.Namespace, precision: Precision) -> int:
    """Ceilings, then every implementation on every contraction; table, summary, JSON, plot."""
    from . import ceilings
    from .measure import WARMUP
    from .peers import Peers
    from .plot import plot_vs_cutensor
    from .precision import library_math

    try:
        precision.dtype  # bf16 needs ml_dtypes: say so before measuring anything
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    device = device_info()
    print(f"GPU: {device['name']} (compute capability {device['compute_capability']}, "
          f"L2 {device['l2_bytes'] / 2**20:.0f} MiB, {device['l2_persisting_bytes'] / 2**20:.1f} MiB of it set aside "
          f"for persisting accesses); {precision.description}; beta = {args.beta:g}", flush=True)
    with library_math(precision):
        try:
            ceiling = ceilings.measure(precision)
        except Exception as exc:  # without ceilings there is no roofline to report against
            print(f"error: measuring the ceilings failed: {first_line(exc)}", file=sys.stderr)
            return 1
        print(f"Ceilings: device copy {ceiling.bandwidth / 1e12:.2f} TB/s (read + write), "
              f"{precision.name} GEMM {ceiling.peak_flops / 1e12:.1f} TFLOP/s ({ceiling.gemm_library})", flush=True)
        peers = Peers(args.peers)  # after the GEMM: cuBLAS is loaded, which libcutensor links against
        try:
            for note in peers.notes:
                print(f"note: {note}")
            names = list(peers.prepare)
            if not names:
                print("error: none of the requested implementations can run here", file=sys.stderr)
                return 1
            cases, interrupted = _measure_all(args, precision, peers, ceiling, device["l2_bytes"])
        finally:
            peers.close()
    if interrupted:
        print(f"Interrupted: reporting the {len(cases)} contractions that finished.")
    print()
    print(format_table(cases, names))
    print()
    print(format_summary(cases, names))

    now = datetime.datetime.now()
    meta = {
        "suite": "TCCG 48",
        "date": now.isoformat(timespec="seconds"),
        "gpu": device,
        "versions": _versions(peers.versions),
        "precision": {"name": precision.name, "description": precision.description,
                      "tolerance": precision.tolerance},
        "options": {"runs": args.runs, "warmup": WARMUP, "alpha": ALPHA, "beta": args.beta,
                    "only": [c.id for c in args.only], "peers": args.peers},
        "ceilings": {"copy_bandwidth_bytes_per_s": ceiling.bandwidth, "gemm_flops_per_s": ceiling.peak_flops,
                     "gemm_library": ceiling.gemm_library},
        "notes": peers.notes,
        "interrupted": interrupted,
    }
    json_path = args.json or default_json_path(precision, device["name"], now.date())
    _write_json(json_path, to_json(meta, cases, names))
    plot_path = args.plot or os.path.splitext(json_path)[0] + ".png"
    try:
        skipped = plot_vs_cutensor(cases, names, plot_path, f"TCCG suite on {device['name']}: {precision.description}")
    except Exception as exc:  # the figures are in the JSON already; a plotting problem is only a note
        skipped = first_line(exc)
    print(f"note: no plot ({skipped})" if skipped else f"Plot: {plot_path}")

    gett_bad = any(case.impls["gett"].status != OK for case in cases if "gett" in case.impls)
    return 1 if gett_bad or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
