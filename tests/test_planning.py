"""Planning time (issue #6): a plan whose cubin is in the disk cache neither compiles, nor loads NVRTC, nor
reads a header; the kernel cache's key still misses when gett's headers, the NVRTC library or the CUDA
headers change; and benchmarks/planning.py measures what it says. CPU only (NVRTC compiles without a GPU)."""
from __future__ import annotations

import ctypes.util
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

import gett
from gett import kernel, kernel_cache, nvrtc, plan_db

ARCH = "sm_90"
REPO = Path(__file__).resolve().parent.parent


def clear_in_process():
    gett.clear_cache()
    kernel_cache.clear_memory_cache()
    plan_db.clear_memory_cache()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty kernel cache and no plan or kernel memo, before and after (no test leaves a plan behind)."""
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "cache"))
    clear_in_process()
    yield tmp_path / "cache"
    clear_in_process()


def plan_matmul(m=64, n=48, k=32, arch=ARCH):
    d = gett.TensorDescriptor
    return gett.plan_contraction(d((m, k), None, "f16"), "mk", d((k, n), None, "f16"), "kn",
                                 d((m, n), None, "f16"), "mn", beta=0.0, device_arch=arch)


@pytest.fixture
def fake_compiler(monkeypatch):
    """Replace NVRTC's compile by a recorder that returns a fake cubin at once: the sources it was asked for."""
    calls = []

    def compile_cubin(source, *, arch="sm_90", name="gett_kernel.cu", options=(), include_dirs=()):
        calls.append(source)
        return nvrtc.CompileResult(cubin=b"\x7fELF fake " + source.encode()[:64], log="", resources={},
                                   compile_seconds=0.001, arch=nvrtc.normalize_arch(arch))

    monkeypatch.setattr(nvrtc, "compile_cubin", compile_cubin)
    return calls


def kernel_files(cache_root: Path) -> set:
    return {p.name for p in (cache_root / "kernels").glob("*.cubin")}


# Warm path -----------------------------------------------------------------------------------------------------
def test_warm_plan_neither_compiles_nor_loads_nvrtc(cache, monkeypatch):
    cold = plan_matmul()
    report = cold.kernel(ARCH).report
    assert not report.from_cache and Path(cold.kernel(ARCH).cubin_path).is_file()

    clear_in_process()

    def forbidden(*args, **kwargs):
        raise AssertionError("the warm path reached NVRTC")

    monkeypatch.setattr(nvrtc, "_lib", None)            # as in a new process: NVRTC not loaded yet
    monkeypatch.setattr(nvrtc, "_lib_path", None)
    monkeypatch.setattr(nvrtc, "_fingerprint", None)    # recomputed without loading NVRTC
    monkeypatch.setattr(nvrtc, "_load", forbidden)
    monkeypatch.setattr(nvrtc, "compile_cubin", forbidden)
    monkeypatch.setattr(nvrtc, "_compile", forbidden)
    warm = plan_matmul()
    assert warm is not cold
    k = warm.kernel(ARCH)
    assert k.report.from_cache and k.cubin_path == cold.kernel(ARCH).cubin_path
    assert (k.report.registers, k.report.shared_bytes) == (report.registers, report.shared_bytes)
    assert nvrtc._lib is None


def test_warm_plan_reads_no_header_and_fingerprints_once(cache, fake_compiler, monkeypatch):
    plan_matmul()
    assert len(fake_compiler) == 1
    clear_in_process()

    real_read_bytes, real_read_text = Path.read_bytes, Path.read_text

    def guard(path):
        if path.suffix in (".cuh", ".h", ".hpp"):
            raise AssertionError(f"the warm path read {path}")

    monkeypatch.setattr(Path, "read_bytes", lambda self: (guard(self), real_read_bytes(self))[1])
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (guard(self), real_read_text(self, *a, **k))[1])
    fingerprints = []
    real_fingerprint = nvrtc._toolchain_fingerprint
    monkeypatch.setattr(nvrtc, "_toolchain_fingerprint", lambda: fingerprints.append(1) or real_fingerprint())
    warm = plan_matmul()
    assert warm.kernel(ARCH).report.from_cache
    assert len(fake_compiler) == 1 and fingerprints == []


