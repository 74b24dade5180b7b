"""The TCCG suite's data, the benchmark's pure parts (reports, plot, options, timing helpers) and
its no-GPU compile-only mode. None of this needs a GPU; the suite data tests need no gett."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import sys
import types
from importlib import resources

import numpy as np
import pytest

from tccg_suite import GROUP_NAMES, load_suite, parse_ids, select
from tccg_suite.suite import group_of, parse_line

SUITE = load_suite()


# ---- the suite's data ------------------------------------------------------------------------------

def test_file_has_48_rows_in_id_order():
    lines = resources.files("tccg_suite").joinpath("tccg48.txt").read_text().splitlines()
    assert len(lines) == 48
    assert lines[0] == " 1 abc-bda-dc         312 312 24 312"
    assert [c.id for c in SUITE] == list(range(1, 49))


@pytest.mark.parametrize("c", SUITE, ids=lambda c: f"#{c.id}")
def test_contraction_is_self_consistent(c):
    tensors = (c.modes_C, c.modes_A, c.modes_B)
    assert "-".join(tensors) == c.notation
    labels = set("".join(tensors))
    assert set(c.extents) == labels  # every mode has exactly one extent, and no extra extent
    assert len(c.extents) == len(labels)
    for modes in tensors:
        assert len(set(modes)) == len(modes)
    for label in labels:
        assert sum(label in modes for modes in tensors) == 2
    assert c.m * c.n * c.k == math.prod(c.extents.values())  # no batch modes: every mode is M, N or K


@pytest.mark.parametrize("cid, m, n, k", [
    (1, 97344, 24, 312),
    (2, 296 * 312, 24, 312),
    (9, 72, 72**3, 72),
    (12, 5136, 5120, 5136),
    (13, 312, 296, 296 * 312),
    (20, 72 * 72, 72 * 72, 72 * 72),
    (31, 9216, 4096, 24),
    (37, 24 * 16 * 24, 16**3, 24),
])
def test_known_gemm_sizes(cid, m, n, k):
    (c,) = select([cid])
    assert (c.m, c.n, c.k) == (m, n, k)


@pytest.mark.parametrize("c", SUITE, ids=lambda c: f"#{c.id}")
def test_einsum_agrees_with_the_gemm_view(c):
    """The einsum string and the M/N/K split describe the same contraction (small extents)."""
    c = dataclasses.replace(c, extents={m: 2 + i % 3 for i, m in enumerate(sorted(c.extents))})
    rng = np.random.default_rng(c.id)
    A, B = (rng.standard_normal(c.shape(t)) for t in "AB")
    m_modes = [x for x in c.modes_C if x in c.modes_A]
    n_modes = [x for x in c.modes_C if x in c.modes_B]
    k_modes = [x for x in c.modes_A if x not in c.modes_C]
    a = np.transpose(A, [c.modes_A.index(x) for x in m_modes + k_modes]).reshape(c.m, c.k)
    b = np.transpose(B, [c.modes_B.index(x) for x in k_modes + n_modes]).reshape(c.k, c.n)
    d = (a @ b).reshape([c.extents[x] for x in m_modes + n_modes])
    d = np.transpose(d, [(m_modes + n_modes).index(x) for x in c.modes_C])
    np.testing.assert_allclose(np.einsum(c.einsum, A, B), d, rtol=1e-12, atol=1e-12)


def test_shapes_strides_and_einsum_of_1():
    (c,) = select([1])
    assert c.einsum == "bda,dc->abc"
    assert c.shape("A") == (312, 312, 312) and c.strides("A") == (1, 312, 312 * 312)
    assert c.shape("B") == (312, 24) and c.strides("B") == (1, 312)
    assert c.shape("C") == (312, 312, 24) and c.strides("C") == (1, 312, 312 * 312)
    assert c.size("C") == 312 * 312 * 24


def test_groups():
    assert [group_of(i) for i in (1, 8, 9, 11, 12, 13, 19, 20, 30, 31, 48)] == [
        "1-8", "1-8", "9-11", "9-11", "12", "13-19", "13-19", "20-30", "20-30", "31-48", "31-48"]
    counts = {g: sum(c.group == g for c in SUITE) for g in GROUP_NAMES}
    assert counts == {"1-8": 8, "9-11": 3, "12": 1, "13-19": 7, "20-30": 11, "31-48": 18}
    with pytest.raises(ValueError):
        group_of(49)


def test_flops_and_min_bytes():
    c1, c12 = select([1, 12])
    assert c12.flops == 2 * 5136 * 5120 * 5136
    a, b, cc = 312**3, 312 * 24, 312 * 312 * 24
    assert c1.min_bytes(2, 2, beta_nonzero=False) == (a + b) * 2 + cc * 2
    assert c1.min_bytes(2, 2, beta_nonzero=True) == (a + b) * 2 + cc * 2 * 2
    assert c12.min_bytes(4, 4, True) == (5136 * 5136 + 5136 * 5120) * 4 + 2 * 5136 * 5120 * 4
    assert c12.min_bytes(2, 4, False) == (5136 * 5136 + 5136 * 5120) * 2 + 5136 * 5120 * 4


def test_parse_ids_and_select():
    assert parse_ids("1,7,20-22") == [1, 7, 20, 21, 22]
    assert parse_ids(" 3, 1,1 ") == [1, 3]
    for bad in ("a", "5-3", "", ",", "1-", "1-x"):
        with pytest.raises(ValueError):
            parse_ids(bad)
    assert [c.id for c in select([31, 1])] == [31, 1]
    with pytest.raises(ValueError, match="99"):
        select([99])


@pytest.mark.parametrize("line, message", [
    ("1 abc-bda-dc 312 312 24", "4 modes but 3 extents"),
    ("1 abc-bda-dcc 1 2 3 4", "repeated mode"),
    ("1 ab-abd-db 1 2 3", "not in exactly two"),  # b would be a batch mode
    ("1 abc-bda 1 2 3 4", "not C-A-B"),
])
def test_parse_line_rejects_bad_rows(line, message):
    with pytest.raises(ValueError, match=message):
        parse_line(line)


# ---- timing helpers (the parts that need no GPU) ---------------------------------------------------

def test_rotation_count():
    from tccg_suite.timing import rotation_count

    l2 = 50 * 2**20
    assert rotation_count(2 * l2, l2) == 1
    assert rotation_count(l2, l2) == 3
    assert rotation_count(l2 // 4, l2) == 9
    assert rotation_count(1000, l2) == 32
    assert rotation_count(1000, l2, limit=4) == 4
    with pytest.raises(ValueError):
        rotation_count(0, l2)


def test_sample_ms_rejects_bad_counts_before_touching_the_gpu():
    from tccg_suite.timing import sample_ms

    for runs, warmup, rotate in ((0, 1, 1), (1, -1, 1), (1, 1, 0)):
        with pytest.raises(ValueError):
            sample_ms(lambda i: None, runs, warmup, rotate)


# ---- reports, JSON and plot from made-up results -------------------------------------------------

def _cases():
    from tccg_suite.report import ERROR, FAILED, OK, CaseResult, ImplResult

    c1, c9, c31 = select([1, 9, 31])
    cases = [CaseResult(c, c.flops, c.min_bytes(2, 2, False), 0.1, 1) for c in (c1, c9, c31)]
    cases[0].impls = {"gett": ImplResult(OK, [0.2] * 20, 1e-4, 1.5), "cutensor": ImplResult(OK, [0.4] * 20, 1e-4)}
    cases[1].impls = {"gett": ImplResult(FAILED, [0.1] * 20, float("nan"), 1.0),
                      "cutensor": ImplResult(OK, [0.5] * 20, 1e-4)}
    cases[2].impls = {"gett": ImplResult(OK, [0.25] * 20, 1e-4, 2.0),
                      "cutensor": ImplResult(ERROR, error="CutensorError: cutensorCreatePlan failed")}
    return cases


def test_fractions_ratios_and_geomeans():
    from tccg_suite.report import geomean, summary

    cases = _cases()
    assert cases[0].fraction("gett") == pytest.approx(0.5)
    assert cases[0].vs_reference("gett") == pytest.approx(2.0)
    assert cases[1].fraction("gett") is None  # failed correctness: no figure
    assert cases[2].vs_reference("gett") is None  # cuTENSOR errored
    assert geomean([2.0, None, 8.0]) == pytest.approx(4.0)
    assert geomean([None]) is None
    table = summary(cases, ["gett", "cutensor"])
    assert list(table) == ["1-8", "9-11", "31-48", "all"]
    assert table["all"]["gett"]["fraction"] == pytest.approx(math.sqrt(0.5 * 0.4))
    assert table["all"]["gett"]["vs_cutensor"] == pytest.approx(2.0)
    assert table["9-11"]["gett"]["fraction"] is None


def test_table_and_summary_text():
    from tccg_suite.report import format_summary, format_table

    text = format_table(_cases(), ["gett", "cutensor"])
    rows = text.splitlines()
    assert "gett µs" in rows[0] and "×cuT" in rows[0] and "plan s" in rows[0]
    assert "97344×24×312" in rows[1] and "200.0" in rows[1] and "50%" in rows[1] and "2.00" in rows[1]
    assert "100.0!" in rows[2]  # failed correctness: time shown, marked
    assert "ERROR" in rows[3]
    assert "#9 gett FAILED: relative error nan" in text
    assert "#31 cutensor ERROR: CutensorError: cutensorCreatePlan failed" in text
    summary = format_summary(_cases(), ["gett", "cutensor"])
    assert "Geomean fraction of roofline" in summary and "relative to cuTENSOR" in summary
    assert any(line.startswith("#1-8") for line in summary.splitlines())
    no_ref = format_table(_cases(), ["gett"])
    assert "×cuT" not in no_ref and "relative to cuTENSOR" not in format_summary(_cases(), ["gett"])


def test_json_has_every_figure_and_is_strict(tmp_path):
    from tccg_suite.report import to_json
    from tccg_suite.runner import _write_json

    data = to_json({"date": "2026-11-22"}, _cases(), ["gett", "cutensor"])
    first = data["contractions"][0]
    assert first["id"] == 1 and first["m"] == 97344 and first["roofline_ms"] == 0.1
    assert first["results"]["gett"]["median_ms"] == 0.2 and first["results"]["gett"]["plan_seconds"] == 1.5
    assert first["results"]["gett"]["vs_cutensor"] == pytest.approx(2.0)
    path = tmp_path / "out" / "r.json"
    _write_json(str(path), data)
    loaded = json.loads(path.read_text())  # NaN became null: strict JSON
    assert loaded["contractions"][1]["results"]["gett"]["rel_error"] is None
    assert loaded["summary"]["all"]["gett"]["vs_cutensor"] == pytest.approx(2.0)


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from tccg_suite.plot import plot_vs_cutensor

    path = tmp_path / "p.png"
    assert plot_vs_cutensor(_cases(), ["gett", "cutensor"], str(path), "test") is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_vs_cutensor(_cases(), ["gett"], str(tmp_path / "q.png"), "test") is not None


def test_progress_writes_lines_off_a_terminal():
    from tccg_suite.progress import Progress

    out = io.StringIO()
    bar = Progress(4, out=out, width=8)
    bar.update(2, "#3 gett")
    bar.close()
    assert out.getvalue() == "[####....] 2/4 #3 gett\n"


# ---- cuTENSOR binding (what can be checked without the library) -----------------------------------

def test_cutensor_constants_and_helpers():
    from tccg_suite import cutensor

    # cudaDataType_t (library_types.h) and cuTENSOR 2.x enums (cutensor/types.h)
    assert cutensor.CUDA_DATA_TYPES == {"float16": 2, "bfloat16": 14, "float32": 0, "float64": 1}
    assert (cutensor.OP_IDENTITY, cutensor.ALGO_DEFAULT, cutensor.WORKSPACE_DEFAULT) == (1, -1, 2)
    assert (cutensor.JIT_MODE_NONE, cutensor.JIT_MODE_DEFAULT, cutensor.PLAN_REQUIRED_WORKSPACE) == (0, 1, 0)
    assert [cutensor._alignment(p) for p in (0, 256, 512, 1024 + 16, 3)] == [256, 256, 256, 16, 1]
    with pytest.raises(OSError, match="no such file"):
        cutensor.load_library(("/nonexistent/libcutensor.so.2",))


# ---- the command line ----------------------------------------------------------------------------

def test_options():
    from tccg_suite.peers import NAMES
    from tccg_suite.runner import parse_args

    args = parse_args([])
    assert len(args.only) == 48 and args.peers == list(NAMES) and args.runs == 30 and args.dtype == "f16"
    args = parse_args(["--only", "20-22,1", "--peers", "gett, cutensor", "--runs", "20", "--beta", "0.5"])
    assert [c.id for c in args.only] == [1, 20, 21, 22] and args.peers == ["gett", "cutensor"]
    for bad in (["--runs", "19"], ["--peers", "gett,blas"], ["--only", "0"], ["--dtype", "f8"]):
        with pytest.raises(SystemExit) as exc:
            parse_args(bad)
        assert exc.value.code == 2


def test_default_json_path():
    import datetime

    from tccg_suite.precision import PRECISIONS
    from tccg_suite.runner import default_json_path

    path = default_json_path(PRECISIONS["f16"], "NVIDIA H100 80GB HBM3", datetime.date(2026, 11, 22))
    assert path == "benchmarks/results/tccg_f16_2026-11-22_nvidia-h100-80gb-hbm3.json"


# ---- compile-only mode ----------------------------------------------------------------------------

@pytest.fixture
def fake_gett(monkeypatch):
    """A stand-in gett whose planner records its calls and reports fixed kernel resources."""
    calls = []
    module = types.ModuleType("gett")
    module.__version__ = "test"
    module.TensorDescriptor = lambda shape, strides, dtype: ("desc", shape, strides, dtype)
    module.contract = lambda *args: None

    def plan_contraction(A, modes_A, B, modes_B, C, modes_C, **kwargs):
        calls.append(((A, modes_A, B, modes_B, C, modes_C), kwargs))
        if modes_A == module.fail_on:
            raise RuntimeError("NVRTC says no\nsecond line")
        report = types.SimpleNamespace(registers=128, spill_stores=0, spill_loads=0, shared_bytes=49152,
                                       compile_seconds=1.25, from_cache=False)
        return types.SimpleNamespace(kernel_report=report)

    module.plan_contraction = plan_contraction
    module.fail_on = None
    monkeypatch.setitem(sys.modules, "gett", module)
    return module, calls


def test_compile_only_report_with_a_stand_in_gett(fake_gett, capsys, tmp_path):
    from tccg_suite.runner import main

    _, calls = fake_gett
    out = tmp_path / "compile.json"
    assert main(["--only", "1,12", "--compile-only", "--dtype", "bf16", "--json", str(out)]) == 0
    args, kwargs = calls[0]
    assert args[1::2] == ("bda", "dc", "abc")
    assert args[0] == ("desc", (312, 312, 312), (1, 312, 97344), "bfloat16")
    assert kwargs == {"compute_type": None, "beta": 0.0, "device_arch": "sm_90"}
    text = capsys.readouterr().out
    assert "sm_90" in text and " 12 ab-ac-cb" in text and "49152" in text and "1.25" in text
    assert json.loads(out.read_text())["contractions"][0]["registers"] == 128


def test_compile_only_tf32_passes_the_compute_type(fake_gett):
    from tccg_suite.runner import main

    _, calls = fake_gett
    assert main(["--only", "12", "--compile-only", "--dtype", "tf32", "--arch", "sm_80"]) == 0
    assert calls[0][1]["compute_type"] == "tf32" and calls[0][1]["device_arch"] == "sm_80"
    assert calls[0][0][0][3] == "float32"


def test_compile_failure_exits_1_after_reporting_all(fake_gett, capsys):
    from tccg_suite.runner import main

    module, calls = fake_gett
    module.fail_on = "ac"  # the A modes of #12
    assert main(["--only", "1,12,31", "--compile-only"]) == 1
    assert len(calls) == 3
    captured = capsys.readouterr()
    assert "COMPILE FAILED: RuntimeError: NVRTC says no" in captured.out
    assert "1 of 3 contractions failed to compile: #12" in captured.err


def test_without_a_gpu_the_runner_falls_back_to_compile_only(fake_gett, capsys):
    from tccg_suite.runner import cuda_unavailable, main

    if cuda_unavailable() is None:
        pytest.skip("a GPU is visible here: the fallback is for machines without one")
    assert main(["--only", "31"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("No GPU visible to CuPy (")
    assert "31 abcdef-dega-gfbc" in out


def _gett_planner_missing() -> str | None:
    """Why gett cannot plan and compile a kernel here yet (an import error), or None."""
    try:
        from tccg_suite.gett_api import load_gett

        gett = load_gett()
        desc = gett.TensorDescriptor((2, 2), (1, 2), "float32")
        gett.plan_contraction(desc, "ab", desc, "bc", desc, "ac", device_arch="sm_90")
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def test_compile_only_with_the_real_gett(capsys):
    reason = _gett_planner_missing()
    if reason is not None:
        pytest.skip(f"gett's planner is not importable yet ({reason})")
    from tccg_suite.runner import main

    assert main(["--only", "1,12,31", "--compile-only"]) == 0
    out = capsys.readouterr().out
    for row in (" 1 abc-bda-dc", " 12 ab-ac-cb", " 31 abcdef-dega-gfbc"):
        assert row in out
    assert "COMPILE FAILED" not in out


# ---- the GPU benchmark path, end to end on numpy stand-ins for CuPy and gett ------------------------

_STAND_INS = r'''
import dataclasses, sys, time, types
import numpy as np

cupy = types.ModuleType("cupy")
cupy.__version__ = "stand-in"
for name in ("ndarray", "empty", "einsum", "sqrt", "sum", "from_dlpack", "float64"):
    setattr(cupy, name, getattr(np, name))
cupy.random = types.SimpleNamespace(default_rng=np.random.default_rng, Generator=np.random.Generator)
class Stream:
    ptr = 0
    def synchronize(self): pass
class Event:
    done = False   # as the hold kernel's event is while the timed calls are enqueued
    def record(self, stream=None): self.t = time.perf_counter()
    def synchronize(self): pass
cupy.RawKernel = lambda source, name: lambda grid, block, args: None
cupy.cuda = types.SimpleNamespace(
    get_current_stream=Stream, Event=Event, get_elapsed_time=lambda s, e: (e.t - s.t) * 1e3,
    Device=lambda: types.SimpleNamespace(id=0), nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0)),
    runtime=types.SimpleNamespace(
        getDeviceCount=lambda: 1, driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13000,
        getDeviceProperties=lambda i: {"name": b"Stand-in GPU", "major": 9, "minor": 0, "l2CacheSize": 2**20}))
cupy.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
linalg = types.ModuleType("cupy._core._routines_linalg")
linalg.COMPUTE_TYPE_DEFAULT, linalg.COMPUTE_TYPE_FP32, linalg.COMPUTE_TYPE_TF32 = 1, 4, 7
linalg.get_compute_type = lambda dtype: 1
linalg.set_compute_type = lambda dtype, mode: None
core = types.ModuleType("cupy._core")
core._routines_linalg = linalg

gett = types.ModuleType("gett")
gett.__version__ = "stand-in"
gett.TensorDescriptor = object
def plan_contraction(A, modes_A, B, modes_B, C, modes_C, **kwargs):
    report = types.SimpleNamespace(registers=64, spill_stores=0, spill_loads=0, shared_bytes=1024,
                                   compile_seconds=0.5, from_cache=True)
    return types.SimpleNamespace(expr=f"{modes_A},{modes_B}->{modes_C}", kernel_report=report)
def contract(plan, alpha, A, B, beta, C, D):
    if "--broken" not in sys.argv:
        D[...] = alpha * np.einsum(plan.expr, A, B) + beta * C
gett.plan_contraction, gett.contract = plan_contraction, contract
gett_nvrtc = types.ModuleType("gett.nvrtc")
gett_nvrtc.nvrtc_version = lambda: (13, 5)
sys.modules.update({"cupy": cupy, "cupy._core": core, "cupy._core._routines_linalg": linalg, "gett": gett,
                    "gett.nvrtc": gett_nvrtc})

from tccg_suite import ceilings, runner, suite
tiny = tuple(dataclasses.replace(c, extents={m: 2 + i % 3 for i, m in enumerate(sorted(c.extents))})
             for c in suite.load_suite())
suite._suite = lambda: tiny
ceilings.measure = lambda precision: ceilings.Ceilings(3e12, 8e14, "stand-in")
sys.exit(runner.main([a for a in sys.argv[1:] if a != "--broken"]))
'''


def _run_with_stand_ins(tmp_path, *args):
    import pathlib
    import subprocess

    root = pathlib.Path(__file__).resolve().parents[1]
    script = tmp_path / "stand_ins.py"
    script.write_text(_STAND_INS)
    return subprocess.run([sys.executable, str(script), *args], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=300)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_benchmark_path_end_to_end(tmp_path, dtype):
    from tccg_suite.precision import PRECISIONS

    out = tmp_path / "r.json"
    done = _run_with_stand_ins(tmp_path, "--only", "1,12,31", "--peers", "gett,cupy", "--dtype", dtype,
                               "--beta", "0.5", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ceilings: device copy 3.00 TB/s" in done.stdout
    assert "\n12  ab-ac-cb" in done.stdout and "Geomean fraction of roofline" in done.stdout
    assert "3/3 done" in done.stderr  # the progress bar
    data = json.loads(out.read_text())
    assert data["gpu"]["name"] == "Stand-in GPU" and data["versions"]["gett"] == "stand-in"
    assert data["versions"]["nvrtc"] == "13.0" and data["versions"]["gett_nvrtc"] == "13.5"
    for case in data["contractions"]:
        assert case["buffer_sets"] > 1  # tiny tensors fit in L2: buffer sets are rotated
        for name in ("gett", "cupy"):
            result = case["results"][name]
            assert result["status"] == "ok" and result["rel_error"] < PRECISIONS[dtype].tolerance
            assert len(result["samples_ms"]) == 30
            assert result["gpu_held"] is True and result["host_ms_per_call"] > 0
    assert data["contractions"][0]["results"]["gett"]["kernel"]["registers"] == 64


def test_benchmark_marks_an_output_left_unwritten_as_failed(tmp_path):
    done = _run_with_stand_ins(tmp_path, "--only", "9", "--peers", "gett,cupy", "--broken",
                               "--json", str(tmp_path / "r.json"))
    assert done.returncode == 1  # gett failed
    assert "#9 gett FAILED: relative error nan" in done.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["contractions"][0]["results"]["gett"]["status"] == "failed"
    assert data["summary"]["all"]["gett"]["fraction"] is None


def test_versions_name_the_nvrtc_gett_loads_or_why_there_is_none(monkeypatch):
    """The results' versions carry gett's NVRTC (it decides the kernels' registers and may differ from CuPy's);
    where none loads, the reason, and the results are still written."""
    import gett
    from tccg_suite import runner
    cupy_stand_in = types.SimpleNamespace(__version__="stand-in", cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13000),
        nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0))))
    monkeypatch.setitem(sys.modules, "cupy", cupy_stand_in)
    loaded = types.ModuleType("gett.nvrtc")
    loaded.nvrtc_version = lambda: (13, 5)
    monkeypatch.setitem(sys.modules, "gett.nvrtc", loaded)
    assert runner._versions({})["gett_nvrtc"] == "13.5"

    def missing():
        raise gett.CompileError("NVRTC (libnvrtc) was not found")
    loaded.nvrtc_version = missing
    assert runner._versions({})["gett_nvrtc"] == "unavailable (NVRTC (libnvrtc) was not found)"
