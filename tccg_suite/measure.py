"""Measure every implementation on one contraction: correctness first, then time."""

from __future__ import annotations

from typing import Callable

import cupy
import numpy

from .ceilings import Ceilings
from .data import buffer_sets, reference, relative_error, set_count
from .peers import Prepare, Problem
from .precision import Precision
from .report import ERROR, FAILED, OK, CaseResult, ImplResult, first_line
from .suite import Contraction
from .timing import sample_ms

WARMUP = 5  # untimed calls before the timed ones


def measure_impl(prepare: Prepare, problem: Problem, ref: cupy.ndarray, runs: int) -> ImplResult:
    """Plan (timed on the wall clock), check against ``ref`` with D poisoned by NaN, then time
    ``runs`` calls cycling through the buffer sets. Never raises: an exception becomes ERROR."""
    result = ImplResult(ERROR)
    prepared = None
    try:
        prepared = prepare(problem)
        result.plan_seconds, result.kernel = prepared.plan_seconds, prepared.kernel
        problem.sets[0].D.fill(numpy.nan)  # an element left unwritten shows up as NaN in the error
        result.rel_error = relative_error(prepared.run(0), ref)
        samples = sample_ms(prepared.run, runs, WARMUP, rotate=len(problem.sets))
        result.samples_ms, result.host_ms, result.gpu_held = list(samples), samples.enqueue_ms, samples.held
        # NaN compares false, so a NaN error fails
        result.status = OK if result.rel_error <= problem.precision.tolerance else FAILED
    except Exception as exc:
        result.status, result.error = ERROR, first_line(exc)
    finally:
        if prepared is not None:
            try:
                cupy.cuda.get_current_stream().synchronize()  # the plan must outlive its last launch
                prepared.close()
            except Exception as exc:
                if result.status != ERROR:
                    result.status, result.error = ERROR, f"clean-up: {first_line(exc)}"
    return result


def measure_case(contraction: Contraction, precision: Precision, peers: dict[str, Prepare], ceilings: Ceilings,
                 l2_bytes: int, runs: int, alpha: float, beta: float,
                 on_impl: Callable[[str], None] = lambda name: None) -> CaseResult:
    """All ``peers`` on ``contraction``: random inputs (several buffer sets when they would fit in
    L2), the f64 reference, then :func:`measure_impl` for each, calling ``on_impl(name)`` before
    each. A failure to set up the data marks every implementation ERROR."""
    itemsize = precision.itemsize
    nbytes = contraction.min_bytes(itemsize, itemsize, beta != 0)
    rotate = set_count(contraction, precision.dtype, l2_bytes)
    case = CaseResult(contraction, contraction.flops, nbytes, ceilings.roofline_ms(contraction.flops, nbytes), rotate)
    try:
        sets = buffer_sets(contraction, precision.dtype, l2_bytes, seed=1000 * contraction.id)
        ref = reference(contraction, sets[0], alpha, beta)
    except Exception as exc:
        case.impls = {name: ImplResult(ERROR, error=f"data set-up: {first_line(exc)}") for name in peers}
        return case
    problem = Problem(contraction, precision, sets, alpha, beta)
    for name, prepare in peers.items():
        on_impl(name)
        case.impls[name] = measure_impl(prepare, problem, ref, runs)
    return case
