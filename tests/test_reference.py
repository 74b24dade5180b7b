"""The reference executor, which runs the plan's own index tables, against numpy.einsum (float64)."""
import numpy as np
from hypothesis import HealthCheck, given, settings

import gett
from cases import build_host_arrays, contractions, oracle


def _integer_case(case):
    # integer alpha/beta keep integer results exact
    case.alpha, case.beta = float(int(case.alpha) or 1), float(int(case.beta))
    return case


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=contractions(), seed=__import__("hypothesis").strategies.integers(0, 2**32 - 1))
def test_reference_matches_einsum(case, seed):
    if case.dtype.startswith("i"):
        case = _integer_case(case)
    rng = np.random.default_rng(seed)
    arrays = build_host_arrays(case, rng)
    A, B, C = (arrays[t][0] for t in "ABC")
    expect = oracle(case, A, B, C)
    D = np.full(C.shape, np.nan if C.dtype.kind in "fc" else -999999, dtype=C.dtype)
    plan = gett.plan_contraction(A, case.modes_A, B, case.modes_B, C, case.modes_C, D=D,
                                 broadcast=case.broadcast)
    gett.contract(plan, case.alpha, A, B, case.beta, C, D)
    if case.dtype.startswith("i"):
        assert np.array_equal(D, expect)
    else:
        tol = 1e-5 if case.dtype in ("f32", "c64") else 1e-12
        scale = max(np.abs(expect).max(initial=0.0), 1.0)
        assert np.all(np.isfinite(D))      # every element written
        np.testing.assert_allclose(D, expect, rtol=tol, atol=tol * scale)
