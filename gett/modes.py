"""Mode analysis: validate the modes of A, B, C and sort them into the GEMM's M, N, K and L groups.

Classes (DESIGN.md, "The contraction"): M = in A and C only; N = in B and C only; K = in A and B only
(summed); L = in A, B and C (batch). A mode in only one input is summed as a K mode whose stride is 0
in the other input; a mode in C only is broadcast — an M mode with stride 0 in A — and must be declared
in ``broadcast``. Modes of extent 1 take no part in the tables.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .errors import ExtentMismatchError, ModeError
from .layout import IndexTable, coalesce

GROUPS = ("M", "N", "K", "L")
# tensors whose offsets each group contributes to (C and D share modes but may differ in strides)
GROUP_TENSORS = {"M": ("A", "C", "D"), "N": ("B", "C", "D"), "K": ("A", "B"), "L": ("A", "B", "C", "D")}


def normalize_modes(modes, ndim: int, tensor: str) -> tuple:
    """Turn a mode spec (string of characters, or a sequence of ints/strings) into a tuple of labels."""
    if isinstance(modes, str):
        labels = tuple(modes)
    elif isinstance(modes, Sequence):
        labels = tuple(modes)
    else:
        raise ModeError(f"modes of {tensor} must be a string or a sequence of labels, got {modes!r}")
    for m in labels:
        if not isinstance(m, Hashable) or isinstance(m, (float, bool)) or not isinstance(m, (int, str)):
            raise ModeError(f"mode label {m!r} of {tensor} must be an int or a string")
    if len(labels) != ndim:
        raise ModeError(f"{tensor} has {ndim} dimensions but {len(labels)} modes were given: {modes!r}")
    seen = set()
    for m in labels:
        if m in seen:
            raise ModeError(
                f"mode {m!r} appears twice in {tensor} ({modes!r}); repeated modes (diagonals) are not "
                f"supported by plan_contraction — gett.einsum handles them as strided views")
        seen.add(m)
    return labels


@dataclass(frozen=True)
class ModeAnalysis:
    extents: dict        # label -> extent
    group_of: dict       # label -> "M" | "N" | "K" | "L"
    summed_single: tuple  # labels summed that appear in one input only
    broadcast: tuple     # labels in C only


def analyse_modes(descriptors: dict, modes: dict, broadcast=()) -> ModeAnalysis:
    """Check extents agree across tensors and classify every mode. ``descriptors``/``modes`` are keyed
    by "A", "B", "C" (and "D", which shares C's modes)."""
    extents, where = {}, {}
    for t in ("A", "B", "C"):
        for m, e in zip(modes[t], descriptors[t].shape):
            if m in extents and extents[m] != e:
                first = where[m][0]
                raise ExtentMismatchError(
                    f"mode {m!r} has extent {extents[m]} in {first} but {e} in {t}")
            extents.setdefault(m, e)
            where.setdefault(m, []).append(t)
    if "D" in descriptors and descriptors["D"].shape != descriptors["C"].shape:
        raise ExtentMismatchError(
            f"D has shape {descriptors['D'].shape} but C has shape {descriptors['C'].shape}; they share modes")
    broadcast = tuple(broadcast)
    for m in broadcast:
        if m not in extents:
            raise ModeError(f"broadcast mode {m!r} is not a mode of C")
    group_of, single, bcast = {}, [], []
    for m, ts in where.items():
        ins = set(ts)
        if ins == {"A", "B", "C"}:
            group_of[m] = "L"
        elif ins == {"A", "C"}:
            group_of[m] = "M"
        elif ins == {"B", "C"}:
            group_of[m] = "N"
        elif ins == {"A", "B"}:
            group_of[m] = "K"
        elif ins in ({"A"}, {"B"}):
            group_of[m] = "K"
            single.append(m)
        else:  # C only
            if m not in broadcast:
                raise ModeError(
                    f"mode {m!r} of C (extent {extents[m]}) is in neither A nor B; pass broadcast=[{m!r}] "
                    f"if D should be broadcast along it")
            group_of[m] = "M"
            bcast.append(m)
    for m in broadcast:
        if m not in bcast:
            raise ModeError(f"broadcast mode {m!r} is also a mode of A or B, so it is not broadcast")
    return ModeAnalysis(extents, group_of, tuple(single), tuple(bcast))


def build_tables(analysis: ModeAnalysis, descriptors: dict, modes: dict, traffic: dict) -> dict:
    """One :class:`IndexTable` per group, modes ordered and merged.

    Order: the group's innermost mode is the stride-1 mode of the tensor that moves the most bytes
    (``traffic``: tensor name -> bytes) among those whose stride-1 mode is in the group, the rest follow
    that tensor's strides ascending, ties broken by the other tensors' strides; then neighbours
    contiguous together in every tensor are merged.
    """
    stride = {t: dict(zip(modes["C" if t == "D" else t], descriptors[t].strides)) for t in descriptors}
    tables = {}
    for g in GROUPS:
        tensors = tuple(t for t in GROUP_TENSORS[g] if t in descriptors)
        labels = [m for m, grp in analysis.group_of.items() if grp == g and analysis.extents[m] != 1]
        # A tensor whose stride-1 mode is elsewhere loads along that other group and doesn't care
        # about this order; among those that do care, the one moving the most bytes decides. D also
        # cares where its stride-1 mode is a short run (< 64) whose contiguous continuation lies here:
        # the epilogue can then cross into this group after each run (codegen.epilogue_cross).
        cares = {t: any(abs(stride[t].get(m, 0)) == 1 for m in labels) for t in tensors}
        if "D" in cares and not cares["D"]:
            run = next((analysis.extents[m] for m, s in stride["D"].items() if abs(s) == 1), 0)
            cares["D"] = 1 < run < 64 and any(abs(stride["D"].get(m, 0)) == run for m in labels)
        key_tensor = max(tensors, key=lambda t: (cares[t], traffic.get(t, 0), -tensors.index(t)))
        others = [t for t in tensors if t != key_tensor]

        def order(m):
            ks = abs(stride[key_tensor].get(m, 0))
            return (ks == 0, ks, tuple(abs(stride[t].get(m, 0)) or float("inf") for t in others))
        labels.sort(key=order)
        per_tensor = {t: tuple(stride[t].get(m, 0) for m in labels) for t in tensors}
        merged, ext, strides = coalesce(tuple((m,) for m in labels),
                                        tuple(analysis.extents[m] for m in labels), per_tensor)
        tables[g] = IndexTable(g, merged, ext, tuple((t, strides[t]) for t in tensors))
    return tables
