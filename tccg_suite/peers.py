"""The implementations the benchmark compares, behind one interface.

For a :class:`Problem` (a contraction, its precision, the buffer sets, alpha and beta) an
implementation's ``prepare`` plans once and returns a :class:`Prepared` whose ``run(i)`` enqueues the
contraction on buffer set ``i`` and returns the output: D of that set for gett and cuTENSOR (which
write into a given D), a fresh array for the einsum peers (which is how their users call them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from . import gett_api
from .cutensor import Cutensor, load_library
from .data import Buffers
from .precision import Precision
from .report import first_line
from .suite import Contraction

NAMES = ("gett", "cutensor", "cutensor-jit", "torch", "cupy")


@dataclass
class Problem:
    """What every implementation is given."""

    contraction: Contraction
    precision: Precision
    sets: list[Buffers]
    alpha: float
    beta: float


@dataclass
class Prepared:
    """A planned implementation: ``run(i)`` works on buffer set ``i`` and returns its output."""

    run: Callable[[int], object]
    plan_seconds: float | None = None
    kernel: dict | None = None
    close: Callable[[], None] = lambda: None


Prepare = Callable[[Problem], Prepared]


def _prepare_gett(problem: Problem) -> Prepared:
    gett = gett_api.load_gett()
    c, first = problem.contraction, problem.sets[0]
    start = time.perf_counter()
    plan = gett.plan_contraction(first.A, c.modes_A, first.B, c.modes_B, first.C, c.modes_C,
                                 compute_type=problem.precision.gett_compute, beta=problem.beta)
    seconds = time.perf_counter() - start

    def run(i: int):
        s = problem.sets[i]
        gett.contract(plan, problem.alpha, s.A, s.B, problem.beta, s.C, s.D)
        return s.D

    return Prepared(run, seconds, gett_api.kernel_report(plan))


def _cutensor_preparer(handle: Cutensor, jit: bool) -> Prepare:
    def prepare(problem: Problem) -> Prepared:
        c, first = problem.contraction, problem.sets[0]
        plan = handle.contraction(first.A, c.modes_A, first.B, c.modes_B, first.C, c.modes_C,
                                  problem.precision.cutensor_compute, jit)

        def run(i: int):
            s = problem.sets[i]
            plan(problem.alpha, s.A, s.B, problem.beta, s.C, s.D)
            return s.D

        return Prepared(run, plan.plan_seconds, close=plan.close)

    return prepare


def _einsum_preparer(einsum: Callable, convert: Callable) -> Prepare:
    """An einsum peer: ``einsum(expr, A, B)`` on arrays ``convert``-ed once from the buffers, scaled
    and added to C as a user would when alpha != 1 or beta != 0."""

    def prepare(problem: Problem) -> Prepared:
        expr, alpha, beta = problem.contraction.einsum, problem.alpha, problem.beta
        views = [(convert(s.A), convert(s.B), convert(s.C)) for s in problem.sets]

        def run(i: int):
            A, B, C = views[i]
            if alpha == 1 and beta == 0:
                return einsum(expr, A, B)
            return alpha * einsum(expr, A, B) + beta * C

        return Prepared(run)

    return prepare


class Peers:
    """The requested implementations that can run here, with notes on those that cannot.

    ``prepare`` maps each runnable name (in ``NAMES`` order) to its prepare function; ``notes``
    says why the others are absent; ``versions`` holds the versions of the peer libraries found.
    Call ``close()`` at the end (it releases the cuTENSOR handle).
    """

    def __init__(self, requested: list[str]):
        self.prepare: dict[str, Prepare] = {}
        self.notes: list[str] = []
        self.versions: dict[str, str | None] = {}
        self._cutensor: Cutensor | None = None
        for name in [n for n in NAMES if n in requested]:
            try:
                self.prepare[name] = self._open(name)
            except Exception as exc:  # a missing peer is a note, not a failure of the benchmark
                self.notes.append(f"{name}: not run ({first_line(exc)})")

    def _open(self, name: str) -> Prepare:
        if name == "gett":
            self.versions["gett"] = gett_api.version(gett_api.load_gett())
            return _prepare_gett
        if name in ("cutensor", "cutensor-jit"):
            if self._cutensor is None:
                self._cutensor = Cutensor(load_library())
                self.versions["cutensor"] = str(self._cutensor.version)
            return _cutensor_preparer(self._cutensor, jit=name == "cutensor-jit")
        if name == "torch":
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError("PyTorch sees no CUDA device")
            self.versions["torch"] = torch.__version__
            return _einsum_preparer(torch.einsum, torch.from_dlpack)
        if name == "cupy":
            import cupy

            self.versions["cupy"] = cupy.__version__
            return _einsum_preparer(cupy.einsum, lambda array: array)
        raise ValueError(f"unknown implementation {name!r}")

    def close(self) -> None:
        """Release the cuTENSOR handle, if one was opened."""
        if self._cutensor is not None:
            self._cutensor.close()
            self._cutensor = None
