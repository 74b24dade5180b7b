"""GPU tests of the tuner: a tuned configuration is recorded, a new plan with the same signature compiles
with it, and the tuned plan's result matches numpy in float64; plan_contraction(autotune=...) tunes once."""
import numpy as np
import pytest

import gett
from gett import plan_db, tuner
from gett.kernel import current_arch

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A fresh kernel cache and user plan database, and no cached plans, before and after."""
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path))
    plan_db.clear_memory_cache()
    gett.clear_plan_cache()
    yield
    plan_db.clear_memory_cache()
    gett.clear_plan_cache()


def relative_error(x, ref) -> float:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def test_tuned_config_is_recorded_and_used_by_a_new_plan(private_cache):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 64, 4)).astype(np.float16)
    b = rng.standard_normal((64, 80, 4)).astype(np.float16)
    A, B = cp.asarray(a), cp.asarray(b)
    C = cp.zeros((96, 80, 4), dtype=cp.float32)
    plan = gett.plan_contraction(A, "mkl", B, "knl", C, "mnl", beta=0)
    cfg, ms = tuner.tune(plan, 10.0)
    assert ms > 0
    assert plan_db.lookup(plan, current_arch(), exact=True) == cfg

    gett.clear_plan_cache()
    again = gett.plan_contraction(A, "mkl", B, "knl", C, "mnl", beta=0)
    assert again is not plan and again.kernel().config == cfg
    C.fill(cp.nan)
    gett.contract(again, 1.0, A, B, 0.0, C)
    ref = np.einsum("mkl,knl->mnl", a.astype(np.float64), b.astype(np.float64))
    assert relative_error(C.get(), ref) < 2e-3


def test_autotune_tunes_once_and_the_plan_uses_the_result(private_cache, monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((70, 300)).astype(np.float32)
    b = rng.standard_normal((300, 50)).astype(np.float32)
    A, B = cp.asarray(a), cp.asarray(b)
    C = cp.full((70, 50), cp.nan, dtype=cp.float32)
    plan = gett.plan_contraction(A, "ik", B, "kj", C, "ij", beta=0, autotune=5)
    cfg = plan_db.lookup(plan, current_arch(), exact=True)
    assert cfg is not None and plan.kernel().config == cfg
    gett.contract(plan, 1.0, A, B, 0.0, C)
    assert relative_error(C.get(), a.astype(np.float64) @ b.astype(np.float64)) < 1e-5

    def tune_again(*args, **kwargs):
        raise AssertionError("a plan with a database entry was tuned again")
    monkeypatch.setattr(tuner, "tune", tune_again)
    gett.clear_plan_cache()
    assert gett.plan_contraction(A, "ik", B, "kj", C, "ij", beta=0, autotune=5).kernel().config == cfg
