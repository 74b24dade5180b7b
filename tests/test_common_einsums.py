"""The beyond-TCCG benchmarks' lists (benchmarks/common_einsums.py, benchmarks/odd_extents.py) on the CPU:
every einsum names extents for all its modes, and, scaled down, gett's reference executor agrees with numpy
on it."""
import numpy as np
import pytest

import gett
from benchmarks import odd_extents
from benchmarks.common_einsums import CASES, shapes

LISTED = CASES + odd_extents.CASES


@pytest.mark.parametrize("expr, extents", LISTED, ids=[f"{e}-{i}" for i, (e, _) in enumerate(LISTED)])
def test_each_listed_einsum_is_complete_and_runs_scaled_down(expr, extents):
    modes = set(expr.replace(",", "").replace("->", ""))
    assert modes == set(extents)
    small = {m: min(v, 5) for m, v in extents.items()}
    rng = np.random.default_rng(0)
    ins, out = shapes(expr, small)
    arrays = [rng.standard_normal(s) for s in ins]
    got = gett.einsum(expr, *arrays)
    assert np.asarray(got).shape == out
    np.testing.assert_allclose(got, np.einsum(expr, *arrays), rtol=1e-12, atol=1e-12)
