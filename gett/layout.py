"""Index tables: how a linear GEMM index (row m, column n, depth k or batch l) maps to memory offsets.

One GEMM dimension is a group of tensor modes in a chosen order. For a linear index ``i`` the
coordinate of mode ``j`` is ``(i // divisor_j) % extent_j``, with ``divisor_j`` the product of the
extents before mode ``j``, and the offset of that element in tensor ``T`` is
``Σ_j coordinate_j * stride_T[j]``. This is CuTe's (shape, stride) layout evaluated colexicographically;
:class:`IndexTable` holds one shape and the strides of every tensor that has the group's modes
(a tensor without a mode has stride 0 there). The generated kernels bake these numbers in as
compile-time constants; the numpy reference executor evaluates the very same tables.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np


@dataclass(frozen=True)
class IndexTable:
    """One GEMM dimension: ``modes`` (each a tuple of the user's labels merged into it), their
    ``extents``, and ``strides`` as ``((tensor_name, (stride per mode, ...)), ...)``."""
    name: str
    modes: tuple
    extents: tuple
    strides: tuple

    @property
    def size(self) -> int:
        """Number of linear indices (the GEMM extent of this dimension; 1 for an empty group)."""
        return prod(self.extents)

    @property
    def divisors(self) -> tuple:
        out, d = [], 1
        for e in self.extents:
            out.append(d)
            d *= e
        return tuple(out)

    @property
    def tensors(self) -> tuple:
        return tuple(t for t, _ in self.strides)

    def strides_of(self, tensor: str) -> tuple:
        for t, s in self.strides:
            if t == tensor:
                return s
        return (0,) * len(self.extents)

    def offsets(self, tensor: str, index=None) -> np.ndarray:
        """Element offsets in ``tensor`` of linear indices ``index`` (default: all of them), int64."""
        idx = np.arange(self.size, dtype=np.int64) if index is None else np.asarray(index, np.int64)
        out = np.zeros(idx.shape, np.int64)
        for d, e, s in zip(self.divisors, self.extents, self.strides_of(tensor)):
            if s:
                out += (idx // d % e) * s
        return out

    def offset_range(self, tensor: str) -> tuple:
        """(lowest, highest) offset this group can contribute in ``tensor``."""
        lo = hi = 0
        for e, s in zip(self.extents, self.strides_of(tensor)):
            span = (e - 1) * s
            lo, hi = lo + min(span, 0), hi + max(span, 0)
        return lo, hi

    def describe(self) -> str:
        def label(m):
            return "".join(map(str, m)) if all(isinstance(x, str) and len(x) == 1 for x in m) else \
                "(" + ",".join(map(str, m)) + ")"
        parts = [f"{label(m)}:{e}" for m, e in zip(self.modes, self.extents)]
        lines = [f"{self.name} = {self.size}  [{' '.join(parts) or '-'}]  divisors {self.divisors}"]
        for t, s in self.strides:
            lines.append(f"    {t} strides {s}")
        return "\n".join(lines)


def coalesce(modes, extents, strides_by_tensor):
    """Merge neighbours (in the given order) that are contiguous together in every tensor.

    Mode ``j`` following mode ``i`` merges into it when, for every tensor, ``stride[j] ==
    stride[i] * extent[i]`` — then one index of extent ``e_i * e_j`` with ``stride[i]`` addresses
    both. Returns new (modes, extents, strides_by_tensor).
    """
    out_modes, out_ext = [], []
    out_str = {t: [] for t in strides_by_tensor}
    for j, (m, e) in enumerate(zip(modes, extents)):
        if out_modes and all(s[j] == out_str[t][-1] * out_ext[-1] for t, s in strides_by_tensor.items()):
            out_modes[-1] = out_modes[-1] + m
            out_ext[-1] *= e
            continue
        out_modes.append(m)
        out_ext.append(e)
        for t, s in strides_by_tensor.items():
            out_str[t].append(s[j])
    return tuple(out_modes), tuple(out_ext), {t: tuple(s) for t, s in out_str.items()}
