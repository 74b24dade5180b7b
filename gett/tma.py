"""Which operands the Tensor Memory Accelerator (TMA, sm_90) can load, and the 2-D view it loads them as.

A warp-specialised wgmma kernel (``ws``) has a producer warpgroup copy A and B into shared memory with
cp.async, 16 bytes a thread. Where an operand is a plain 2-D matrix — its modes in the row group
merge into one, its modes in K into another, one of the two has stride 1 and the other a multiple of
16 bytes — one thread can instead ask the TMA for the whole tile, a box of the matrix that lands in
the 128-byte-swizzled layout wgmma reads (kernels/tma.cuh), rows and K past the end filled with
zeros. Both operands must qualify (the stage's barrier counts either bytes or copies), and neither
may have an op or a box-transposed tile (the producer would have to touch the data).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .config import KernelConfig

TMA_DTYPES = {"f16": 6, "bf16": 9}   # CUtensorMapDataType of the 16-bit types wgmma reads
_MAX_BOX = 256                       # elements per box side
_MAX_COORDINATE = 2**31 - 1          # box coordinates are 32-bit signed


@dataclass(frozen=True)
class TmaOperand:
    """One operand as the TMA sees it: a 2-D matrix of ``extents`` (inner, outer) elements, the outer
    one ``outer_stride`` bytes apart, copied in boxes of ``box`` (inner, outer) elements."""
    tensor: str          # "A" or "B"
    dtype: str           # a key of TMA_DTYPES
    k_major: bool        # K is the inner (stride-1) dimension; else the rows (M or N) are
    extents: tuple       # (inner, outer) elements
    outer_stride: int    # bytes
    box: tuple           # (inner, outer) elements


def merged_mode(table, tensor: str):
    """(extent, stride) of ``tensor``'s modes in ``table`` as one mode, or None where they do not merge
    (each mode must continue where the one before ends: stride_i+1 = stride_i · extent_i)."""
    extents, strides = table.extents, table.strides_of(tensor)
    if not extents:
        return 1, 0
    for i in range(len(extents) - 1):
        if strides[i + 1] != strides[i] * extents[i]:
            return None
    return math.prod(extents), strides[0]


def tma_operand(plan, cfg: KernelConfig, tensor: str, layout) -> TmaOperand | None:
    """``tensor``'s TMA view under ``cfg`` with shared-memory ``layout`` (gett.codegen.OperandLayout) of
    the (box-tiled) ``plan``, or None where the TMA cannot load it."""
    rows_group, rows = ("M", cfg.bm) if tensor == "A" else ("N", cfg.bn)
    desc = plan.descriptors[tensor]
    op = plan.ops.op_a if tensor == "A" else plan.ops.op_b
    if desc.dtype.name not in TMA_DTYPES or op is not None or layout.step != 1 or not layout.is_async:
        return None
    row_mode, k_mode = merged_mode(plan.tables[rows_group], tensor), merged_mode(plan.tables["K"], tensor)
    if row_mode is None or k_mode is None:
        return None
    (row_extent, row_stride), (k_extent, k_stride) = row_mode, k_mode
    k_major = not layout.row_contig
    inner_stride, outer_stride = (k_stride, row_stride) if k_major else (row_stride, k_stride)
    item = desc.dtype.itemsize
    if inner_stride != 1 or outer_stride <= 0 or outer_stride * item % 16 or desc.alignment < 16:
        return None
    extents = (k_extent, row_extent) if k_major else (row_extent, k_extent)
    if max(extents) + max(rows, cfg.bk) > _MAX_COORDINATE:
        return None
    box = (cfg.bk, rows) if k_major else (64, cfg.bk)
    if max(box) > _MAX_BOX:
        return None
    return TmaOperand(tensor, desc.dtype.name, k_major, extents, outer_stride * item, box)


def tma_operands(plan, cfg: KernelConfig, layouts) -> tuple | None:
    """(A's, B's) TMA views where the kernel loads both through the TMA, else None: a warp-specialised
    wgmma kernel over one batch, both operands plain 2-D matrices (see :func:`tma_operand`)."""
    if cfg.math != "wgmma" or not cfg.ws or plan.batch != 1:
        return None
    views = tuple(tma_operand(plan, cfg, t, x) for t, x in zip("AB", layouts))
    return views if all(views) else None
