"""benchmarks/data_movement_ceiling.py without a GPU: its streaming kernel compiles, it finds the bytes gett's
plans stage, and it reads gett's times from a runner JSON, plain or compressed."""
import importlib.util
import json
import lzma
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "data_movement_ceiling", Path(__file__).resolve().parents[1] / "benchmarks" / "data_movement_ceiling.py")
ceiling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ceiling)


def test_the_streaming_kernel_compiles_without_spills():
    from gett.nvrtc import compile_cubin
    result = compile_cubin(ceiling.STREAM_SOURCE, arch="sm_90", name="stream.cu")
    assert result.resources["stream"].spill_stores == 0


def test_staged_bytes_are_the_operands_gett_copies():
    """#14 copies A (312^3 halves) into B's K order; #13 copies nothing."""
    from tccg_suite.suite import select
    c13, c14 = select([13, 14])
    assert ceiling.staged_bytes(c14, "float16") == 312 ** 3 * 2
    assert ceiling.staged_bytes(c13, "float16") == 0


@pytest.mark.parametrize("compressed", [False, True])
def test_gett_times_from_a_runner_json(tmp_path, compressed):
    run = {"contractions": [
        {"id": 13, "results": {"gett": {"median_ms": 0.0604}, "torch": {"median_ms": 0.3}}},
        {"id": 14, "results": {"gett": {"median_ms": None, "status": "error"}}},
        {"id": 15, "results": {"cutensor": {"median_ms": 0.1}}},
    ]}
    path = tmp_path / ("run.json.xz" if compressed else "run.json")
    with (lzma.open if compressed else open)(path, "wt") as f:
        json.dump(run, f)
    assert ceiling.gett_times(str(path)) == {13: 0.0604}
