"""PNG plot of each contraction's speed relative to cuTENSOR (matplotlib, imported lazily)."""

from __future__ import annotations

from .report import REFERENCE, CaseResult, geomean
from .suite import GROUPS


def plot_vs_cutensor(cases: list[CaseResult], names: list[str], path: str, title: str) -> str | None:
    """Write the plot to ``path``: x = contraction id, log-scale y = cuTENSOR time / time, one marker
    series and a dashed geomean line per implementation, group boundaries dotted. Returns None when
    written, else why not (no matplotlib, or nothing to compare with cuTENSOR)."""
    if REFERENCE not in names:
        return "cuTENSOR did not run"
    series = {}
    for name in names:
        if name != REFERENCE:
            points = [(c.contraction.id, c.vs_reference(name)) for c in cases if c.vs_reference(name)]
            if points:
                series[name] = points
    if not series:
        return "no implementation has a result to compare with cuTENSOR's"
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return "matplotlib is not installed"
    fig = Figure(figsize=(13, 5.5))
    ax = fig.subplots()
    for index, (name, points) in enumerate(series.items()):
        ids, ratios = zip(*points)
        mean = geomean(ratios)
        color = f"C{index}"
        ax.plot(ids, ratios, linestyle="none", marker="os^Dv<>"[index % 7], color=color,
                label=f"{name} (geomean {mean:.2f})")
        ax.axhline(mean, color=color, linestyle="--", linewidth=1)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    all_ids = [c.contraction.id for c in cases]
    lo, hi = min(all_ids), max(all_ids)
    ax.set_xlim(lo - 0.7, hi + 0.7)
    for group, first, last in GROUPS:
        if lo < first - 0.5 < hi:
            ax.axvline(first - 0.5, color="grey", linestyle=":", linewidth=1)
        if any(first <= i <= last for i in all_ids):
            centre = (max(first, lo) + min(last, hi)) / 2
            ax.text(centre, 1.01, f"#{group}", transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                    fontsize=8, color="grey")
    ax.set_xticks(all_ids)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("TCCG contraction")
    ax.set_ylabel("speed relative to cuTENSOR (cuTENSOR time / time)")
    ax.set_title(title, pad=16)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return None
