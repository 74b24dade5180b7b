"""The dot kernel's host side (no GPU): which plans the heuristic gives it, its configurations' checks, the
vector it loads along K, and NVRTC compiling it without spills for every dtype, semirings, ops and split K.
Its results on the GPU: tests/test_gpu_dot.py."""
from dataclasses import replace

import numpy as np
import pytest

import gett
from gett.codegen import dot_vector, render_kernel
from gett.config import KernelConfig, default_config, dot_config
from gett.kernel import build_kernel
from gett.tuner import candidate_configs

D = gett.TensorDescriptor


def plan_of(expr, extents, dtype="f32", out=None, strides=None, **kw):
    """Plan ``expr`` ("mk,nk->mn") over row-major descriptors (or ``strides``: tensor -> strides)."""
    ins, c = expr.split("->")
    a, b = ins.split(",")
    strides = strides or {}
    desc = {t: D(tuple(extents[m] for m in modes), strides.get(t), out if t == "C" and out else dtype)
            for t, modes in zip("ABC", (a, b, c))}
    return gett.plan_contraction(desc["A"], a, desc["B"], b, desc["C"], c, **kw)


@pytest.mark.parametrize("expr, extents, tile, split", [
    ("k,k->", {"k": 1 << 24}, (1, 1), 128),                        # a dot product: K split over 128 CTAs
    ("lk,lk->l", {"l": 4096, "k": 4096}, (1, 1), 1),               # row-wise dots: a CTA a row
    ("mk,nk->mn", {"m": 3, "n": 4, "k": 100000}, (4, 4), 6),      # M padded to 4; 16 steps a thread
    ("mk,k->m", {"m": 13, "k": 5000}, (16, 1), 1),
    ("mk,k->m", {"m": 8192, "k": 8192}, (4, 1), 1),                # a matrix-vector product: 4-row tiles over M
    ("mk,k->m", {"m": 64, "k": 100000}, (4, 1), 6),                # (f32: 4-element vectors) 16 tiles: K split
    ("kjm,jkn->mn", {"k": 31, "j": 17, "m": 2, "n": 8}, (2, 8), 1),
])
def test_heuristic_gives_few_outputs_over_a_long_k_the_dot_kernel(expr, extents, tile, split):
    cfg = default_config(plan_of(expr, extents))
    assert cfg.math == "dot" and (cfg.bm, cfg.bn) == tile and cfg.split_k == split
    cfg.validate()


def test_a_batch_along_the_stride_one_mode_runs_a_thread_a_row():
    """Row-major ``kl,kl->l`` (column sums): K is 4096 elements apart, the batch contiguous."""
    cfg = default_config(plan_of("kl,kl->l", {"k": 4096, "l": 4096}, "f16"))
    assert (cfg.math, cfg.bk, cfg.tiles_per_cta, cfg.threads, cfg.stages) == ("dot", 1, 128, 128, 8)
    assert cfg.split_k == 64   # 32 CTAs of 128 rows, split until 16 an SM (capped at 4096 // 64)
    along_k = default_config(plan_of("lk,lk->l", {"k": 4096, "l": 4096}, "f16"))
    assert along_k.bk == 128 and along_k.tiles_per_cta == 1


@pytest.mark.parametrize("expr, extents", [
    ("mk,nk->mn", {"m": 5, "n": 5, "k": 100000}),    # 8 x 8 = 64 sums a thread: a GEMM tile
    ("lk,lk->l", {"l": 4096, "k": 200}),             # K below DOT_MIN_K
    ("mk,nk->mn", {"m": 64, "n": 2, "k": 100000}),   # M past the largest dot tile side, N not 1
    ("km,k->m", {"m": 4096, "k": 4096}),             # a matrix-vector product whose K is not A's stride-1 mode
])
def test_heuristic_keeps_gemm_tiles_elsewhere(expr, extents):
    assert dot_config(plan_of(expr, extents)) is None
    assert default_config(plan_of(expr, extents)).math != "dot"


def test_threads_shrink_with_a_short_k_and_loads_in_flight_with_more_outputs():
    short = default_config(plan_of("lk,lk->l", {"l": 100000, "k": 256}, "f16"))   # 32 vectors of 8 halves
    assert short.math == "dot" and short.bk == 32 and short.stages == 4
    assert short.threads == 128 and short.tiles_per_cta == 4   # four rows a CTA
    wide = default_config(plan_of("mk,nk->mn", {"m": 4, "n": 4, "k": 100000}))
    assert wide.stages == 2 and wide.stages * (wide.bm + wide.bn) <= 16


