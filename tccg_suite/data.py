"""Device data of one contraction: random column-major tensors, the f64 reference, the error."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cupy
import numpy

from .suite import Contraction
from .timing import rotation_count


@dataclass
class Buffers:
    """One set of A, B, C (inputs) and D (output), column-major in the modes of the notation."""

    A: cupy.ndarray
    B: cupy.ndarray
    C: cupy.ndarray
    D: cupy.ndarray


def random_tensor(rng: cupy.random.Generator, shape: tuple[int, ...], dtype: numpy.dtype) -> cupy.ndarray:
    """A column-major (``order='F'``) array of ``shape``, uniform in [-1, 1), of ``dtype``."""
    base = numpy.float64 if dtype == numpy.float64 else numpy.float32
    values = rng.random(math.prod(shape), dtype=base)
    values *= 2
    values -= 1
    return values.astype(dtype).reshape(shape, order="F")


def make_buffers(contraction: Contraction, dtype: numpy.dtype, seed: int) -> Buffers:
    """Random A, B, C and an uninitialised D for ``contraction``, reproducible from ``seed``."""
    rng = cupy.random.default_rng(seed)
    A, B, C = (random_tensor(rng, contraction.shape(t), dtype) for t in "ABC")
    return Buffers(A, B, C, cupy.empty(contraction.shape("C"), dtype=dtype, order="F"))


def set_count(contraction: Contraction, dtype: numpy.dtype, l2_bytes: int) -> int:
    """How many buffer sets a timing cycles through so that no call finds its data in an L2 of ``l2_bytes``
    (:func:`tccg_suite.timing.rotation_count` of one set's A, B and C)."""
    return rotation_count(sum(contraction.size(t) for t in "ABC") * numpy.dtype(dtype).itemsize, l2_bytes)


def buffer_sets(contraction: Contraction, dtype: numpy.dtype, l2_bytes: int, seed: int) -> list[Buffers]:
    """:func:`set_count` sets of :func:`make_buffers`, seeded ``seed``, ``seed + 1``, ..."""
    return [make_buffers(contraction, dtype, seed=seed + i) for i in range(set_count(contraction, dtype, l2_bytes))]


def reference(contraction: Contraction, buffers: Buffers, alpha: float, beta: float) -> cupy.ndarray:
    """``alpha * A·B + beta * C`` computed in float64 on the GPU from the same (rounded) inputs."""
    A, B = buffers.A.astype(numpy.float64), buffers.B.astype(numpy.float64)
    result = cupy.einsum(contraction.einsum, A, B)
    if alpha != 1:
        result *= alpha
    if beta != 0:
        result += beta * buffers.C.astype(numpy.float64)
    return result


def relative_error(out, ref: cupy.ndarray) -> float:
    """Relative Frobenius error ``|out - ref| / |ref|`` of a CuPy array or a PyTorch tensor; NaN in
    ``out`` gives NaN. ValueError when the shapes differ."""
    if not isinstance(out, cupy.ndarray):  # a torch tensor: go through f64 so any dtype converts
        out = cupy.from_dlpack(out.double())
    if out.shape != ref.shape:
        raise ValueError(f"output has shape {out.shape}, expected {ref.shape}")
    diff = out.astype(numpy.float64) - ref
    return float(cupy.sqrt(cupy.sum(diff * diff)) / cupy.sqrt(cupy.sum(ref * ref)))
