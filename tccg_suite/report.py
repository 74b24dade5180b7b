"""Benchmark results: the records, their summaries (geomeans per group), the table and the JSON.

Everything here is plain data and text, so it is tested without a GPU.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from .suite import GROUP_NAMES, Contraction

REFERENCE = "cutensor"  # the implementation others are compared with

OK, FAILED, ERROR = "ok", "failed", "error"


@dataclass
class ImplResult:
    """One implementation on one contraction.

    ``status`` is OK, FAILED (wrong result: timed, shown marked, left out of geomeans) or ERROR
    (raised: ``error`` holds the exception's first line; times may be missing).
    """

    status: str
    samples_ms: list[float] = field(default_factory=list)
    rel_error: float | None = None
    plan_seconds: float | None = None
    error: str | None = None
    kernel: dict | None = None
    host_ms: float | None = None     # the host's time per timed call (its events included)
    gpu_held: bool | None = None     # whether the GPU was held until every timed call was enqueued

    @property
    def median_ms(self) -> float | None:
        """Median of the timed runs, None when there are none."""
        return statistics.median(self.samples_ms) if self.samples_ms else None


@dataclass
class CaseResult:
    """All implementations on one contraction, with its roofline."""

    contraction: Contraction
    flops: int
    bytes: int
    roofline_ms: float
    rotate: int  # buffer sets cycled through while timing
    impls: dict[str, ImplResult] = field(default_factory=dict)

    def _valid_ms(self, name: str) -> float | None:
        result = self.impls.get(name)
        return result.median_ms if result is not None and result.status == OK else None

    def fraction(self, name: str) -> float | None:
        """Roofline time over the median time; None unless the implementation passed."""
        ms = self._valid_ms(name)
        return self.roofline_ms / ms if ms else None

    def vs_reference(self, name: str) -> float | None:
        """cuTENSOR's median over this implementation's (>1: faster than cuTENSOR); None unless both
        passed."""
        ms, ref = self._valid_ms(name), self._valid_ms(REFERENCE)
        return ref / ms if ms and ref else None


def geomean(values) -> float | None:
    """Geometric mean of the values that are not None; None when there are none."""
    logs = [math.log(v) for v in values if v is not None]
    return math.exp(sum(logs) / len(logs)) if logs else None


def summary(cases: list[CaseResult], names: list[str]) -> dict[str, dict[str, dict[str, float | None]]]:
    """``{group: {impl: {"fraction": geomean, "vs_cutensor": geomean}}}`` for the groups present, in
    suite order, plus "all"."""
    groups = [g for g in GROUP_NAMES if any(c.contraction.group == g for c in cases)] + ["all"]
    table = {}
    for group in groups:
        members = [c for c in cases if group in ("all", c.contraction.group)]
        table[group] = {
            name: {
                "fraction": geomean(c.fraction(name) for c in members),
                "vs_cutensor": geomean(c.vs_reference(name) for c in members),
            }
            for name in names
        }
    return table


def first_line(exc: BaseException) -> str:
    """``TypeName: first line of the message`` of an exception."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def format_or_dash(value, spec: str) -> str:
    """``value`` formatted with ``spec``, or "-" when it is unknown (None)."""
    return "-" if value is None else format(value, spec)


def _impl_cells(case: CaseResult, name: str, with_ratio: bool, with_plan: bool) -> list[str]:
    """Cells of one implementation in a table row: µs, % of roofline, ×cuTENSOR, plan seconds."""
    result = case.impls.get(name)
    if result is None or result.status == ERROR:
        time_cell, fraction, ratio = ("ERROR" if result else "-"), "-", "-"
    else:
        us = None if result.median_ms is None else result.median_ms * 1e3
        time_cell = format_or_dash(us, ".1f") + ("!" if result.status == FAILED else "")
        fraction, ratio = format_or_dash(case.fraction(name), ".0%"), format_or_dash(case.vs_reference(name), ".2f")
    cells = [time_cell, fraction]
    if with_ratio:
        cells.append(ratio)
    if with_plan:
        cells.append(format_or_dash(result.plan_seconds if result else None, ".2f"))
    return cells


def format_table(cases: list[CaseResult], names: list[str]) -> str:
    """One row per contraction: id, notation, M×N×K, roofline µs, then per implementation the
    median µs ("!" after a failed correctness check), fraction of roofline, speed relative to
    cuTENSOR (when cuTENSOR ran), and for gett the plan+compile seconds. Then the notes on
    failures and errors."""
    with_ref = REFERENCE in names
    columns = ["#", "contraction", "M×N×K", "roof µs"]
    layout = []
    for name in names:
        with_ratio, with_plan = with_ref and name != REFERENCE, name == "gett"
        layout.append((name, with_ratio, with_plan))
        columns += [f"{name} µs", "roof"] + (["×cuT"] if with_ratio else []) + (["plan s"] if with_plan else [])
    rows = []
    for case in cases:
        c = case.contraction
        row = [str(c.id), c.notation, f"{c.m}×{c.n}×{c.k}", f"{case.roofline_ms * 1e3:.1f}"]
        for name, with_ratio, with_plan in layout:
            row += _impl_cells(case, name, with_ratio, with_plan)
        rows.append(row)
    widths = [max(len(r[i]) for r in [columns] + rows) for i in range(len(columns))]
    left = {1, 2}  # notation and sizes read better left-aligned
    lines = ["  ".join(cell.ljust(w) if i in left else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in [columns] + rows]
    notes = [f"#{case.contraction.id} {name} {_note(result)}"
             for case in cases for name, result in case.impls.items() if result.status != OK]
    if notes:
        lines += ["", "! = wrong result (left out of geomeans). Failures and errors:"] + ["  " + n for n in notes]
    return "\n".join(lines)


def _note(result: ImplResult) -> str:
    if result.status == ERROR:
        return f"ERROR: {result.error}"
    return f"FAILED: relative error {format_or_dash(result.rel_error, '.2e')}"


def format_summary(cases: list[CaseResult], names: list[str]) -> str:
    """The geomean fraction of roofline per group and overall for each implementation, then the
    geomean speed relative to cuTENSOR when cuTENSOR ran."""
    table = summary(cases, names)
    sections = [("Geomean fraction of roofline", "fraction", ".1%")]
    if REFERENCE in names:
        sections.append(("Geomean speed relative to cuTENSOR (cuTENSOR time / time; >1 = faster)",
                         "vs_cutensor", ".2f"))
    width = max(len(n) for n in names + ["00000.0%"])
    lines = []
    for title, key, spec in sections:
        lines += ["", title, "group  " + "  ".join(n.rjust(width) for n in names)]
        for group, per_impl in table.items():
            cells = [format_or_dash(per_impl[n][key], spec).rjust(width) for n in names]
            lines.append(f"{('#' + group) if group != 'all' else 'all':<6} " + "  ".join(cells))
    return "\n".join(lines).lstrip("\n")


def to_json(meta: dict, cases: list[CaseResult], names: list[str]) -> dict:
    """The whole run as JSON-ready data: ``meta`` (date, GPU, versions, ceilings, options), every
    per-contraction figure, and the summary."""
    return {
        **meta,
        "implementations": names,
        "contractions": [
            {
                "id": case.contraction.id,
                "notation": case.contraction.notation,
                "group": case.contraction.group,
                "m": case.contraction.m,
                "n": case.contraction.n,
                "k": case.contraction.k,
                "flops": case.flops,
                "min_bytes": case.bytes,
                "roofline_ms": case.roofline_ms,
                "buffer_sets": case.rotate,
                "results": {
                    name: {
                        "status": r.status,
                        "median_ms": r.median_ms,
                        "min_ms": min(r.samples_ms) if r.samples_ms else None,
                        "max_ms": max(r.samples_ms) if r.samples_ms else None,
                        "samples_ms": r.samples_ms,
                        "fraction_of_roofline": case.fraction(name),
                        "vs_cutensor": case.vs_reference(name),
                        "rel_error": r.rel_error,
                        "plan_seconds": r.plan_seconds,
                        "error": r.error,
                        "kernel": r.kernel,
                        "host_ms_per_call": r.host_ms,
                        "gpu_held": r.gpu_held,
                    }
                    for name, r in case.impls.items()
                },
            }
            for case in cases
        ],
        "summary": summary(cases, names),
    }