@pytest.mark.parametrize("change, match", [
    ({"bm": 3}, "bm and bn one of"),
    ({"bm": 8, "bn": 4}, "at most 16 outputs"),
    ({"bk": 96}, "threads"),
    ({"stages": 9}, "in flight"),
    ({"bm": 4, "bn": 4, "stages": 3}, "in flight"),
    ({"ws": True}, "ws"),
    ({"persistent": True}, "persistent"),
])
def test_dot_configurations_are_checked(change, match):
    cfg = KernelConfig("dot", 1, 1, 256, 4)
    cfg.validate()
    bad = KernelConfig(**{**cfg.__dict__, **change})
    with pytest.raises(ValueError, match=match):
        bad.validate()


@pytest.mark.parametrize("dtype, strides, vector", [
    ("f16", None, 8), ("f32", None, 4), ("f64", None, 2), ("c128", None, 1),
    ("f16", {"A": (2,), "B": (1,)}, 1),   # A strided along K: scalar loads of both
])
def test_dot_vector_is_the_widest_contiguous_run_of_both_operands(dtype, strides, vector):
    plan = plan_of("k,k->", {"k": 4096}, dtype, strides=strides)
    assert dot_vector(plan) == vector


def test_an_odd_k_takes_scalars():
    assert dot_vector(plan_of("k,k->", {"k": 4097}, "f16")) == 1


def test_the_dot_kernel_source_instantiates_dot_cuh_with_the_plan_s_choices():
    plan = plan_of("lk,lk->l", {"l": 7, "k": 1000}, "f16", out="f32")
    cfg = KernelConfig("dot", 1, 1, 128, 2, split_k=3)
    src, smem, threads, maps = render_kernel(plan, cfg)
    assert '#include "dot.cuh"' in src and "gett::Dot<Problem" in src and ", 1, 1, 128, 128, 8, 2, 3," in src
    assert "gett_reduce_splits" in src and (smem, threads, maps) == (0, 128, None)
    four = render_kernel(plan, KernelConfig("dot", 1, 1, 32, 2))   # four 32-thread tiles a CTA
    assert ", 1, 1, 128, 32, 8, 2, 1," in four[0] and four[2] == 128
    one = render_kernel(plan, KernelConfig("dot", 1, 1, 128, 2))[0]
    assert "gett_reduce_splits" not in one


def _leaky(x):
    return x if x > 0 else 0.01 * x


@pytest.mark.parametrize("dtype, out, compute, kw", [
    ("f16", "f16", None, {}), ("f16", "f32", None, {}), ("bf16", "f32", None, {}), ("f32", "f32", None, {}),
    ("f32", "f32", "tf32", {}), ("f64", "f64", None, {}), ("c64", "c64", None, {}), ("c128", "c128", None, {}),
    ("i32", "i32", None, {}), ("i64", "i64", None, {}),
    ("f32", "f32", None, {"op_ab": lambda a, b: a + b, "reduce": (max, -np.inf)}),
    ("f16", "f16", None, {"op_a": _leaky, "op_out": gett.ops.sigmoid}),
])
@pytest.mark.parametrize("expr, extents", [
    ("k,k->", {"k": 1 << 20}),
    ("mk,nk->mn", {"m": 3, "n": 4, "k": 5000}),
    ("mk,k->m", {"m": 16, "k": 5000}),
])
def test_dot_kernels_compile_without_spills(dtype, out, compute, kw, expr, extents):
    plan = plan_of(expr, extents, dtype, out, compute_type=compute, **kw)
    heuristic = build_kernel(plan, "sm_90")
    assert heuristic.config.math == "dot"
    a_thread_a_tile = replace(heuristic.config, bk=1, stages=1)
    for kernel in (heuristic, build_kernel(plan, "sm_90", a_thread_a_tile)):
        assert kernel.report.spill_stores == 0 and kernel.report.spill_loads == 0


def test_the_tuner_times_the_dot_kernel_first_and_gemm_tiles_after_it():
    plan = plan_of("lk,lk->l", {"l": 64, "k": 8192}, "f16")
    configs = candidate_configs(plan, "sm_90")
    assert configs[0] == default_config(plan, "sm_90") and configs[0].math == "dot"
    assert any(c.math == "dot" and c != configs[0] for c in configs)
    assert any(c.math != "dot" for c in configs)
