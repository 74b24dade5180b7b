"""The 48 TCCG contractions as records.

The data lives in ``tccg48.txt``, one contraction a line: ``id C-A-B extents...``. ``abc-bda-dc``
means ``C[a,b,c] = sum_d A[b,d,a] * B[d,c]``. Tensors are column-major (the first mode of each tensor
has stride 1) and the extents are listed in alphabetical order of the modes. The suite has no batch
modes: every mode is in exactly two of the three tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Iterable

# (name, first id, last id) of the groups of similar contractions the results are summarised by.
GROUPS: tuple[tuple[str, int, int], ...] = (
    ("1-8", 1, 8),
    ("9-11", 9, 11),
    ("12", 12, 12),
    ("13-19", 13, 19),
    ("20-30", 20, 30),
    ("31-48", 31, 48),
)
GROUP_NAMES: tuple[str, ...] = tuple(name for name, _, _ in GROUPS)


@dataclass(frozen=True)
class Contraction:
    """One contraction ``C[modes_C] = sum A[modes_A] * B[modes_B]`` with its extents.

    Modes are strings of single-character labels; ``extents`` maps every label to its extent.
    """

    id: int
    notation: str
    modes_C: str
    modes_A: str
    modes_B: str
    extents: dict[str, int] = field(hash=False)  # compared, but a dict cannot be hashed

    def modes(self, tensor: str) -> str:
        """Modes of ``tensor`` ("A", "B" or "C"), first mode = stride-1 mode."""
        return {"A": self.modes_A, "B": self.modes_B, "C": self.modes_C}[tensor]

    def shape(self, tensor: str) -> tuple[int, ...]:
        """Extents of ``tensor`` in the order of its modes."""
        return tuple(self.extents[m] for m in self.modes(tensor))

    def strides(self, tensor: str) -> tuple[int, ...]:
        """Column-major strides of ``tensor`` in elements (first mode has stride 1)."""
        strides, step = [], 1
        for extent in self.shape(tensor):
            strides.append(step)
            step *= extent
        return tuple(strides)

    def size(self, tensor: str) -> int:
        """Number of elements of ``tensor``."""
        return math.prod(self.shape(tensor))

    def _product(self, modes: str, excluded: str) -> int:
        """Product of the extents of the modes in ``modes`` but not in ``excluded``; as every mode is
        in exactly two tensors, A minus B is A and C, and so on."""
        return math.prod(self.extents[m] for m in modes if m not in excluded)

    @property
    def m(self) -> int:
        """Product of the extents of the modes in A and C (free modes of A)."""
        return self._product(self.modes_A, self.modes_B)

    @property
    def n(self) -> int:
        """Product of the extents of the modes in B and C (free modes of B)."""
        return self._product(self.modes_B, self.modes_A)

    @property
    def k(self) -> int:
        """Product of the extents of the modes in A and B (contracted modes)."""
        return self._product(self.modes_A, self.modes_C)

    @property
    def flops(self) -> int:
        """Floating-point operations of the contraction: one multiply and one add per term."""
        return 2 * self.m * self.n * self.k

    def min_bytes(self, itemsize_in: int, itemsize_out: int, beta_nonzero: bool) -> int:
        """Bytes a perfect implementation moves: A and B read once, D written once, C read once
        only when beta != 0 (C and D have ``itemsize_out``)."""
        inputs = (self.size("A") + self.size("B")) * itemsize_in
        outputs = self.size("C") * itemsize_out * (2 if beta_nonzero else 1)
        return inputs + outputs

    @property
    def group(self) -> str:
        """Name of the group this contraction belongs to (one of ``GROUP_NAMES``)."""
        return group_of(self.id)

    @property
    def einsum(self) -> str:
        """The contraction as an einsum string, e.g. ``"bda,dc->abc"`` for #1."""
        return f"{self.modes_A},{self.modes_B}->{self.modes_C}"


def group_of(contraction_id: int) -> str:
    """Group name of a contraction id; ValueError outside 1..48."""
    for name, first, last in GROUPS:
        if first <= contraction_id <= last:
            return name
    raise ValueError(f"no TCCG contraction has id {contraction_id}")


def parse_line(line: str) -> Contraction:
    """Parse one line ``id C-A-B extents...`` of the suite file and check it is a valid
    contraction without batch modes; ValueError naming the line otherwise."""
    fields = line.split()
    if len(fields) < 3:
        raise ValueError(f"TCCG line has too few fields: {line!r}")
    notation = fields[1]
    parts = notation.split("-")
    if len(parts) != 3:
        raise ValueError(f"TCCG notation is not C-A-B: {line!r}")
    modes_C, modes_A, modes_B = parts
    labels = sorted(set(notation) - {"-"})
    values = [int(v) for v in fields[2:]]
    if len(values) != len(labels):
        raise ValueError(f"{len(labels)} modes but {len(values)} extents: {line!r}")
    for modes in parts:
        if len(set(modes)) != len(modes):
            raise ValueError(f"repeated mode in {modes!r}: {line!r}")
    for label in labels:
        if sum(label in modes for modes in parts) != 2:
            raise ValueError(f"mode {label!r} is not in exactly two tensors: {line!r}")
    return Contraction(int(fields[0]), notation, modes_C, modes_A, modes_B, dict(zip(labels, values)))


@lru_cache(maxsize=None)
def _suite() -> tuple[Contraction, ...]:
    text = resources.files(__package__).joinpath("tccg48.txt").read_text()
    return tuple(parse_line(line) for line in text.splitlines() if line.strip())


def load_suite() -> list[Contraction]:
    """The 48 contractions, in id order."""
    return list(_suite())


def select(ids: Iterable[int]) -> list[Contraction]:
    """The contractions with the given ids, in the given order; ValueError for an unknown id."""
    by_id = {c.id: c for c in _suite()}
    chosen = []
    for i in ids:
        if i not in by_id:
            raise ValueError(f"no TCCG contraction has id {i} (ids are 1..{len(by_id)})")
        chosen.append(by_id[i])
    return chosen


def parse_ids(spec: str) -> list[int]:
    """Ids from a spec like ``"1,7,20-30"``: sorted, without duplicates; ValueError if malformed."""
    ids: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        try:
            lo = int(first)
            hi = int(last) if sep else lo
        except ValueError:
            raise ValueError(f"not an id or a range of ids: {part!r}") from None
        if hi < lo:
            raise ValueError(f"empty range of ids: {part!r}")
        ids.update(range(lo, hi + 1))
    if not ids:
        raise ValueError(f"no ids in {spec!r}")
    return sorted(ids)