# The key still misses when it must -------------------------------------------------------------------------------
def test_changed_header_digest_misses(cache, fake_compiler, monkeypatch):
    first = plan_matmul()
    assert len(fake_compiler) == 1
    clear_in_process()
    assert plan_matmul().kernel(ARCH).report.from_cache and len(fake_compiler) == 1   # same headers: a hit

    clear_in_process()
    monkeypatch.setattr(kernel, "headers_digest", lambda: "0123456789abcdef")      # as if a .cuh had changed
    again = plan_matmul()
    assert len(fake_compiler) == 2 and not again.kernel(ARCH).report.from_cache
    assert again.kernel(ARCH).cubin_path != first.kernel(ARCH).cubin_path
    assert len(kernel_files(cache)) == 2


def test_header_digest_follows_the_headers(tmp_path, monkeypatch):
    copy = tmp_path / "kernels"
    shutil.copytree(kernel.kernels_dir(), copy)
    monkeypatch.setattr(kernel, "kernels_dir", lambda: copy)
    kernel.headers_digest.cache_clear()
    try:
        before = kernel.headers_digest()
        assert kernel.headers_digest() == before                       # memoised: same value, no re-read
        with open(copy / "gett.cuh", "a") as f:
            f.write("\n// an edit\n")
        assert kernel.headers_digest() == before                       # per process, until cleared
        kernel.headers_digest.cache_clear()
        assert kernel.headers_digest() != before
    finally:
        kernel.headers_digest.cache_clear()


