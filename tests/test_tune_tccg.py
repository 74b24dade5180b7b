"""benchmarks/tune_tccg.py's --out: a run updates the shipped database for the contractions it tuned and
keeps every other entry (an f32 run must not drop the f16 entries), and ships the entry of a tuned plan that
a near-identical shape's entry, or the database a model's goes over, would otherwise serve."""
import importlib.util
import json
from pathlib import Path

import pytest

import gett
from gett import plan_db
from gett.config import KernelConfig

_spec = importlib.util.spec_from_file_location(
    "tune_tccg", Path(__file__).resolve().parents[1] / "benchmarks" / "tune_tccg.py")
tune_tccg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tune_tccg)


def test_a_run_replaces_only_the_entries_of_what_it_tuned():
    shipped = {"version": 1, "entries": {"f16-a": "old a", "f16-b": "old b", "f32-c": "old c"}}
    tuned = {"version": 1, "entries": {"f32-c": "new c", "f32-d": "new d", "f32-e": "no gain"}}
    # this run tuned c, d and e (f32); c and d beat the heuristic by the margin, e did not
    merged = tune_tccg.merge_database(shipped, tuned, tried={"f32-c", "f32-d", "f32-e"}, keep={"f32-c", "f32-d"})
    assert merged["entries"] == {"f16-a": "old a", "f16-b": "old b", "f32-c": "new c", "f32-d": "new d"}
    assert merged["version"] == 1 and shipped["entries"]["f32-c"] == "old c"   # the input is not changed
    # an entry this run tuned without gain goes, even where the file had one
    merged = tune_tccg.merge_database(shipped, tuned, tried={"f16-b"}, keep=set())
    assert merged["entries"] == {"f16-a": "old a", "f32-c": "old c"}


def test_a_first_run_writes_its_winners_only():
    tuned = {"version": 1, "entries": {"x": 1, "y": 2}}
    assert tune_tccg.merge_database(None, tuned, tried={"x", "y"}, keep={"y"})["entries"] == {"y": 2}


@pytest.fixture
def private_user_db(tmp_path, monkeypatch):
    """An empty user plan database, forgotten before and after."""
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "cache"))
    plan_db.clear_memory_cache()
    yield
    plan_db.clear_memory_cache()


def gemm_plan(m):
    d = gett.TensorDescriptor
    return gett.plan_contraction(d((m, 256), None, "f16"), "mk", d((256, 256), None, "f16"), "kn",
                                 d((m, 256), None, "f16"), "mn", device_arch="sm_90")


ODD, OWN = KernelConfig("mma16", 64, 64, 32, 2, wm=32, wn=32, group_m=4), KernelConfig("wgmma", 128, 128, 64, 4)


def test_a_plan_settled_on_its_own_tile_keeps_it_where_a_near_shape_would_lend_another(private_user_db):
    """TCCG #11 took #10's entry through the near-identical-shape rule, though tuning #11 kept its heuristic's
    tile: lent_entries names such plans (their own entries then ship); not a plan the database leaves to the
    heuristic, nor one the database gives its own configuration."""
    near, far, lender = gemm_plan(300), gemm_plan(4096), gemm_plan(256)
    plan_db.record(lender, "sm_90", ODD, 1.0)
    data = json.loads(plan_db.user_path("sm_90").read_text())   # the lender's entry, as a shipped file holds it
    settled = [("near", near, OWN), ("far", far, OWN), ("lender", lender, ODD)]
    assert tune_tccg.lent_entries(data, settled, "sm_90") == {"near"}
    assert plan_db.lookup(near, "sm_90") == ODD   # the user layer is back in place afterwards


def test_a_models_database_ships_what_its_architectures_would_change(private_user_db):
    """With ``base`` (the architecture's database, under a model's), a settled plan to which the two together
    would give another configuration gets an entry of its own (TCCG #6 on an H200: the H100's entry slower
    than the heuristic's tile); one the base leaves to what tuning settled on does not."""
    changed, kept = gemm_plan(256), gemm_plan(4096)
    plan_db.record(changed, "sm_90", ODD, 1.0)
    plan_db.record(kept, "sm_90", OWN, 1.0)
    base = json.loads(plan_db.user_path("sm_90").read_text())   # the architecture's file
    settled = [("changed", changed, OWN), ("kept", kept, OWN)]
    empty = {"version": 1, "entries": {}}
    assert tune_tccg.lent_entries(empty, settled, "sm_90", base) == {"changed"}
    assert tune_tccg.lent_entries(empty, settled, "sm_90") == set()
