"""Compile-only report: plan and compile gett's kernel for every contraction without a GPU.

Plans are built from ``gett.TensorDescriptor`` (no arrays) for a named architecture, so this runs
anywhere NVRTC does (CI, a laptop) and also warms gett's kernel cache before a GPU run.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from . import gett_api
from .precision import Precision
from .report import first_line, format_or_dash
from .suite import Contraction

_HEADER = (f"{'#':>3} {'contraction':<18} {'M':>8} {'N':>8} {'K':>6} {'regs':>5} {'spill st/ld':>11} "
           f"{'smem B':>7} {'plan s':>7} {'compile s':>9} {'cache':>5}")


def _row(c: Contraction, record: dict) -> str:
    head = f"{c.id:>3} {c.notation:<18} {c.m:>8} {c.n:>8} {c.k:>6}"
    if record["error"] is not None:
        return f"{head} COMPILE FAILED: {record['error']}"
    cell = {name: format_or_dash(record[name], "d") for name in ("registers", "spill_stores", "spill_loads",
                                                                "shared_bytes")}
    spills = f"{cell['spill_stores']}/{cell['spill_loads']}"
    compile_s = format_or_dash(record["compile_seconds"], ".2f")
    cache = {None: "-", True: "yes", False: "no"}[record["from_cache"]]
    return (f"{head} {cell['registers']:>5} {spills:>11} {cell['shared_bytes']:>7} "
            f"{record['plan_seconds']:>7.2f} {compile_s:>9} {cache:>5}")


def compile_suite(contractions: list[Contraction], precision: Precision, arch: str, beta: float,
                  out: TextIO | None = None) -> list[dict]:
    """Plan and compile each contraction for ``arch``, printing a table row as each one finishes.
    The plans are the ones a GPU run with this ``beta`` makes (column-major, 256-byte aligned), so
    this also fills gett's kernel cache for that run.

    Returns one record per contraction: id, notation, m, n, k, plan_seconds (wall time of
    ``plan_contraction``), the kernel report's fields, and ``error`` (None, or the first line of the
    exception when planning or compiling failed). Prints to ``out`` (default: sys.stdout).
    ImportError when gett's planner is missing.
    """
    out = out if out is not None else sys.stdout
    gett = gett_api.load_gett()
    print(f"gett compile-only report: {arch}, {precision.description}", file=out)
    print(_HEADER, file=out, flush=True)
    records = []
    for c in contractions:
        record = {"id": c.id, "notation": c.notation, "m": c.m, "n": c.n, "k": c.k, "error": None}
        record.update(dict.fromkeys(gett_api.KERNEL_FIELDS))
        desc = gett_api.descriptors(gett, c, precision.dtype_name)
        start = time.perf_counter()
        try:
            plan = gett.plan_contraction(desc["A"], c.modes_A, desc["B"], c.modes_B, desc["C"], c.modes_C,
                                         compute_type=precision.gett_compute, beta=beta, device_arch=arch)
            record.update(gett_api.kernel_report(plan) or {})
        except Exception as exc:  # report every contraction, then fail the run as a whole
            record["error"] = first_line(exc)
        record["plan_seconds"] = time.perf_counter() - start
        records.append(record)
        print(_row(c, record), file=out, flush=True)
    return records