@pytest.fixture
def fake_toolchain(tmp_path, monkeypatch):
    """A fake NVRTC library folder and CUDA include folder the fingerprint is taken of."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libnvrtc.so.13").write_bytes(b"nvrtc 13.0")
    (lib / "libnvrtc-builtins.so.13.0").write_bytes(b"builtins 13.0")
    inc = tmp_path / "include"
    (inc / "cuda").mkdir(parents=True)
    (inc / "cuda_fp16.h").write_text("// fp16 13.0\n")
    (inc / "cuda" / "std.h").write_text("// not at the top\n")
    monkeypatch.setattr(nvrtc, "_lib_path", None)
    monkeypatch.setattr(nvrtc, "_fingerprint", None)
    monkeypatch.setattr(nvrtc, "_library_candidates", lambda: iter([str(lib / "libnvrtc.so.13")]))
    monkeypatch.setattr(nvrtc, "cuda_include_dirs", lambda: [str(inc)])
    return lib, inc


def fresh_key():
    nvrtc.clear_toolchain_fingerprint()
    return kernel_cache.kernel_key("extern \"C\" __global__ void k() {}", arch=ARCH)


def test_key_misses_when_nvrtc_or_cuda_headers_change(fake_toolchain):
    lib, inc = fake_toolchain
    base = fresh_key()
    assert fresh_key() == base                                           # deterministic
    (lib / "libnvrtc.so.13").write_bytes(b"nvrtc 13.0 update 1")         # a patch release: same soname
    patched = fresh_key()
    assert patched != base
    (lib / "libnvrtc-builtins.so.13.0").write_bytes(b"builtins 13.0 update 1")
    builtins = fresh_key()
    assert builtins not in (base, patched)
    (inc / "cuda_fp16.h").write_text("// fp16 13.1, longer\n")            # CUDA headers from another wheel
    headers = fresh_key()
    assert headers not in (base, patched, builtins)
    (inc / "cuda" / "std.h").write_text("// subfolders are not looked at, by design\n")
    assert fresh_key() == headers


def test_key_uses_the_version_when_only_the_linker_finds_nvrtc(fake_toolchain, monkeypatch):
    monkeypatch.setattr(nvrtc, "_library_candidates", lambda: iter(["libnvrtc.so.13"]))   # a bare soname
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: (13, 0))
    old = fresh_key()
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: (13, 5))
    assert fresh_key() != old


def test_toolchain_fingerprint_does_not_load_nvrtc(monkeypatch):
    if nvrtc._library_file() is None:
        pytest.skip("NVRTC is found by the linker's search only")
    monkeypatch.setattr(nvrtc, "_lib", None)
    monkeypatch.setattr(nvrtc, "_lib_path", None)
    monkeypatch.setattr(nvrtc, "_fingerprint", None)
    fingerprint = nvrtc.toolchain_fingerprint()
    assert nvrtc._lib is None and len(fingerprint) == 16
    nvrtc._load()                                   # loading the library it describes changes nothing
    nvrtc.clear_toolchain_fingerprint()
    assert nvrtc.toolchain_fingerprint() == fingerprint


def test_linker_search_only_when_no_library_file(monkeypatch):
    if nvrtc._library_file() is None:
        pytest.skip("NVRTC is found by the linker's search only")

    def no_search(name):
        raise AssertionError("ctypes.util.find_library ran although a library file was found")

    monkeypatch.setattr(ctypes.util, "find_library", no_search)
    monkeypatch.setattr(nvrtc, "_lib", None)
    monkeypatch.setattr(nvrtc, "_lib_path", None)
    assert nvrtc.nvrtc_version()[0] >= 12
    assert Path(nvrtc._lib_path).is_file()


# The benchmark --------------------------------------------------------------------------------------------------
def load_benchmark():
    spec = importlib.util.spec_from_file_location("planning_benchmark", REPO / "benchmarks" / "planning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text, arch", [("9.0", "sm_90"), ("8.6", "sm_86"), ("10.0", "sm_100"), ("sm_90a", "sm_90a"),
                                        ("90", "sm_90")])
def test_benchmark_parses_arch(text, arch):
    assert load_benchmark().parse_arch(text) == arch


@pytest.mark.parametrize("bad", ["9", "9.x", "hopper", "9.10"])
def test_benchmark_rejects_arch(bad):
    with pytest.raises(ValueError):
        load_benchmark().parse_arch(bad)


def test_benchmark_measures_cold_warm_and_cached(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "mine"))
    out = tmp_path / "planning.json"
    bench = load_benchmark()
    assert bench.main(["--only", "9", "--arch", "9.0", "--warm-repeat", "2", "--cached-repeat", "3",
                       "--no-process", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "goal cold" in text and "goal warm" in text
    doc = json.loads(out.read_text())
    (rec,) = doc["records"]
    assert rec["id"] == 9 and doc["arch"] == "sm_90" and doc["dtype"] == "f16"
    assert rec["cold_s"] > rec["nvrtc_s"] > 0                 # the cold time includes the compile
    assert rec["warm_s"] < rec["cold_s"] and rec["cached_s"] < rec["warm_s"]
    assert doc["medians"]["cold_s"] == rec["cold_s"]
    assert set(doc["goals"]) == {"cold_s", "warm_s", "cold_met", "warm_met"}
    assert doc["machine"]["nvrtc"].count(".") == 1
    import os
    assert os.environ["GETT_CACHE_DIR"] == str(tmp_path / "mine")          # restored
    assert not (tmp_path / "mine").exists() or not any((tmp_path / "mine").rglob("*.cubin"))
    clear_in_process()


def test_benchmark_refuses_a_cold_time_that_did_not_compile(tmp_path, monkeypatch):
    bench = load_benchmark()
    from tccg_suite import select
    from tccg_suite.precision import PRECISIONS
    (c,) = select([9])
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "unused"))
    try:
        bench.measure_one(c, PRECISIONS["f16"], ARCH, 0.0, tmp_path, warm_repeat=1, cached_repeat=1)
        with pytest.raises(RuntimeError, match="did not compile"):   # same folder: the cubin is on disk
            bench.measure_one(c, PRECISIONS["f16"], ARCH, 0.0, tmp_path, warm_repeat=1, cached_repeat=1)
    finally:
        clear_in_process()


def test_tuning_benchmark_puts_the_user_database_back(tmp_path, monkeypatch):
    """benchmarks/tune_tccg.py tunes into an empty user plan database and restores the user's own file
    afterwards, even when tuning fails: its entries once overrode the shipped database in later runs."""
    from gett.config import KernelConfig
    spec = importlib.util.spec_from_file_location("tune_benchmark", REPO / "benchmarks" / "tune_tccg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path))
    user = plan_db.user_path("sm_90")
    user.parent.mkdir(parents=True)
    user.write_text('{"version": 1, "entries": {}}')
    mine = user.read_text()
    with pytest.raises(RuntimeError, match="tuning failed"), module.user_database_aside("sm_90") as path:
        assert path == user and not path.exists()
        d = gett.TensorDescriptor
        plan = gett.plan_contraction(d((64, 64), None, "f16"), "mk", d((64, 64), None, "f16"), "kn",
                                     d((64, 64), None, "f16"), "mn")
        plan_db.record(plan, "sm_90", KernelConfig("mma16", 64, 64, 32, 3, wm=32, wn=32), 1.0)
        assert path.exists()
        raise RuntimeError("tuning failed")
    assert user.read_text() == mine and not user.with_name(user.name + ".bak").exists()
