"""The few parts of gett's API the benchmark uses, kept in one place.

``gett.plan_contraction(A, modes_A, B, modes_B, C, modes_C, compute_type=None, beta=None,
device_arch=None)`` takes arrays or ``gett.TensorDescriptor(shape, strides_in_elements, dtype)``
(``beta`` is a hint: 0 means C is never read); the plan has a ``kernel_report``;
``gett.contract(plan, alpha, A, B, beta, C, D)`` runs it.
"""

from __future__ import annotations

from types import ModuleType

from .suite import Contraction

# Attributes of plan.kernel_report, in the order the reports print them.
KERNEL_FIELDS = ("registers", "spill_stores", "spill_loads", "shared_bytes", "compile_seconds", "from_cache")


def load_gett() -> ModuleType:
    """Import gett; ImportError with the reason when it is missing or lacks the planner."""
    import gett

    missing = [name for name in ("plan_contraction", "contract", "TensorDescriptor") if not hasattr(gett, name)]
    if missing:
        raise ImportError(f"gett has no {', '.join(missing)} yet")
    return gett


def version(gett: ModuleType) -> str | None:
    """gett's version: its ``__version__``, else the installed distribution's, else None."""
    if hasattr(gett, "__version__"):
        return str(gett.__version__)
    from importlib import metadata

    try:
        return metadata.version("gett")
    except metadata.PackageNotFoundError:
        return None


def descriptors(gett: ModuleType, contraction: Contraction, dtype_name: str) -> dict[str, object]:
    """Column-major ``TensorDescriptor`` of A, B and C of ``contraction``, data type named by its
    numpy name (gett knows "bfloat16" without the ml_dtypes package)."""
    return {t: gett.TensorDescriptor(contraction.shape(t), contraction.strides(t), dtype_name) for t in "ABC"}


def kernel_report(plan) -> dict[str, object] | None:
    """``plan.kernel_report`` as a dict of ``KERNEL_FIELDS`` (None for a missing field), or None."""
    report = getattr(plan, "kernel_report", None)
    if report is None:
        return None
    return {name: getattr(report, name, None) for name in KERNEL_FIELDS}
