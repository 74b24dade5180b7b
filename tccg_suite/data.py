"""Device data of one contraction: random column-major tensors, the f64 reference, the error."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cupy
import numpy

from .suite import Contraction


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
