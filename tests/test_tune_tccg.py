"""benchmarks/tune_tccg.py's --out: a run updates the shipped database for the contractions it tuned and
keeps every other entry (an f32 run must not drop the f16 entries)."""
import importlib.util
from pathlib import Path

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
