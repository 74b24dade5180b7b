"""NVRTC binding and compiled-kernel disk cache. CPU only: NVRTC compiles without a GPU."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import re
from pathlib import Path

import pytest

from gett import kernel_cache, nvrtc
from gett.errors import CompileError, DeviceError

SMEM_KERNEL = r"""
#include <cuda_fp16.h>
__global__ void scale(__half* a, float alpha) {
    __shared__ float tile[256];
    tile[threadIdx.x] = __half2float(a[threadIdx.x]) * alpha;
    __syncthreads();
    a[threadIdx.x] = __float2half(tile[255 - threadIdx.x]);
}
"""

# 64 live floats per thread cannot fit in 24 registers: ptxas must spill to local memory.
SPILL_KERNEL = r"""
extern "C" __global__ void spill(float* a, int n) {
    float r[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) r[i] = a[i * n + threadIdx.x];
    for (int j = 0; j < n; ++j) {
#pragma unroll
        for (int i = 0; i < 64; ++i) r[i] = r[i] * r[(i + 1) % 64] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += r[i] * i;
    a[threadIdx.x] = s;
}
"""

F32_KERNEL = r"""
extern "C" __global__ void axpy(float* y, const float* x, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i] + y[i] * 0.5f;
}
"""

F64_KERNEL = r"""
extern "C" __global__ void axpy(double* y, const double* x, double a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i] + y[i] * 0.5;
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache dir and memo for one test."""
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "cache"))
    kernel_cache.clear_memory_cache()
    yield tmp_path / "cache"
    kernel_cache.clear_memory_cache()


# ---------------------------------------------------------------------------------------------- nvrtc


def test_version_and_include_dirs():
    major, minor = nvrtc.nvrtc_version()
    assert isinstance(major, int) and isinstance(minor, int) and major >= 12
    dirs = nvrtc.cuda_include_dirs()
    assert any((Path(d) / "cuda_fp16.h").is_file() for d in dirs)


@pytest.mark.parametrize(
    "arch, expected",
    [("sm_90", "sm_90"), ("90", "sm_90"), (90, "sm_90"), ("sm_90a", "sm_90a"), ("compute_80", "sm_80")],
)
def test_normalize_arch(arch, expected):
    assert nvrtc.normalize_arch(arch) == expected


@pytest.mark.parametrize("bad", ["sm_x", "volta", "", True, 9.0])
def test_normalize_arch_rejects(bad):
    with pytest.raises(DeviceError):
        nvrtc.normalize_arch(bad)


@pytest.mark.parametrize("arch", ["sm_80", 90])
def test_cubin_and_resources(arch):
    res = nvrtc.compile_cubin(SMEM_KERNEL, arch=arch)
    assert res.cubin[:4] == b"\x7fELF"  # SASS in an ELF container, not PTX text
    assert res.arch == nvrtc.normalize_arch(arch)
    assert res.compile_seconds > 0
    assert "ptxas" in res.log
    assert set(res.resources) == {"_Z5scaleP6__halff"}  # keyed by mangled name
    r = res.resources["_Z5scaleP6__halff"]
    assert r.registers > 0
    assert (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0)
    assert r.shared_bytes == 256 * 4
    if res.arch == "sm_80":
        assert r.constant_bytes > 0  # NVRTC 13.5 prints cmem[0] up to sm_8x only


def test_forced_spill_is_reported():
    res = nvrtc.compile_cubin(SPILL_KERNEL, arch="sm_90", options=["-maxrregcount=24"])
    r = res.resources["spill"]
    assert 0 < r.registers <= 24
    assert r.spill_stores > 0 and r.spill_loads > 0 and r.stack_bytes > 0
    # Without the limit the same kernel fits in registers.
    assert nvrtc.compile_cubin(SPILL_KERNEL, arch="sm_90").resources["spill"].spill_stores == 0


def test_syntax_error_keeps_source(cache):
    src = 'extern "C" __global__ void broken(float* a) { a[0] = ; }\n'
    with pytest.raises(CompileError) as info:
        nvrtc.compile_cubin(src, arch="sm_90", name="broken.cu")
    msg = str(info.value)
    assert "expected an expression" in msg  # NVRTC's own diagnostic
    kept = Path(re.search(r"Source kept at: (\S+)", msg).group(1))
    assert kept.is_file() and kept.read_text() == src
    assert kept.parent == cache / "failed" and kept.name.endswith("_broken.cu")
    assert isinstance(info.value, RuntimeError)


def test_ptx_f32_has_no_f64():
    f32 = nvrtc.compile_ptx(F32_KERNEL, arch="sm_90")
    f64 = nvrtc.compile_ptx(F64_KERNEL, arch="sm_90")
    assert ".target sm_90" in f32
    assert not re.search(r"\.f64\b", f32)
    assert re.search(r"\.f64\b", f64)


def test_parse_ptxas_log_formats():
    log = (
        "ptxas info    : 40 bytes gmem, 400 bytes cmem[3]\n"
        "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'\n"
        "ptxas info    : Function properties for _Z3fooPf\n"
        "ptxas         .     32 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 21 registers, used 1 barriers, 32 bytes cumulative stack size, "
        "512 bytes smem, 360 bytes cmem[0]\n"
        "ptxas info    : Compile time = 3.680 ms\n"
        "ptxas info    : Function properties for _Z1hPf\n"  # a __noinline__ device function: not a kernel
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Compiling entry function 'bar' for 'sm_70'\n"  # older ptxas layout
        "ptxas info    : Function properties for bar\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 12 registers, 64 bytes smem, 352 bytes cmem[0], 4 bytes cmem[2]\n"
    )
    got = nvrtc.parse_ptxas_log(log)
    assert got == {
        "_Z3fooPf": nvrtc.ResourceUsage(21, 8, 12, 32, 512, 360),
        "bar": nvrtc.ResourceUsage(12, 0, 0, 0, 64, 352),
    }


def test_missing_library_says_what_to_install(monkeypatch):
    monkeypatch.setattr(nvrtc, "_lib", None)
    monkeypatch.setattr(nvrtc, "_library_candidates", lambda: [])
    with pytest.raises(CompileError, match=re.escape('pip install "nvidia-cuda-nvrtc==13.*"')):
        nvrtc.nvrtc_version()


# --------------------------------------------------------------------------------------- kernel cache


def test_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.delenv("GETT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_dir() == tmp_path / "xdg" / "gett"
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "explicit"))
    assert kernel_cache.cache_dir() == tmp_path / "explicit"
    assert (tmp_path / "explicit").is_dir()


def test_cache_hit_memo_and_disk(cache, monkeypatch):
    first = kernel_cache.compile_cached(SMEM_KERNEL, arch="sm_90")
    assert not first.from_cache
    assert first.path == cache / "kernels" / f"{first.key}.cubin"
    assert first.path.read_bytes()[:4] == b"\x7fELF"

    # Neither a memo hit nor a disk hit may compile.
    def no_compile(*a, **k):
        raise AssertionError("compiled although cached")

    monkeypatch.setattr(nvrtc, "compile_cubin", no_compile)
    memo = kernel_cache.compile_cached(SMEM_KERNEL, arch="90")  # same arch spelled differently
    assert memo.from_cache and memo.path == first.path

    kernel_cache.clear_memory_cache()
    disk = kernel_cache.compile_cached(SMEM_KERNEL, arch="sm_90")
    assert disk.from_cache and disk.path == first.path and disk.key == first.key
    assert disk.resources == first.resources
    assert disk.compile_seconds == first.compile_seconds and disk.arch == "sm_90"


def test_cache_key_depends_on_arch_and_options(cache):
    a = kernel_cache.kernel_key(F32_KERNEL, arch="sm_90")
    assert kernel_cache.kernel_key(F32_KERNEL, arch=90) == a
    assert kernel_cache.kernel_key(F32_KERNEL, arch="sm_80") != a
    assert kernel_cache.kernel_key(F32_KERNEL, arch="sm_90", options=["-lineinfo"]) != a
    assert kernel_cache.kernel_key(F32_KERNEL + " ", arch="sm_90") != a


@pytest.mark.parametrize("damage", ["json_garbage", "json_missing_field", "cubin_truncated", "cubin_missing"])
def test_corrupt_entry_is_recompiled(cache, damage):
    first = kernel_cache.compile_cached(F32_KERNEL, arch="sm_80")
    json_path = first.path.with_suffix(".json")
    if damage == "json_garbage":
        json_path.write_text("{not json")
    elif damage == "json_missing_field":
        meta = json.loads(json_path.read_text())
        del meta["resources"]
        json_path.write_text(json.dumps(meta))
    elif damage == "cubin_truncated":
        first.path.write_bytes(first.path.read_bytes()[:100])
    else:
        first.path.unlink()
    kernel_cache.clear_memory_cache()
    with pytest.warns(UserWarning, match="kernel cache entry"):
        again = kernel_cache.compile_cached(F32_KERNEL, arch="sm_80")
    assert not again.from_cache and again.path == first.path
    assert again.resources == first.resources
    kernel_cache.clear_memory_cache()
    assert kernel_cache.compile_cached(F32_KERNEL, arch="sm_80").from_cache  # repaired on disk


def _compile_in_child(barrier, queue):
    """Child process: wait for the others, then compile the same kernel through the cache."""
    barrier.wait()
    k = kernel_cache.compile_cached(SPILL_KERNEL, arch="sm_90", options=["-maxrregcount=24"])
    queue.put((str(k.path), k.from_cache, hashlib.sha256(k.path.read_bytes()).hexdigest()))


def test_concurrent_processes_share_one_entry(cache):
    n = 4
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no state shared with this process
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_compile_in_child, args=(barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len({path for path, _, _ in results}) == 1
    assert len({sha for _, _, sha in results}) == 1
    files = sorted(p.name for p in (cache / "kernels").iterdir())
    assert len(files) == 2 and files[0].endswith(".cubin") and files[1].endswith(".json")  # no temp leftovers
    kernel_cache.clear_memory_cache()
    k = kernel_cache.compile_cached(SPILL_KERNEL, arch="sm_90", options=["-maxrregcount=24"])
    assert k.from_cache and str(k.path) == results[0][0]
    assert k.resources["spill"].spill_stores > 0
