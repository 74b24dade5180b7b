"""Generated kernels on the GPU against numpy in float64: random contractions of every dtype and path,
outputs poisoned with NaN before each run and checked for full coverage, plus the edge cases of
DESIGN.md (beta = 0 with NaN in C, in-place D = C, empty K, determinism)."""
import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gett
from cases import NUMPY_DTYPE, buffer_size, contractions, make_view, oracle, random_values

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

# (data dtype, output dtype, compute_type) -> relative Frobenius tolerance
PATHS = {
    ("f16", "f32", None): 2e-3, ("f16", "f16", None): 4e-3, ("bf16", "f32", None): 2e-3,
    ("f32", "f32", None): 1e-5, ("f32", "f32", "tf32"): 5e-3, ("f32", "f32", "3xtf32"): 1e-5,
    ("f64", "f64", None): 1e-12, ("c64", "c64", None): 1e-5, ("c128", "c128", None): 1e-12,
    ("i32", "i32", None): 0, ("i64", "i64", None): 0,
}
EXAMPLES_PER_PATH = 35   # 11 paths -> 385 generated contractions


class _TorchNamespace:
    """Just enough of an array namespace for make_view over a torch tensor (bf16 has no CuPy dtype)."""
    @staticmethod
    def asarray(values):
        import torch
        return torch.from_numpy(np.array(values, dtype=np.float32)).to("cuda", torch.bfloat16)


def device_view(values, shape, layout, dtype):
    """The same logical tensor as make_view(np, ...) but on the GPU, in ``dtype``."""
    if dtype == "bf16":
        return make_view(_TorchNamespace, values, shape, layout)
    return make_view(cp, values.astype(NUMPY_DTYPE[dtype]), shape, layout)


def poison(n, dtype):
    """Values no kernel computes: NaN for floats, a huge negative number for integers."""
    if dtype[0] == "i":
        return np.full(n, np.iinfo(NUMPY_DTYPE[dtype]).min, NUMPY_DTYPE[dtype])
    return np.full(n, np.nan, np.float32 if dtype == "bf16" else NUMPY_DTYPE[dtype])


def to_host(x):
    return x.float().cpu().numpy() if hasattr(x, "cpu") else cp.asnumpy(x)


def run_case(case, compute_type, seed, config=None, staging=None):
    """Plan and run ``case`` on the GPU with a NaN-poisoned D; return (plan, D on the host, oracle)."""
    rng = np.random.default_rng(seed)
    host, dev = {}, {}
    for t in "ABC":
        dt = case.dtype if t != "C" else case.out_dtype
        shape = case.shape(t)
        vals = random_values(rng, buffer_size(shape, case.layouts[t]), dt)
        if dt == "bf16":   # the oracle sees the values bf16 really holds
            vals = to_host(_TorchNamespace.asarray(vals))
        host[t] = make_view(np, vals, shape, case.layouts[t])
        dev[t] = device_view(vals, shape, case.layouts[t], dt)
    shape_c = case.shape("C")
    D = device_view(poison(buffer_size(shape_c, case.layouts["C"]), case.out_dtype), shape_c,
                    case.layouts["C"], case.out_dtype)
    plan = gett.plan_contraction(dev["A"], case.modes_A, dev["B"], case.modes_B, dev["C"], case.modes_C,
                                 D=D, compute_type=compute_type, broadcast=case.broadcast, config=config,
                                 staging=staging)
    gett.contract(plan, case.alpha, dev["A"], dev["B"], case.beta, dev["C"], D)
    return plan, to_host(D), oracle(case, host["A"], host["B"], host["C"])


def check(case, got, expect, tol):
    if case.dtype[0] == "i":   # exact, wrapping like the kernel's integer arithmetic
        assert np.array_equal(got, expect.astype(got.dtype)), "integer result differs"
        return
    assert_close(got, expect, tol)


def assert_close(got, expect, tol=2e-3):
    """``got`` (a NaN-poisoned output, on the host) against ``expect`` (float64): every element written,
    relative Frobenius error at most ``tol`` (2e-3: f16 data)."""
    assert np.all(np.isfinite(got)), f"{np.sum(~np.isfinite(got))} of {got.size} outputs not written"
    ref = np.linalg.norm(expect.ravel()) or 1.0
    err = np.linalg.norm((got - expect).ravel()) / ref
    assert err <= tol, f"relative error {err:.2e} > {tol:.0e}"


@pytest.mark.parametrize("path", list(PATHS), ids=lambda p: "-".join(x or "default" for x in p))
def test_random_contractions(path):
    dtype, out, compute = path
    tol = PATHS[path]

    @settings(max_examples=EXAMPLES_PER_PATH, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=contractions(dtypes=(dtype,), out_dtypes={dtype: (out,)}, max_elements=40000),
           seed=st.integers(0, 2**31))
    def inner(case, seed):
        if dtype == "bf16":   # torch views cannot have negative steps
            case.layouts = {t: (p, s, tuple(False for _ in f)) for t, (p, s, f) in case.layouts.items()}
        if dtype[0] == "i":
            case.alpha, case.beta = float(int(case.alpha) or 1), float(int(case.beta))
        plan, got, expect = run_case(case, compute, seed)
        check(case, got, expect, tol)
    inner()


STAGED_PATHS = [("f16", "f32", None), ("bf16", "f32", None), ("f32", "f32", None), ("f64", "f64", None),
                ("c64", "c64", None), ("i32", "i32", None)]


@pytest.mark.parametrize("path", STAGED_PATHS, ids=lambda p: "-".join(x or "default" for x in p))
def test_random_contractions_with_staged_operands(path):
    """Both operands copied into the planner's dense layouts first (both copy kernels: runs and transposed
    blocks; reversed and strided sources; torch tensors for bf16), then contracted: as numpy says."""
    dtype, out, compute = path

    @settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(case=contractions(dtypes=(dtype,), out_dtypes={dtype: (out,)}, max_elements=40000),
           seed=st.integers(0, 2**31))
    def inner(case, seed):
        if dtype == "bf16":
            case.layouts = {t: (p, s, tuple(False for _ in f)) for t, (p, s, f) in case.layouts.items()}
        if dtype[0] == "i":
            case.alpha, case.beta = float(int(case.alpha) or 1), float(int(case.beta))
        plan, got, expect = run_case(case, compute, seed, staging=True)
        check(case, got, expect, PATHS[path])
    inner()


def _leaky(x):
    return x if x > 0 else 0.01 * x


@pytest.mark.parametrize("dtype,tol", [("f16", 2e-3), ("f32", 1e-5)])
def test_staged_operands_with_fused_ops(dtype, tol):
    """Leaky ReLU on A, B and C with both operands staged (A transposed, B copied in runs): the copies
    apply op_a/op_b, the contraction op_c; as numpy says in float64."""
    rng = np.random.default_rng(11)
    npdt = NUMPY_DTYPE[dtype]
    A = cp.asarray(rng.standard_normal((40, 70, 33)).astype(npdt)).transpose(2, 0, 1)   # "kma", k fast
    B = cp.asarray(rng.standard_normal((33, 70, 50)).astype(npdt))                       # "kbn", n fast
    C = cp.asarray(rng.standard_normal((40, 50)).astype(npdt))
    D = cp.full((40, 50), cp.nan, dtype=npdt)
    plan = gett.plan_contraction(A, "kma", B, "kbn", C, "mn", D=D, op_a=_leaky, op_b=_leaky, op_c=_leaky,
                                 staging=True)
    assert {s.tensor for s in plan.staging} == {"A", "B"}
    gett.contract(plan, 1.5, A, B, -0.5, C, D)
    la, lb, lc = (np.where(x > 0, x, 0.01 * x) for x in (to_host(A).astype(np.float64),
                                                         to_host(B).astype(np.float64),
                                                         to_host(C).astype(np.float64)))
    expect = 1.5 * np.einsum("kma,kbn->mn", la, lb) - 0.5 * lc
    assert_close(to_host(D).astype(np.float64), expect, tol)


@pytest.mark.parametrize("dtype,tol,vector", [("f16", 2e-3, 8), ("f32", 1e-5, 4)])
@pytest.mark.parametrize("extent_a", [64, 12])
def test_transposing_copy_in_vectors(dtype, tol, vector, extent_a):
    """The transposing copy moving 16-byte vectors: A "kma" with k fastest is copied M-major through
    whole 72-blocks along k and 64- (f16) or 32-blocks (f32) along m, the last one partial (200 = 3 x 64
    + 8 = 6 x 32 + 8), op_a applied; with 12 of a (48 or 84 such blocks: fewer than 256) in 16 x 16 blocks,
    both sides' last ones partial (200 = 12 x 16 + 8, 72 = 4 x 16 + 8)."""
    from gett.staging import render_copy
    rng = np.random.default_rng(3)
    npdt = NUMPY_DTYPE[dtype]
    A = cp.asarray(rng.standard_normal((extent_a, 200, 72)).astype(npdt)).transpose(2, 1, 0)   # "kma", k fast
    B = cp.asarray(rng.standard_normal((72, extent_a, 40)).astype(npdt))
    C = cp.asarray(rng.standard_normal((200, 40)).astype(npdt))
    D = cp.full((200, 40), cp.nan, dtype=npdt)
    plan = gett.plan_contraction(A, "kma", B, "kan", C, "mn", D=D, op_a=_leaky, staging=True)
    copy = next(s for s in plan.staging if s.tensor == "A")
    # m's blocks (200 is too long for one) by all of k's 72, or a small copy's 16 x 16
    tq, tp = ((64 if dtype == "f16" else 32), 72) if extent_a == 64 else (16, 16)
    assert f"transpose_tiles<{'__half' if dtype == 'f16' else 'float'}, Acc, Op, Index, Offset, {tq}, {tp}, {vector}," \
        in render_copy(copy).source.replace("\n", "")
    gett.contract(plan, 1.0, A, B, 0.5, C, D)
    a = to_host(A).astype(np.float64)
    expect = np.einsum("kma,kan->mn", np.where(a > 0, a, 0.01 * a), to_host(B).astype(np.float64)) \
        + 0.5 * to_host(C).astype(np.float64)
    assert_close(to_host(D).astype(np.float64), expect, tol)


def test_transposing_copy_in_blocks_of_whole_destination_runs():
    """Where a block can hold all of the destination's stride-1 mode and the copy keeps 256 blocks (64 x 4
    here), the transposing copy writes whole runs of it: m's 200 whole by 64 of k (staging._tile_sides,
    TCCG #14's copy of A), op_a applied on the way."""
    from gett.staging import render_copy
    rng = np.random.default_rng(5)
    A = cp.asarray(rng.standard_normal((64, 200, 200)).astype(np.float16)).transpose(2, 1, 0)   # "kma", k fast
    B = cp.asarray(rng.standard_normal((200, 64, 24)).astype(np.float16))
    C = cp.asarray(rng.standard_normal((200, 24)).astype(np.float16))
    D = cp.full((200, 24), cp.nan, dtype=np.float16)
    plan = gett.plan_contraction(A, "kma", B, "kan", C, "mn", D=D, op_a=_leaky, staging=True)
    copy = next(s for s in plan.staging if s.tensor == "A")
    assert "transpose_tiles<__half, Acc, Op, Index, Offset, 200, 64, 8," in render_copy(copy).source.replace("\n", "")
    gett.contract(plan, 1.0, A, B, 0.5, C, D)
    a = to_host(A).astype(np.float64)
    expect = np.einsum("kma,kan->mn", np.where(a > 0, a, 0.01 * a), to_host(B).astype(np.float64)) \
        + 0.5 * to_host(C).astype(np.float64)
    assert_close(to_host(D).astype(np.float64), expect, 2e-3)


def test_planner_stages_a_small_operand_for_its_op():
    """A 16 KB B with an op, read by 256 tiles of a 32768-row A: the planner copies it (applying op_b)
    rather than applying the op in every tile; the result is numpy's."""
    rng = np.random.default_rng(4)
    A = cp.asarray(rng.standard_normal((32768, 64)).astype(np.float16))
    B = cp.asarray(rng.standard_normal((64, 128)).astype(np.float16))
    C = cp.asarray(rng.standard_normal((32768, 128)).astype(np.float16))
    D = cp.full((32768, 128), cp.nan, dtype=np.float16)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D, op_a=abs, op_b=_leaky)
    assert [(s.tensor, s.op is not None) for s in plan.staging] == [("B", True)]
    gett.contract(plan, 1.0, A, B, 1.0, C, D)
    b = to_host(B).astype(np.float64)
    expect = np.abs(to_host(A).astype(np.float64)) @ np.where(b > 0, b, 0.01 * b) + to_host(C).astype(np.float64)
    assert_close(to_host(D).astype(np.float64), expect)


WGMMA_TILES = [(64, 64), (64, 128), (128, 128), (128, 160), (128, 192), (128, 224), (128, 240), (128, 256)]
SWAPPED_TILES = [(72, 128), (80, 64), (64, 256), (192, 128)]   # (bm, bn): M is the instruction's width


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_wgmma_random_contractions(dtype):
    """Hopper's warpgroup MMA through the swizzled shared layout: every operand direction (K- or
    MN-major, vectors or staged scalars, boxes), partial tiles and batches, with each tile shape."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 GPU")
    from gett.config import KernelConfig

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(case=contractions(dtypes=(dtype,), out_dtypes={dtype: ("f32", dtype)}, max_elements=60000),
           tile=st.sampled_from([(*t, False) for t in WGMMA_TILES] + [(*t, True) for t in SWAPPED_TILES]),
           stages=st.integers(3, 5), ws=st.booleans(), seed=st.integers(0, 2**31))
    def inner(case, tile, stages, ws, seed):
        if dtype == "bf16":   # torch views cannot have negative steps
            case.layouts = {t: (p, s, tuple(False for _ in f)) for t, (p, s, f) in case.layouts.items()}
        bm, bn, swap = tile
        config = KernelConfig("wgmma", bm, bn, 64, stages, ws=ws, swap=swap)
        try:
            plan, got, expect = run_case(case, None, seed, config)
        except ValueError as e:
            # a producer warpgroup copies asynchronously only: staged scalars can't
            assert ws and "warp specialisation needs both operands copied asynchronously" in str(e)
            plan, got, expect = run_case(case, None, seed, KernelConfig("wgmma", bm, bn, 64, stages, swap=swap))
        assert plan.kernel().config.math == "wgmma"
        check(case, got, expect, 4e-3 if case.out_dtype == dtype else 2e-3)
    inner()


@pytest.mark.parametrize("a_modes,b_modes", [("mk", "kn"), ("km", "nk"), ("mk", "nk"), ("km", "kn")])
@pytest.mark.parametrize("tile", [(128, 128), (128, 256)])
@pytest.mark.parametrize("ops,stages", [("a", 3), ("ab", 4)])
@pytest.mark.parametrize("ws,split", [(False, 1), (True, 1), (True, 3)], ids=["plain", "ws", "ws-split3"])
def test_wgmma_long_k_every_operand_direction(a_modes, b_modes, tile, ops, stages, ws, split):
    """Many K tiles through the pipeline, partial M/N/K tiles, K- and MN-major operands, ops on A (3
    stages: transformed in shared memory) or on A and B (4 stages: B staged through registers and
    stored an iteration after its loads, A transformed in shared memory); warp-specialised (ws: the
    producer warpgroup transforms both in place), also with K split over 3 CTAs."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 GPU")
    from gett.config import KernelConfig
    rng = np.random.default_rng(14)
    ext = {"m": 300, "n": 270, "k": 1000}
    a = random_values(rng, 300 * 1000, "f16").reshape([ext[c] for c in a_modes])
    b = random_values(rng, 270 * 1000, "f16").reshape([ext[c] for c in b_modes])
    A, B = cp.asarray(a.astype(np.float16)), cp.asarray(b.astype(np.float16))
    D = cp.full((300, 270), np.nan, dtype=cp.float32)
    leaky = {"op_a": lambda x: x if x > 0 else 0.1 * x, "op_b": lambda x: x if x > 0 else 0.25 * x}
    config = KernelConfig("wgmma", *tile, 64, stages, split_k=split, ws=ws)
    plan = gett.plan_contraction(A, a_modes, B, b_modes, D, "mn", config=config,
                                 **{f"op_{t}": leaky[f"op_{t}"] for t in ops})
    assert plan.kernel().config == config
    gett.contract(plan, 1.5, A, B, 0.0, D)
    a64, b64 = cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64)
    a64 = np.where(a64 > 0, a64, 0.1 * a64)
    if "b" in ops:
        b64 = np.where(b64 > 0, b64, 0.25 * b64)
    expect = 1.5 * np.einsum(f"{a_modes},{b_modes}->mn", a64, b64)
    assert_close(cp.asnumpy(D), expect)


@pytest.mark.parametrize("d_fast", ["m", "n"])
@pytest.mark.parametrize("a_modes,b_modes", [("km", "kn"), ("km", "nk"), ("mk", "kn")])
@pytest.mark.parametrize("m,k", [(72, 72), (100, 1000)])
@pytest.mark.parametrize("tile,stages,ws,split", [
    ((72, 128), 3, False, 1), ((72, 64), 3, False, 1), ((80, 256), 3, False, 1), ((72, 128), 4, True, 1),
    ((128, 128), 4, True, 3)], ids=["72x128", "72x64", "80x256", "72x128-ws", "128x128-ws-split3"])
def test_wgmma_swapped_operands(a_modes, b_modes, m, k, tile, stages, ws, split, d_fast):
    """wgmma with B's tile as the instruction's rows and A's (M) as its width (``swap``): M of 72 and 100
    (a partial second tile), K in one tile or many, K- or N-major B, K-major A (an M-major A needs whole
    64-row atoms: 128), with a producer warpgroup and with K split over 3 CTAs; D's stride-1 side is M
    (the accumulators go to the epilogue tile as pairs of rows) or N."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 GPU")
    from gett.config import KernelConfig
    if a_modes == "mk" and tile[0] % 64:
        tile = (128, tile[1])
    rng = np.random.default_rng(15)
    ext = {"m": m, "n": 1000, "k": k}
    A, B = column_major_f16(rng, a_modes, ext), column_major_f16(rng, b_modes, ext)
    D = cp.full((1000, m), np.nan, dtype=cp.float16).T if d_fast == "m" else cp.full((m, 1000), np.nan, dtype=cp.float16)
    C = column_major_f16(rng, "mn", ext)
    config = KernelConfig("wgmma", *tile, 64, stages, split_k=split, ws=ws, swap=True)
    plan = gett.plan_contraction(A, a_modes, B, b_modes, C, "mn", D=D, config=config)
    assert plan.kernel().config == config
    assert epilogue_args(plan.kernel().source)["m_fast"] == (d_fast == "m")
    gett.contract(plan, 1.5, A, B, -0.5, C, D)
    expect = 1.5 * np.einsum(f"{a_modes},{b_modes}->mn", cp.asnumpy(A).astype(np.float64),
                             cp.asnumpy(B).astype(np.float64)) - 0.5 * cp.asnumpy(C).astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect)


def column_major_f16(rng, modes, ext):
    """Random f16 values on the GPU over ``modes`` (extents ``ext``), the first mode stride-1 as in TCCG."""
    shape = [ext[x] for x in modes]
    return cp.asarray(random_values(rng, int(np.prod(shape)), "f16").reshape(shape[::-1]).astype(np.float16)).transpose()


@pytest.mark.parametrize("a_modes,b_modes", [("mk", "kn"), ("km", "nk"), ("mk", "nk"), ("km", "kn")])
@pytest.mark.parametrize("tile,split", [((128, 256), 1), ((128, 240), 1), ((128, 128), 1), ((64, 192), 3),
                                        ((192, 216), 1), ((192, 192), 2)])
def test_tma_loads_every_operand_direction(a_modes, b_modes, tile, split):
    """Warp-specialised wgmma kernels whose producer loads both operands through the TMA: K- and MN-major
    boxes, M (296), N (272) and K (1000) past the last tile (zero-filled boxes), split K, operands at 16-byte but not
    256-byte aligned addresses, and a second pair of buffers (tensor maps are encoded per address). 192 rows:
    three math warpgroups with the producer's registers, their wgmma issued in parts of 128 columns. An
    N-major B of 240 or 216 columns: four 64-column atoms loaded, the last read in part."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("TMA and wgmma need an sm_90 GPU")
    from gett.config import KernelConfig
    rng = np.random.default_rng(21)
    ext = {"m": 296, "n": 272, "k": 1000}
    config = KernelConfig("wgmma", *tile, 64, 4, split_k=split, ws=True)
    plan = None
    for offset in (8, 0):   # elements before the operands' first: 16 bytes, then none
        a = random_values(rng, 296 * 1000, "f16").reshape([ext[c] for c in a_modes])
        b = random_values(rng, 272 * 1000, "f16").reshape([ext[c] for c in b_modes])
        A = cp.asarray(np.concatenate([np.ones(offset), a.ravel()]).astype(np.float16))[offset:].reshape(a.shape)
        B = cp.asarray(np.concatenate([np.ones(offset), b.ravel()]).astype(np.float16))[offset:].reshape(b.shape)
        D = cp.full((296, 272), np.nan, dtype=cp.float32)
        plan = plan or gett.plan_contraction(A, a_modes, B, b_modes, D, "mn", config=config)
        assert plan.kernel().config == config and plan.kernel().tma is not None
        gett.contract(plan, 1.5, A, B, 0.0, D)
        expect = 1.5 * np.einsum(f"{a_modes},{b_modes}->mn", cp.asnumpy(A).astype(np.float64),
                                 cp.asnumpy(B).astype(np.float64))
        assert_close(cp.asnumpy(D), expect)


@pytest.mark.parametrize("c_layout", ["like D", "transposed", "in place"])
@pytest.mark.parametrize("batch,rows", [(1, 128), (1, 192), (3, 128)])
def test_warp_specialised_kernels_read_c(c_layout, batch, rows):
    """beta != 0 in warp-specialised kernels, whose producer warpgroup asks L2 for C's part of the tile
    once its loads are out: through the TMA (one batch; with 192 rows on the registers the math
    warpgroups leave it) or cp.async (three batches), C laid out like D, transposed (its own offsets) or D
    itself, M (296) and N (272) past the last tile."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import KernelConfig
    rng = np.random.default_rng(23)
    A = cp.asarray(random_values(rng, batch * 296 * 1000, "f16").reshape(batch, 296, 1000).astype(np.float16))
    B = cp.asarray(random_values(rng, batch * 1000 * 272, "f16").reshape(batch, 1000, 272).astype(np.float16))
    c = random_values(rng, batch * 296 * 272, "f16").reshape(batch, 296, 272).astype(np.float16)
    C = cp.asarray(c) if c_layout != "transposed" else cp.asarray(c.transpose(0, 2, 1).copy()).transpose(0, 2, 1)
    D = C if c_layout == "in place" else cp.full((batch, 296, 272), np.nan, dtype=cp.float16)
    config = KernelConfig("wgmma", rows, 128 if batch > 1 else 192 if rows == 192 else 256, 64, 4, ws=True)
    plan = gett.plan_contraction(A, "lmk", B, "lkn", C, "lmn", D=D, beta=0.5, config=config)
    assert plan.kernel().config == config and (plan.kernel().tma is not None) == (batch == 1)
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    expect = 1.5 * np.einsum("lmk,lkn->lmn", cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64))
    expect += 0.5 * c.astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect)


# (rows, columns, stages, batch, swap): CTAs over several tiles with a producer warpgroup; 5 K tiles a tile
# (K = 296, the last partial), so the stages' phases shift from tile to tile
PERSISTENT_WS_TILES = [
    (128, 128, 4, 1, False),   # TMA loads, three K tiles of the next tile loaded during an epilogue
    (128, 128, 3, 3, False),   # cp.async loads (three batches), tiles of every batch in one CTA
    (128, 256, 3, 1, False),   # TMA, a wide tile
    (192, 192, 3, 1, False),   # TMA, three math warpgroups with the producer's registers
    (128, 72, 3, 1, True),     # swapped: M (72) is the instruction's width
]


@pytest.mark.parametrize("rows,cols,stages,batch,swap", PERSISTENT_WS_TILES,
                         ids=[f"{t[0]}x{t[1]}-s{t[2]}-l{t[3]}{'-swap' if t[4] else ''}" for t in PERSISTENT_WS_TILES])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_persistent_warp_specialised_kernels(rows, cols, stages, batch, swap, beta):
    """A producer warpgroup over several tiles (KernelConfig.persistent with ws, kernels/gett.cuh
    run_tiles_ws): the producer's loads and the MMAs run through the stages as one sequence of K tiles
    across the CTA's tiles, the epilogue in shared memory of its own; with beta != 0 the producer asks
    for each tile's C. M, N and K past their last tiles, a grid smaller than the tiles, a NaN-poisoned D,
    against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import KernelConfig, output_tiles
    from gett.launch import launcher
    rng = np.random.default_rng(24)
    m, n, k = (72, 60000, 296) if swap else (4000 // batch, 2096, 296)
    A = cp.asarray(random_values(rng, batch * m * k, "f16").reshape(batch, m, k).astype(np.float16))
    B = cp.asarray(random_values(rng, batch * k * n, "f16").reshape(batch, k, n).astype(np.float16))
    c = random_values(rng, batch * m * n, "f16").reshape(batch, m, n).astype(np.float16)
    C, D = cp.asarray(c), cp.full((batch, m, n), np.nan, dtype=cp.float16)
    bm, bn = (cols, rows) if swap else (rows, cols)
    config = KernelConfig("wgmma", bm, bn, 64, stages, ws=True, swap=swap, persistent=True)
    plan = gett.plan_contraction(A, "lmk", B, "lkn", C, "lmn", D=D, beta=beta, config=config)
    assert plan.kernel().config == config and (plan.kernel().tma is not None) == (batch == 1)
    grid = launcher(plan, cp.cuda.Device().id, "cupy")._grid[0]
    assert grid < output_tiles(plan, config) / 1.5, f"{grid} CTAs for {output_tiles(plan, config)} tiles"
    gett.contract(plan, 1.5, A, B, beta, C, D)
    expect = 1.5 * np.einsum("lmk,lkn->lmn", cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64))
    expect += beta * c.astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect)


def assert_matches_einsum(spec, A, B, c, D, alpha, beta):
    """D (a NaN-poisoned output, on the GPU) against alpha * einsum(spec, A, B) + beta * c in float64: every
    element written, relative error under 2e-3 (f16 data)."""
    expect = alpha * np.einsum(spec, cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64))
    expect += beta * c.astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect)


# (A, B, D as (modes, extents), split): 128 x 296 tiles, whose math warpgroups take the TMA producer's registers
# (a producer over several tiles would not fit its epilogue tile too)
WIDE_CASES = [
    # TCCG #13's pattern: K = (d, c) merging in neither operand, loaded as 3-D boxes, d = 312 padded to 5 K tiles a
    # run; M past its last tile, N = 300 in two column tiles
    (("acd", (200, 7, 312)), ("dbc", (312, 300, 7)), ("ab", (200, 300)), 2),
    # K's first mode a whole number of tiles (d = 128): no padding, still 3-D boxes (strides of whole 16 bytes:
    # a = 136)
    (("acd", (136, 5, 128)), ("dbc", (128, 296, 5)), ("ab", (136, 296)), 1),
    # a plain GEMM (M-major A, K-major B): 2-D boxes, B's 296 rows in two of 152
    (("mk", (304, 1000)), ("kn", (1000, 296)), ("mn", (304, 296)), 1),
]


@pytest.mark.parametrize("a,b,d,split", WIDE_CASES, ids=["k-run-padded", "k-run-whole", "plain"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_wide_tiles_load_k_of_two_modes_through_the_tma(a, b, d, split, beta):
    """128 x 296 wgmma tiles (KernelConfig.shares_registers, gett.tma.k_run): two math warpgroups with 148
    accumulators a thread, B's tile issued as 224 + 72 columns; K of two modes loaded as 3-D TMA boxes,
    each run of K's first mode padded with zeros to whole tiles; split K; a NaN-poisoned D, beta != 0,
    against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import KernelConfig
    rng = np.random.default_rng(31)
    (ma, sa), (mb, sb), (md, sd) = a, b, d
    A, B = (column_major_f16(rng, m, dict(zip(m, sh))) for m, sh in ((ma, sa), (mb, sb)))
    c = random_values(rng, math.prod(sd), "f16").reshape(sd).astype(np.float16)
    C, D = cp.asarray(c), cp.full(sd, np.nan, dtype=cp.float16)
    config = KernelConfig("wgmma", 128, 296, 64, 4, split_k=split, ws=True)
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=beta, config=config)
    assert plan.kernel().config == config and plan.kernel().tma is not None
    gett.contract(plan, 1.5, A, B, beta, C, D)
    assert_matches_einsum(f"{ma},{mb}->{md}", A, B, c, D, 1.5, beta)


def f16_operands(rng, a_shape, b_shape, d_shape) -> tuple:
    """Random C-order f16 A and B on the GPU, C's values on the host and the GPU, and a NaN-poisoned D."""
    A, B = (cp.asarray(random_values(rng, math.prod(s), "f16").reshape(s).astype(np.float16))
            for s in (a_shape, b_shape))
    c = random_values(rng, math.prod(d_shape), "f16").reshape(d_shape).astype(np.float16)
    return A, B, c, cp.asarray(c), cp.full(d_shape, np.nan, dtype=cp.float16)


# (A, B, D as (modes, extents), tile, stages, resident operand, TMA): producers over several tiles whose A or B
# tile stays resident
RESIDENT_CASES = [
    # TCCG #15's pattern at a smaller M: K-major B, 2 column tiles, K = 312 (5 K tiles, the last partial), TMA,
    # D M-fast (the epilogue's transposed 8 x 8 blocks)
    (("mk", (20000, 312)), ("nk", (296, 312)), ("nm", (296, 20000)), (128, 160), 4, "b", True),
    # #18's: A's M modes (a, c) not one stride (a = 100: tiles cross c), an N-major B, 192 wide, cp.async
    (("cka", (205, 296, 100)), ("kn", (296, 312)), ("can", (205, 100, 312)), (128, 192), 3, "b", False),
    # 5 column tiles (130 CTAs), K = 200 (the last K tile 8 deep), M past its last tile
    (("mk", (6000, 200)), ("nk", (600, 200)), ("mn", (6000, 600)), (128, 128), 4, "b", True),
    # #16's: A resident (M = 312: 3 row tiles, M-major), N's modes (b, c) not one stride, cp.async
    (("km", (296, 312)), ("ckb", (205, 296, 100)), ("cbm", (205, 100, 312)), (128, 192), 3, "a", False),
    # A resident, K-major A, N-major B, TMA; N past its last tile
    (("mk", (300, 200)), ("kn", (200, 30000)), ("mn", (300, 30000)), (128, 128), 4, "a", True),
]


@pytest.mark.parametrize("a,b,d,tile,stages,resident,tma", RESIDENT_CASES,
                         ids=["b-k-major-tma", "b-n-major-async", "b-5-columns", "a-async", "a-tma"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_producers_keep_a_resident_tile(a, b, d, tile, stages, resident, tma, beta):
    """A resident A or B tile (KernelConfig.resident, kernels/gett.cuh): a CTA's tiles share one row or
    column, its first tile loads the resident operand's tile for all of K next to the other's K tiles, the
    later tiles only the other's; the host launches whole columns (rows) of row (column) tiles. M, N and K
    past their last tiles, a grid smaller than the tiles, beta != 0, a NaN-poisoned D, against numpy in
    float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import KernelConfig, output_tiles
    from gett.launch import launcher
    (ma, sa), (mb, sb), (md, sd) = a, b, d
    A, B, c, C, D = f16_operands(np.random.default_rng(26), sa, sb, sd)
    config = KernelConfig("wgmma", *tile, 64, stages, ws=True, persistent=True, resident=resident)
    # staging=False: the unaligned cases test cp.async loads of their own layouts, not copies into padded runs
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=beta, config=config, staging=False)
    assert plan.kernel().config == config and (plan.kernel().tma is not None) == tma
    line = -(-plan.n // tile[1]) if resident == "b" else -(-plan.m // tile[0])
    grid = launcher(plan, cp.cuda.Device().id, "cupy")._grid[0]
    assert grid % line == 0 and grid < output_tiles(plan, config) / 1.5, (grid, line)
    gett.contract(plan, 1.5, A, B, beta, C, D)
    assert_matches_einsum(f"{ma},{mb}->{md}", A, B, c, D, 1.5, beta)


# (A, B, D as (modes, extents), tile, stages, resident operand): math warpgroups taking tiles in turn
TURN_CASES = [
    # #15's pattern: TMA, B resident, 160 columns (160 accumulators a thread: the producer's registers), D M-fast
    (("mk", (20000, 312)), ("nk", (296, 312)), ("nm", (296, 20000)), (128, 160), 5, "b"),
    # #16's: A resident, cp.async (N's modes b, c not one stride), 128 columns
    (("km", (296, 312)), ("ckb", (205, 296, 100)), ("cbm", (205, 100, 312)), (128, 128), 5, "a"),
    # #18's: A's rows cross c (a = 100), so cp.async, whose producer hands the math warpgroups its registers for
    # 160 columns; B resident, D M-fast
    (("cka", (205, 296, 100)), ("nk", (312, 296)), ("cna", (205, 312, 100)), (128, 160), 5, "b"),
    # #16's exchanged plan: the same, but D N-fast (the epilogue walks N, 312 in two 160-wide column tiles)
    (("ckb", (205, 296, 100)), ("nk", (312, 296)), ("cbn", (205, 100, 312)), (128, 160), 5, "b"),
    # no resident tile, D N-fast (column pairs), M and N past their last tiles, 2 or 3 tiles a CTA
    (("mk", (5000, 200)), ("kn", (200, 1000)), ("mn", (5000, 1000)), (128, 128), 4, ""),
    # fewer tiles than CTAs: no CTA's second warpgroup has a tile
    (("mk", (1000, 96)), ("kn", (96, 700)), ("mn", (1000, 700)), (128, 96), 4, ""),
]


@pytest.mark.parametrize("a,b,d,tile,stages,resident", TURN_CASES,
                         ids=["b-resident-tma", "a-resident-async", "b-resident-async", "b-resident-n-fast", "odd-tiles",
                              "few-tiles"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_math_warpgroups_take_tiles_in_turn(a, b, d, tile, stages, resident, beta):
    """Math warpgroups that take a CTA's tiles in turn (KernelConfig.pingpong, kernels/gett.cuh): each holds
    a whole 128-row tile; they take the stages and the one epilogue tile by turns. A CTA's odd tile count, CTAs
    whose second warpgroup has no tile, beta != 0 (C read into the shared epilogue tile), M, N and K past
    their last tiles, a NaN-poisoned D, against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import KernelConfig
    (ma, sa), (mb, sb), (md, sd) = a, b, d
    A, B, c, C, D = f16_operands(np.random.default_rng(38), sa, sb, sd)
    config = KernelConfig("wgmma", *tile, 64, stages, ws=True, persistent=True, resident=resident, pingpong=True)
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=beta, config=config)
    assert plan.kernel().config == config
    gett.contract(plan, 1.5, A, B, beta, C, D)
    assert_matches_einsum(f"{ma},{mb}->{md}", A, B, c, D, 1.5, beta)


# (A, B, D as (modes, extents; C order), configuration): A's rows of two modes (a, c) that do not merge, a = 312
# or 192 (whole 64-row boxes), loaded through the TMA a box of 64 rows of a per index of c (gett.tma.m_run)
def _row_run_configs():
    from gett.config import KernelConfig
    turn = KernelConfig("wgmma", 128, 160, 64, 5, ws=True, persistent=True, resident="b", pingpong=True)
    return {"turn": turn, "tile": KernelConfig("wgmma", 128, 128, 64, 4, ws=True),
            "192": KernelConfig("wgmma", 192, 128, 64, 3, ws=True),
            "persistent": KernelConfig("wgmma", 128, 128, 64, 4, ws=True, persistent=True)}


ROW_RUN_CASES = [
    # #18's pattern: 7 runs of 312 rows padded to 320 (the last tile past the last run), K = 296 (the last K
    # tile 40 deep), N = 200 in 160 + 40 columns, B resident, tiles in turn
    (("cka", (7, 296, 312)), ("nk", (200, 296)), ("cna", (7, 200, 312)), "turn"),
    # #16's exchanged plan: D N-fast, the rows of a tile the slow side of the walk (rows of whole runs of a)
    (("cka", (7, 296, 312)), ("nk", (200, 296)), ("can", (7, 312, 200)), "turn"),
    # one tile a CTA, and CTAs over several tiles without a resident operand; K = 64 (one tile), an N-major B
    (("cka", (9, 64, 312)), ("kn", (64, 296)), ("cna", (9, 296, 312)), "tile"),
    (("cka", (9, 64, 312)), ("kn", (64, 296)), ("can", (9, 312, 296)), "persistent"),
    # 192-row tiles (three boxes: 7 runs of 192 rows, the last tile a run's), a = 192 with no padding
    (("cka", (7, 104, 192)), ("nk", (136, 104)), ("cna", (7, 136, 192)), "192"),
]


@pytest.mark.parametrize("a,b,d,config", ROW_RUN_CASES, ids=["m-fast-turn", "n-fast-turn", "tile", "persistent", "192"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_row_tiles_in_runs_of_the_first_mode(a, b, d, config, beta):
    """A's rows of two modes (a, c) that do not merge in A, loaded through the TMA as a 3-D view whose 64-row
    boxes each lie inside one run of a (gett.tma.m_run, kernels/gett.cuh M_RUN): each run padded with zeros
    to whole boxes (a tile can hold the end of one run and the start of the next), the padding's rows
    neither stored nor their C read; D M- and N-fast, tiles in turn, one tile a CTA, CTAs over several tiles,
    192-row tiles, beta != 0, a NaN-poisoned D, against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import row_tiles
    from gett.tma import m_run
    (ma, sa), (mb, sb), (md, sd) = a, b, d
    A, B, c, C, D = f16_operands(np.random.default_rng(63), sa, sb, sd)
    config = _row_run_configs()[config]
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=beta, config=config)
    kernel = plan.kernel()
    assert kernel.config == config and kernel.tma is not None and kernel.tma[0].row_outer_stride > 0
    run = sa[2]
    assert m_run(plan, config) == run and row_tiles(plan, config) == -(-(-(-run // 64) * 64 * sa[0]) // config.bm)
    gett.contract(plan, 1.5, A, B, beta, C, D)
    assert_matches_einsum(f"{ma},{mb}->{md}", A, B, c, D, 1.5, beta)


def _tall(rows, stages, warp_rows):
    from gett.config import KernelConfig
    return KernelConfig("mma16", rows, 32, 32, stages, wm=warp_rows, wn=32, persistent=True)


# (A, B, D as (modes, extents; C order), the heuristic's configuration on sm_90): N <= 32 with a long M (tall
# tiles over several tiles a CTA), N short of 128 (a producer tile as wide as N rounded up to 16)
HEURISTIC_CASES = [
    # TCCG #6's pattern at a 16th of its M: A's tile a box of M's modes; K = 40 in two 32-deep tiles, N = 20
    (("dabfe", (16, 24, 16, 40, 24)), ("fc", (40, 20)), ("edcba", (24, 16, 20, 16, 24)), _tall(768, 2, 64)),
    # #7's: K = 48 (two K tiles), N = 24
    (("afbce", (24, 48, 16, 16, 24)), ("df", (24, 48)), ("edcba", (24, 24, 16, 16, 24)), _tall(768, 2, 64)),
    # A K-major, copied by cp.async over 7 K tiles (K = 200: the last 8 deep); M past its last tile
    (("mk", (70001, 200)), ("kn", (200, 24)), ("mn", (70001, 24)), _tall(384, 3, 32)),
    # M of two modes, K = 100
    (("abk", (301, 233, 100)), ("kn", (100, 24)), ("abn", (301, 233, 24)), _tall(384, 3, 32)),
    # #19's pattern (N = 72: 80 wide; 128-row tiles would split K, so 64 rows, 8 stages), smaller: M past its last
    # tile, K = 1500 (the last K tile 28 deep)
    (("ceda", (40, 30, 50, 70)), ("dbe", (50, 72, 30)), ("cba", (40, 72, 70)), None),
]


@pytest.mark.parametrize("a,b,d,expected", HEURISTIC_CASES,
                         ids=["tccg6", "tccg7", "k-major", "two-modes", "tccg19"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_the_heuristics_tiles_for_skinny_and_narrow_n(a, b, d, expected, beta):
    """The heuristic's tiles for N <= 32 with a long M (config._skinny_persistent_tile: 768 or 384 rows by 32
    over several tiles a CTA) and for N short of 128 (a wgmma producer tile 80 wide for N = 72, 64 rows), as
    planned without a configuration for beta = 0 (a plan reading C keeps the shorter tall tile: the same tile
    asked for); M and K past their last tiles, a NaN-poisoned D, against numpy in float64."""
    from gett.config import KernelConfig
    if expected is None:
        expected = KernelConfig("wgmma", 64, 80, 64, 8, ws=True)
    (ma, sa), (mb, sb), (md, sd) = a, b, d
    A, B, c, C, D = f16_operands(np.random.default_rng(39), sa, sb, sd)
    on_hopper = cp.cuda.Device().compute_capability == "90"
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=beta,
                                 config=expected if beta and on_hopper else None)
    if on_hopper:   # (elsewhere the plan database and the arch may differ)
        assert plan.kernel().config == expected
    gett.contract(plan, 1.5, A, B, beta, C, D)
    assert_matches_einsum(f"{ma},{mb}->{md}", A, B, c, D, 1.5, beta)


@pytest.mark.parametrize("config", [
    {"math": "wgmma", "bm": 128, "bn": 128, "bk": 64, "stages": 3},
    {"math": "wgmma", "bm": 64, "bn": 160, "bk": 64, "stages": 4},
    {"math": "wgmma", "bm": 128, "bn": 192, "bk": 64, "stages": 4, "ws": True, "persistent": True},
    {"math": "mma16", "bm": 192, "bn": 128, "bk": 32, "stages": 3, "wm": 64, "wn": 32},
    {"math": "mma16", "bm": 128, "bn": 64, "bk": 32, "stages": 4, "wm": 64, "wn": 32},
], ids=["128x128", "64x160", "128x192-ws-p", "mma16-192x128", "mma16-128x64"])
@pytest.mark.parametrize("d_modes", ["nm", "mn"])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_accumulators_reach_the_epilogue_tile_as_8x8_blocks(config, d_modes, beta):
    """16-bit D in a plain walk whose stride-1 mode is M's ("nm"): wgmma's and mma.sync's accumulators go to
    the epilogue tile as transposed 8 x 8 blocks, four a stmatrix (Gett::kMatrixStores; with beta != 0 one at
    a time); where it is N's ("mn"), in column pairs. M and N past their last tiles, a NaN-poisoned D,
    against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("stmatrix (and wgmma) need an sm_90 GPU")
    from gett.config import KernelConfig
    rng = np.random.default_rng(27)
    m, n, k = 1000, 300, 200
    A = cp.asarray(random_values(rng, m * k, "f16").reshape(k, m).astype(np.float16))   # M-major
    B = cp.asarray(random_values(rng, k * n, "f16").reshape(n, k).astype(np.float16))   # K-major
    shape = (n, m) if d_modes == "nm" else (m, n)
    c = random_values(rng, m * n, "f16").reshape(shape).astype(np.float16)
    C, D = cp.asarray(c), cp.full(shape, np.nan, dtype=cp.float16)
    cfg = KernelConfig(**config)
    plan = gett.plan_contraction(A, "km", B, "nk", C, d_modes, D=D, beta=beta, config=cfg)
    assert plan.kernel().config == cfg
    gett.contract(plan, 1.5, A, B, beta, C, D)
    assert_matches_einsum(f"km,nk->{d_modes}", A, B, c, D, 1.5, beta)


@pytest.mark.parametrize("shift", [0.125, 0.0])
def test_a_persistent_producer_applies_ops_once_a_stage_lands(shift):
    """Ops on A and B in a producer over several tiles, beta != 0 into a NaN-poisoned D, against numpy in
    float64: leaky ReLU (0.01) on A, leaky ReLU (0.5) plus ``shift`` on B. With op_b(0) != 0 the producer
    copies by cp.async and applies the ops to each stage once it lands (LANDING tiles behind its copies),
    draining at every tile's end; with ops that keep 0 it loads by TMA and the math warpgroups apply them
    to each landed stage (kOpsOnLanded)."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("warp-specialised wgmma kernels need an sm_90 GPU")
    from gett.config import KernelConfig
    rng = np.random.default_rng(25)
    m, n, k = 4000, 2096, 296
    A = cp.asarray(random_values(rng, m * k, "f16").reshape(m, k).astype(np.float16))
    B = cp.asarray(random_values(rng, k * n, "f16").reshape(k, n).astype(np.float16))
    c = random_values(rng, m * n, "f16").reshape(m, n).astype(np.float16)
    C, D = cp.asarray(c), cp.full((m, n), np.nan, dtype=cp.float16)
    config = KernelConfig("wgmma", 128, 192, 64, 4, ws=True, persistent=True)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D, beta=0.5, config=config,
                                 op_a=lambda x: x if x > 0 else 0.01 * x,
                                 op_b=lambda x, s=shift: (x if x > 0 else 0.5 * x) + s)
    assert plan.kernel().config == config and (plan.kernel().tma is None) == (shift != 0)
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    a, b = cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64)
    expect = 1.5 * np.where(a > 0, a, 0.01 * a) @ (np.where(b > 0, b, 0.5 * b) + shift) + 0.5 * c.astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect)


# (config, semiring): SIMT kernels whose producer warpgroup loads (KernelConfig.ws on the simt path)
SIMT_PRODUCER_CASES = [
    ({"bm": 128, "bn": 128, "bk": 24, "stages": 4, "tm": 8, "tn": 8, "persistent": True}, False),   # f32 #31-48's tile, K = 20
    ({"bm": 128, "bn": 128, "bk": 8, "stages": 3, "tm": 8, "tn": 8, "persistent": True}, False),    # 3 K tiles a tile, the last partial
    ({"bm": 128, "bn": 64, "bk": 8, "stages": 3, "tm": 8, "tn": 4, "persistent": True}, True),      # max-plus: K's padding masked
    ({"bm": 64, "bn": 64, "bk": 16, "stages": 3, "tm": 4, "tn": 4, "split_k": 3}, False),           # split K, one tile a CTA
    ({"bm": 96, "bn": 128, "bk": 8, "stages": 4, "tm": 6, "tn": 8, "persistent": True, "lanes_m": True}, True),  # lanes along M
]


@pytest.mark.parametrize("shape,max_plus", SIMT_PRODUCER_CASES,
                         ids=[f"{c['bm']}x{c['bn']}x{c['bk']}-s{c['stages']}{'-p' if c.get('persistent') else ''}"
                              f"{'-k' + str(c['split_k']) if c.get('split_k') else ''}{'-lm' if c.get('lanes_m') else ''}"
                              f"{'-maxplus' if m else ''}"
                              for c, m in SIMT_PRODUCER_CASES])
def test_simt_kernels_with_a_producer_warpgroup(shape, max_plus):
    """SIMT math fed by a producer warpgroup (kernels/gett.cuh consume: each warp releases a stage once
    its products on it are done), over several tiles a CTA or with split K; f32, M and N past their last
    tiles, K past its last tile (masked for a custom semiring), beta != 0 into a NaN-poisoned D, against
    numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("measured and tested on sm_90")
    from gett.config import KernelConfig, output_tiles
    from gett.launch import launcher
    rng = np.random.default_rng(26)
    m, n, k = (300, 200, 700) if shape.get("split_k") else (3000, 2500, 20 if shape["bk"] == 24 else 20 + 2 * shape["bk"])
    a, b = rng.uniform(-2, 2, (m, k)), rng.uniform(-2, 2, (k, n))
    c = rng.uniform(-2, 2, (m, n))
    A, B, C = (cp.asarray(x.astype(np.float32)) for x in (a, b, c))
    D = cp.full((m, n), np.nan, dtype=np.float32)
    config = KernelConfig("simt", **shape, ws=True)
    semiring = {"op_ab": lambda x, y: x + y, "reduce": (lambda x, y: max(x, y), -np.inf)} if max_plus else {}
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D, beta=0.5, config=config, **semiring)
    assert plan.kernel().config == config and plan.kernel().threads == config.math_threads + 128
    if config.persistent:
        grid = launcher(plan, cp.cuda.Device().id, "cupy")._grid[0]
        assert grid < output_tiles(plan, config) / 1.5, f"{grid} CTAs for {output_tiles(plan, config)} tiles"
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    a, b, c = (cp.asnumpy(x).astype(np.float64) for x in (A, B, C))
    product = np.max(a[:, :, None] + b[None, :, :], axis=1) if max_plus else a @ b
    np.testing.assert_allclose(cp.asnumpy(D), 1.5 * product + 0.5 * c, rtol=1e-5, atol=1e-4)


def tccg_f32_arrays(subscripts, extents, rng):
    """A, B, C (uniform in [-2, 2]) and a NaN-poisoned D of ``subscripts`` over modes a-g of ``extents``,
    f32, column-major (the first mode stride-1, as TCCG), and the three mode strings."""
    ext = dict(zip("abcdefg", extents))
    (ma, mb), md = subscripts.split("->")[0].split(","), subscripts.split("->")[1]

    def tensor(modes, fill=None):
        shape = [ext[x] for x in modes]
        x = rng.uniform(-2, 2, shape[::-1]) if fill is None else np.full(shape[::-1], fill)
        return cp.asarray(x.astype(np.float32)).transpose()
    return tensor(ma), tensor(mb), tensor(md), tensor(md, np.nan), (ma, mb, md)


@pytest.mark.parametrize("subscripts,tile,stages,lanes_m", [
    ("degc,gfab->abcdef", (128, 128, 8, 8), 3, False),   # TCCG #33: D's stride-1 modes a, b in N
    ("dega,gfbc->abcdef", (96, 128, 12, 4), 3, False),   # #31: a in M, boxes of 24 x 4
    ("gdbc,efga->abcdef", (128, 96, 4, 12), 3, False),   # #42: a in N, boxes of 24 x 4
    ("gdab,efgc->abcdef", (128, 128, 8, 8), 4, True),    # #40: a, b in M, a warp's lanes along M
    ("gdac,efgb->abcdef", (96, 128, 6, 8), 4, True),     # #41: a in M, lanes along M, B staged
    ("geab,dfgc->abcdef", (128, 96, 8, 6), 4, True),     # #43: a, b in M, N's d in boxes of 24 x 4
    ("degb,gfac->abcdef", (128, 96, 8, 6), 4, False),    # #32: a in N, A staged
    ("ea,ebcd->abcd", (72, 128, 9, 4), 3, True),         # #9: M = 72 (a) in one tile, K = 40 (two K tiles)
    ("geac,dfgb->abcdef", (96, 128, 6, 8), 4, True),     # #44: D's six modes, e and f one dimension of the map
])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_a_simt_producer_stores_d_through_the_tma(subscripts, tile, stages, lanes_m, beta):
    """D's tile as one TMA box (gett.tma.store_box, kernels/gett.cuh epilogue_tma): f32, K = 24, TCCG
    #31-48's patterns at smaller extents, over several tiles a CTA, a warp's lanes along N or M. The plan
    is made for beta = 0 and run with beta = 0 (the TMA store) and 0.5 (the epilogue's walk reading C),
    into a NaN-poisoned D, against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("measured and tested on sm_90")
    from gett.config import KernelConfig
    extents = (72, 16, 8, 8, 40) if subscripts == "ea,ebcd->abcd" else (24, 16, 16, 24, 16, 8, 24)
    A, B, C, D, (ma, mb, md) = tccg_f32_arrays(subscripts, extents, np.random.default_rng(28))
    bm, bn, tm, tn = tile
    config = KernelConfig("simt", bm, bn, 24, stages, tm=tm, tn=tn, ws=True, persistent=True, lanes_m=lanes_m)
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=0.0, config=config)
    assert [v.tensor for v in plan.kernel().tma] == ["D"]
    gett.contract(plan, 1.5, A, B, beta, C, D)
    a, b, c = (cp.asnumpy(x).astype(np.float64) for x in (A, B, C))
    expect = 1.5 * np.einsum(subscripts, a, b, optimize=True) + beta * c
    np.testing.assert_allclose(cp.asnumpy(D), expect, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("subscripts,lanes_m", [
    ("degb,gfac->abcdef", False),   # TCCG #32 (A staged)
    ("gdac,efgb->abcdef", False),   # #41 (B staged)
    ("geac,dfgb->abcdef", True),    # #44 (B staged), a warp's lanes along M (D's stride-1 mode a)
])
def test_a_simt_producer_stages_a_box_operand_through_its_registers(subscripts, lanes_m):
    """f32 with K = 24 and D's stride-1 mode of 24 (TCCG #31-48 at smaller extents): box tiling leaves one
    operand in strided vectors, which the producer warpgroup loads into registers and stores into the
    stage before arriving (with its copies of the other operand); over several tiles a CTA, beta != 0,
    a NaN-poisoned D, against numpy in float64."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("measured and tested on sm_90")
    from gett.config import KernelConfig, _layouts, output_tiles
    from gett.launch import launcher
    A, B, C, D, (ma, mb, md) = tccg_f32_arrays(subscripts, (24, 16, 16, 24, 8, 8, 24), np.random.default_rng(27))
    config = KernelConfig("simt", 128, 128, 24, 3, tm=8, tn=8, ws=True, persistent=True, lanes_m=lanes_m)
    plan = gett.plan_contraction(A, ma, B, mb, C, md, D=D, beta=0.5, config=config)
    layouts = _layouts(plan, config)
    assert plan.kernel().config == config and [x.is_async for x in layouts].count(False) == 1
    grid = launcher(plan, cp.cuda.Device().id, "cupy")._grid[0]
    assert grid < output_tiles(plan, config) / 1.5, f"{grid} CTAs for {output_tiles(plan, config)} tiles"
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    a, b, c = (cp.asnumpy(x).astype(np.float64) for x in (A, B, C))
    np.testing.assert_allclose(cp.asnumpy(D), 1.5 * np.einsum(subscripts, a, b) + 0.5 * c, rtol=1e-5, atol=1e-4)


def test_tma_loads_staged_operands():
    """TCCG #20's pattern at a small size, both operands staged into dense copies that the TMA loads."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("TMA and wgmma need an sm_90 GPU")
    from gett.config import KernelConfig
    d, a, b = "abcd", "aebf", "dfce"   # TCCG #20
    ext = dict(zip("abcdef", (24, 16, 40, 24, 24, 40)))
    rng = np.random.default_rng(22)
    A, B = column_major_f16(rng, a, ext), column_major_f16(rng, b, ext)
    D = cp.full([ext[x] for x in d[::-1]], np.nan, dtype=cp.float16).transpose()
    plan = gett.plan_contraction(A, a, B, b, D, d, config=KernelConfig("wgmma", 128, 256, 64, 4, ws=True),
                                 staging=True)
    assert plan.staged_plan is not None and plan.kernel().tma is not None
    gett.contract(plan, 1.0, A, B, 0.0, D)
    expect = np.einsum(f"{a},{b}->{d}", cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64))
    assert_close(cp.asnumpy(D).astype(np.float64), expect, 4e-3)


@pytest.mark.parametrize("notation", ["abcd-eafb-fdec", "abcd-aebf-dfce", "abcd-eafd-fbec"])
def test_wgmma_box_tiled_tccg_shapes(notation):
    """TCCG #20/#28/#30 patterns at a small size: the K box of #28/#30 copies B's strided vectors as
    whole chunks and transposes 8 x 8 blocks in shared memory (by every thread, or with ws by the
    producer warpgroup alone)."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 GPU")
    from gett.config import KernelConfig
    d, a, b = notation.split("-")
    ext = dict(zip("abcdef", (24, 16, 40, 24, 24, 32)))
    rng = np.random.default_rng(15)
    A, B = column_major_f16(rng, a, ext), column_major_f16(rng, b, ext)
    D = cp.full([ext[x] for x in d[::-1]], np.nan, dtype=cp.float32).transpose()
    for tile, ws in itertools.product(((128, 128), (128, 256)), (False, True)):
        plan = gett.plan_contraction(A, a, B, b, D, d, config=KernelConfig("wgmma", *tile, 64, 3, ws=ws))
        gett.contract(plan, 1.0, A, B, 0.0, D)
        expect = np.einsum(f"{a},{b}->{d}", cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64))
        assert_close(cp.asnumpy(D), expect)
        D.fill(np.nan)


def check_epilogue(plan, subscripts, A, B, C, D):
    """Run ``plan`` with alpha = 1, beta = 0.5 (its op on C doubles C, so the C term is C itself) into a
    NaN-poisoned D and compare with numpy in float64."""
    gett.contract(plan, 1.0, A, B, 0.5, C, D)
    expect = np.einsum(subscripts, *(cp.asnumpy(x).astype(np.float64) for x in (A, B))) \
        + cp.asnumpy(C).astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect, 4e-3 if D.dtype == np.float16 else 2e-3)


def epilogue_args(source: str) -> dict:
    """The epilogue's template arguments of a generated kernel: walk box (tx, ty), vector width, and the
    crossing walk's run and cross."""
    args = re.search(r"using Kernel = gett::Gett<([^;]*)>;", source).group(1).split(", ")
    return {"m_fast": args[12] == "true", "tx": int(args[13]), "ty": int(args[14]), "vector": int(args[16]),
            "run": int(args[17]), "cross": int(args[18])}


@pytest.mark.parametrize("out", ["f16", "f32"])
@pytest.mark.parametrize("d_extent", [8, 5])
def test_epilogue_crossing_walk(out, d_extent):
    """TCCG #31's pattern, smaller: D's stride-1 mode (24) lies in M and continues contiguously in N, so
    the epilogue walks 24 rows, then 64 columns (b and c), then the next rows; with beta, an op on C,
    a partial N tile and (d = 5) a partial M tile; D poisoned with NaN."""
    ext = dict(zip("abcdefg", (24, 16, 4, d_extent, 3, 5, 24)))
    rng = np.random.default_rng(31)

    def tensor(modes, dtype):
        shape = [ext[x] for x in modes]
        x = random_values(rng, int(np.prod(shape)), "f16").reshape(shape[::-1]).astype(NUMPY_DTYPE[dtype])
        return cp.asarray(x).transpose()   # column-major: the first mode has stride 1
    A, B, C = tensor("dega", "f16"), tensor("gfbc", "f16"), tensor("abcdef", out)
    D = cp.full(C.shape[::-1], np.nan, dtype=C.dtype).transpose()
    plan = gett.plan_contraction(A, "dega", B, "gfbc", C, "abcdef", beta=0.5, op_c=lambda x: 2 * x)
    args = epilogue_args(plan.kernel().source)   # runs of 24 rows, then EPI_CROSS columns
    assert args["run"] == 24 and args["cross"] > 1
    check_epilogue(plan, "dega,gfbc->abcdef", A, B, C, D)


@pytest.mark.parametrize("out", ["f16", "f32"])
@pytest.mark.parametrize("c_layout", ["like_d", "other"])
def test_epilogue_box_walk(out, c_layout):
    """TCCG #3's pattern, smaller: A's stride-1 mode (d) and D's (a) both lie in M, so M is tiled in
    boxes and the epilogue walks each box along a; with C laid out like D it moves vectors along the
    box's second side, otherwise scalars. Beta, an op on C, a partial M tile (b = 5), D poisoned."""
    ext = dict(zip("abcde", (24, 5, 24, 16, 72)))   # K = 72: A outweighs D even in f32, so M follows A
    rng = np.random.default_rng(3)

    def tensor(modes, dtype, order=None):
        order = order or modes
        shape = [ext[x] for x in order]
        x = random_values(rng, int(np.prod(shape)), "f16").reshape(shape[::-1]).astype(NUMPY_DTYPE[dtype])
        x = cp.asarray(x).transpose()   # column-major in `order`: its first mode has stride 1
        return x.transpose([order.index(m) for m in modes])
    A, B = tensor("dbea", "f16"), tensor("ec", "f16")
    C = tensor("abcd", out, "abcd" if c_layout == "like_d" else "cdab")
    D = cp.full(C.shape[::-1], np.nan, dtype=C.dtype).transpose()
    plan = gett.plan_contraction(A, "dbea", B, "ec", C, "abcd", D=D, beta=0.5, op_c=lambda x: 2 * x)
    epi = epilogue_args(plan.kernel().source)
    assert epi["m_fast"] and epi["tx"] > 1
    assert (epi["vector"] > 1) == (c_layout == "like_d")
    check_epilogue(plan, "dbea,ec->abcd", A, B, C, D)


# The f32 SIMT tiles of config._memory_bound_simt_tile, on smaller TCCG patterns with partial tiles:
# (subscripts, extents of a..g, tile bm x bn x bk, stages, thread tile [, True: a warp's lanes along M],
# split-K, crossing epilogue walk)
SIMT_TILES = [
    ("ea,ebcd->abcd", (70, 9, 5, 7, 37), (72, 128, 8), 3, (9, 8), 1, False),   # #9: M = 70 in one 72-row tile
    ("ea,ebcd->abcd", (70, 9, 5, 7, 37), (72, 128, 40), 2, (9, 4), 1, False),   # #9 as tiled: all of K (37) in a stage
    ("adec,ebd->abc", (33, 70, 9, 50, 41), (128, 72, 8), 3, (8, 9), 4, False),   # #19: N = 70, split K
    ("dega,gfbc->abcdef", (24, 16, 4, 5, 3, 5, 24), (192, 64, 24), 2, (12, 4), 1, True),   # #31: crossing walk
    ("gdbc,efga->abcdef", (24, 16, 4, 5, 3, 5, 24), (64, 192, 24), 2, (4, 12), 1, True),   # #42: the transpose
    ("degc,gfab->abcdef", (24, 16, 4, 5, 3, 5, 24), (192, 64, 8), 3, (12, 4), 1, False),   # #33: 8 deep
    ("abd,dc->abc", (24, 7, 40, 20), (128, 64, 8), 3, (8, 4), 1, False),   # A and D M-major: runs of rows
    ("abd,dc->abc", (24, 7, 40, 20), (128, 64, 8), 3, (8, 4, True), 1, False),   # ... a warp's lanes along M
    ("degb,gfac->abcdef", (24, 16, 4, 5, 3, 5, 24), (128, 64, 8), 3, (8, 4, True), 1, False),   # #32, lanes along M
    ("efbad,cf->abcde", (40, 5, 21, 7, 36, 32), (384, 24, 8), 4, (12, 3), 1, False),  # #6: 16 x 16 M boxes
    ("dbea,ec->abcd", (72, 3, 21, 72, 40), (576, 24, 8), 4, (12, 3), 1, False),  # #3: 24 x 24 M boxes
    ("bda,dc->abc", (36, 40, 21, 300), (384, 24, 8), 4, (12, 3), 1, False),  # #1: 12 x 8 boxes, long K
]


@pytest.mark.parametrize("subscripts,extents,tile,stages,thread,split,crossing", SIMT_TILES,
                         ids=[t[0] + ("-lm" if t[4][2:] else "") for t in SIMT_TILES])
def test_memory_bound_simt_tiles(subscripts, extents, tile, stages, thread, split, crossing):
    """f32 data, exact f32: the SIMT tiles the heuristic picks for the memory-bound TCCG shapes (thread
    tiles of 8 to 12 rows, 3 to 12 columns; 192-wide tiles holding runs of 24; all of K in one stage; rows
    stored to the epilogue tile in runs where A and D are M-major) with partial tiles, beta and a
    NaN-poisoned D, against numpy in float64."""
    ext = dict(zip("abcdefg", extents))
    rng = np.random.default_rng(18)
    inputs, out = subscripts.split("->")

    def tensor(modes):
        shape = [ext[x] for x in modes]
        x = random_values(rng, int(np.prod(shape)), "f32").reshape(shape[::-1])
        return cp.asarray(x).transpose()   # column-major: the first mode has stride 1, as in TCCG
    (ma, mb), mc = inputs.split(","), out
    A, B, C = tensor(ma), tensor(mb), tensor(mc)
    D = cp.full(C.shape[::-1], np.nan, dtype=C.dtype).transpose()
    from gett.config import KernelConfig
    cfg = KernelConfig("simt", *tile, stages, tm=thread[0], tn=thread[1], split_k=split, lanes_m=thread[2:] == (True,))
    plan = gett.plan_contraction(A, ma, B, mb, C, mc, D=D, config=cfg)
    assert plan.kernel().config == cfg
    assert (epilogue_args(plan.kernel().source)["cross"] > 1) == crossing   # D's runs of 24 go on across N
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    expect = 1.5 * np.einsum(subscripts, *(cp.asnumpy(x).astype(np.float64) for x in (A, B))) \
        + 0.5 * cp.asnumpy(C).astype(np.float64)
    assert_close(cp.asnumpy(D).astype(np.float64), expect, 1e-5)


def test_a_k_major_a_with_k_of_72_takes_one_k_tile_of_80():
    """TCCG #5-like ``abcd-ebad-ce`` (A K-major, K = 72, N = 24, a long M): the heuristic's tall tile holds
    all of K in one tile of 80 (config._memory_bound_tile), the rows' last 8 positions zero-filled; beta != 0
    and a NaN-poisoned D, against numpy in float64."""
    rng = np.random.default_rng(29)
    ext = {"a": 72, "b": 20, "c": 24, "d": 72, "e": 72}

    def tensor(modes, fill=None):   # column-major (TCCG): values (float64), array (f16)
        shape = [ext[x] for x in modes]
        x = random_values(rng, int(np.prod(shape)), "f16").reshape(shape[::-1]) if fill is None \
            else np.full(shape[::-1], fill, np.float32)
        return x.astype(np.float16).astype(np.float64).transpose(), cp.asarray(x.astype(np.float16)).transpose()
    (a, A), (b, B), (c, C), (_, D) = tensor("ebad"), tensor("ce"), tensor("abcd"), tensor("abcd", np.nan)
    plan = gett.plan_contraction(A, "ebad", B, "ce", C, "abcd", D=D, beta=0.5)
    assert (plan.kernel().config.bm, plan.kernel().config.bk) == (256, 80)
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    expect = 1.5 * np.einsum("ebad,ce->abcd", a, b, optimize=True) + 0.5 * c
    assert_close(cp.asnumpy(D).astype(np.float64), expect)


# (subscripts, extents, (BM, BN, BK), stages, split): mma.sync tiles whose A tile is one TMA box of A
TMA_BOX_TILES = [
    ("efbad,cf->abcde", (48, 5, 24, 7, 32, 32), (256, 32, 32), 3, 1),    # #6: 16 x 16, K in one tile
    ("ecbfa,fd->abcde", (32, 3, 4, 21, 48, 40), (256, 32, 32), 3, 1),    # #7: K past its last tile, N = 21
    ("ecbfa,fd->abcde", (32, 3, 4, 21, 48, 48), (256, 32, 48), 3, 1),    # #7 as the heuristic tiles it: BK 48
    ("dbea,ec->abcd", (48, 3, 21, 24, 200), (576, 32, 32), 3, 1),        # #3: 24 x 24, 7 K tiles over 3 stages
    ("dbea,ec->abcd", (48, 3, 21, 24, 200), (576, 32, 32), 2, 3),        # the same over 3 CTAs of K
    ("aebfc,efd->abcd", (8, 32, 5, 40, 32, 3), (256, 32, 32), 3, 1),      # rows of 16 bytes, K of two modes
    ("aebfc,efd->abcd", (32, 8, 5, 40, 32, 3), (256, 64, 32), 3, 1),      # 64 bytes (64-byte swizzle)
    ("aebfc,efd->abcd", (64, 4, 5, 40, 64, 3), (256, 32, 64), 2, 1),      # 128 bytes, BK 64
]


@pytest.mark.parametrize("subscripts,extents,tile,stages,split", TMA_BOX_TILES,
                         ids=[f"{t[0]}-{t[2][0]}x{t[2][2]}-s{t[3]}-k{t[4]}" for t in TMA_BOX_TILES])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_tma_box_tiles(subscripts, extents, tile, stages, split, dtype):
    """mma.sync kernels whose A tile is one box of A loaded by the TMA (gett.tma.tile_box): the TCCG box
    tiles (16 x 16, 24 x 24 of two M modes), rows of 16 to 128 bytes (every swizzle), K past its last
    tile (zero-filled), the stage barriers' phases over several rounds, split K; beta != 0 and a NaN-
    poisoned D, against numpy in float64."""
    from gett.config import KernelConfig
    check_box_tile(subscripts, extents, KernelConfig("mma16", *tile, stages, wm=32, wn=32, split_k=split), dtype)


# (subscripts, extents, (BM, BN, BK), stages): box tiles of CTAs over several tiles, with M large enough
# that the grid (the CTAs the SMs hold at once) is smaller than the tiles
TMA_PERSISTENT_TILES = [
    ("efbad,cf->abcde", (48, 41, 24, 8, 32, 32), (256, 32, 32), 2),    # #6: K in one tile, 1968 tiles
    ("efbad,cf->abcde", (48, 41, 24, 8, 32, 32), (256, 32, 32), 3),    # the next two tiles in flight
    ("ecbfa,fd->abcde", (32, 30, 4, 21, 48, 40), (256, 32, 32), 3),    # #7: two K tiles, the last partial
    ("dbea,ec->abcd", (48, 200, 21, 24, 200), (576, 32, 32), 3),       # #3: 7 K tiles a tile, 400 tiles
    ("efbad,cf->abcde", (48, 41, 24, 8, 48, 32), (768, 32, 32), 2),    # #6's database tile: A's whole e (48 x 16 boxes)
    ("dbea,ec->abcd", (72, 30, 21, 72, 40), (576, 32, 32), 3),         # #3's 8 x 72 boxes: stores of 4 rows, 270 tiles
    ("ecbfa,fd->abcde", (48, 30, 4, 21, 48, 48), (768, 32, 32), 2, 64),  # #7's entry: warps of 64 rows, 16 x 48 boxes
]


@pytest.mark.parametrize("subscripts,extents,tile,stages,wm", [t + (32,) * (5 - len(t)) for t in TMA_PERSISTENT_TILES],
                         ids=[f"{t[0]}-{t[2][0]}x{t[2][2]}-s{t[3]}" + (f"-w{t[4]}" if len(t) > 4 else "")
                              for t in TMA_PERSISTENT_TILES])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_persistent_box_tiles(subscripts, extents, tile, stages, wm, dtype):
    """CTAs over several tiles (KernelConfig.persistent, kernels/gett.cuh run_tiles): one pipeline over
    the tiles' K tiles, the stage barriers' phases running on across tiles, the epilogue apart from the
    stages (warps of 32 rows, or 64: a lane's rows 16 apart then store in runs of 4); beta != 0 and a
    NaN-poisoned D, against numpy in float64."""
    from gett.config import KernelConfig
    cfg = KernelConfig("mma16", *tile, stages, wm=wm, wn=32, persistent=True)
    plan = check_box_tile(subscripts, extents, cfg, dtype)
    from gett.config import output_tiles
    from gett.launch import launcher
    grid = launcher(plan, cp.cuda.Device().id, "torch" if dtype == "bf16" else "cupy")._grid[0]
    assert grid < output_tiles(plan, cfg) / 1.5, f"{grid} CTAs for {output_tiles(plan, cfg)} tiles"


# (subscripts, extents, (BM, BN, BK), stages): CTAs over several tiles whose A tile is copied by cp.async
# (no TMA box), B's K tiles copied once
COPIED_PERSISTENT_TILES = [
    ("bda,dc->abc", (312, 312, 24, 100), (384, 32, 32), 3),            # #1: 12 x 8 boxes, 4 K tiles, the last partial
    ("ebad,ce->abcd", (72, 40, 24, 72, 72), (256, 32, 80), 2),         # #5: A K-major, K in one tile
    ("dca,bd->abc", (312, 24, 200, 312), (256, 32, 64), 3),            # #2: 5 K tiles
]


@pytest.mark.parametrize("subscripts,extents,tile,stages", COPIED_PERSISTENT_TILES,
                         ids=[f"{t[0]}-{t[2][0]}x{t[2][2]}-s{t[3]}" for t in COPIED_PERSISTENT_TILES])
@pytest.mark.parametrize("ops", [False, True], ids=["plain", "ops"])
def test_persistent_tiles_copied_asynchronously(subscripts, extents, tile, stages, ops):
    """CTAs over several tiles with A's tile copied by every thread (cp.async), its rows found again at
    each tile's first K tile, and B's K tiles copied once (kernels/gett.cuh run_tiles): beta != 0 and a
    NaN-poisoned D against numpy in float64; with an op on B, applied once, not once a tile (an op on A
    is refused there: test_codegen)."""
    from gett.config import KernelConfig, output_tiles
    from gett.launch import launcher
    cfg = KernelConfig("mma16", *tile, stages, wm=32, wn=32, persistent=True)
    kw = dict(op_b=lambda x: x if x > 0 else 0.5 * x, ref_b=lambda b: np.where(b > 0, b, 0.5 * b)) if ops else {}
    plan = check_box_tile(subscripts, extents, cfg, "f16", box=False, **kw)
    grid = launcher(plan, cp.cuda.Device().id, "cupy")._grid[0]
    assert grid < output_tiles(plan, cfg), f"{grid} CTAs for {output_tiles(plan, cfg)} tiles"


# (subscripts, extents, (BM, BN, BK), stages): box tiles of CTAs over several tiles whose A and B have an op
TMA_BOX_OP_TILES = [
    ("ecbfa,fd->abcde", (32, 30, 4, 21, 48, 40), (256, 32, 32), 3),   # #7: K past its last tile
    ("dbea,ec->abcd", (48, 200, 21, 24, 200), (576, 32, 32), 3),      # #3: 7 K tiles
]


@pytest.mark.parametrize("subscripts,extents,tile,stages", TMA_BOX_OP_TILES, ids=[t[0] for t in TMA_BOX_OP_TILES])
def test_box_tiles_apply_ops_once_a_stage_lands(subscripts, extents, tile, stages):
    """An op on A, log |x| (-inf at 0), applied in shared memory once a box stage has landed, and leaky
    ReLU on B: A's K past its end must stay 0 (the TMA's fill), or -inf times B's zeros makes NaN."""
    from gett.config import KernelConfig
    cfg = KernelConfig("mma16", *tile, stages, wm=32, wn=32, persistent=True)
    check_box_tile(subscripts, extents, cfg, "f16", op_a=lambda x: math.log(abs(x)),
                   op_b=lambda x: x if x > 0 else 0.01 * x,
                   ref_a=lambda a: np.log(np.abs(a)), ref_b=lambda b: np.where(b > 0, b, 0.01 * b))


def check_box_tile(subscripts, extents, cfg, dtype, op_a=None, op_b=None, ref_a=None, ref_b=None, box=True):
    """Contract random ``dtype`` tensors of ``extents`` (modes a, b, ... in order) under ``cfg``, whose A
    tile must be a TMA box (copied by cp.async: ``box`` False), with beta != 0 into a NaN-poisoned D, check
    against numpy in float64, and return the plan. ``op_a``/``op_b`` go to the plan, ``ref_a``/``ref_b``
    (numpy) to the oracle, and A's values then keep 0.5 or more away from 0."""
    if box and cp.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA needs an sm_90 GPU")
    torch = pytest.importorskip("torch") if dtype == "bf16" else None
    from gett.tma import TmaBox
    ext = dict(zip("abcdefg", extents))
    rng = np.random.default_rng(21)
    inputs, out = subscripts.split("->")
    (ma, mb), mc = inputs.split(","), out

    def tensor(modes, fill=None, away_from_zero=False):   # column-major (stride-1 first, as TCCG): values, array
        shape = [ext[x] for x in modes]
        x = random_values(rng, int(np.prod(shape)), "f32").reshape(shape[::-1]) if fill is None \
            else np.full(shape[::-1], fill, np.float32)
        if away_from_zero:
            x = np.sign(x) * (0.5 + 0.5 * np.abs(x)) + (x == 0)
        if torch is not None:
            t = torch.from_numpy(x).to("cuda", torch.bfloat16)
            return t.float().cpu().numpy().transpose(), t.permute(*range(len(shape) - 1, -1, -1))
        return x.astype(np.float16).astype(np.float64).transpose(), cp.asarray(x.astype(np.float16)).transpose()
    (a, A), (b, B), (c, C), (_, D) = tensor(ma, away_from_zero=op_a is not None), tensor(mb), tensor(mc), \
        tensor(mc, np.nan)
    plan = gett.plan_contraction(A, ma, B, mb, C, mc, D=D, config=cfg, op_a=op_a, op_b=op_b)
    kernel = plan.kernel()
    assert kernel.config == cfg and (isinstance(kernel.tma[0], TmaBox) and len(kernel.tma) == 1 if box
                                     else kernel.tma is None)
    gett.contract(plan, 1.5, A, B, 0.5, C, D)
    a, b = (f(x.astype(np.float64)) if f else x.astype(np.float64) for f, x in ((ref_a, a), (ref_b, b)))
    expect = 1.5 * np.einsum(subscripts, a, b, optimize=True) + 0.5 * c.astype(np.float64)
    got = (D.float().cpu().numpy() if torch is not None else cp.asnumpy(D)).astype(np.float64)
    assert_close(got, expect, 1e-2 if dtype == "bf16" else 2e-3)
    return plan


@pytest.mark.parametrize("order", ["C", "F"], ids=["d-n-fast", "d-m-fast"])
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64", "c64", "i32"])
def test_split_k_matches_numpy_and_is_deterministic(dtype, order):
    """A long K over a small output splits K across CTAs; partial sums are added in a fixed order. The
    partials run along D's stride-1 dimension, N or M (kernels/gett.cuh, reduce_splits)."""
    rng = np.random.default_rng(11)
    m, n, k = 45, 37, 6001
    A = cp.asarray(random_values(rng, m * k, dtype).reshape(k, m)).T          # strided: m-major view
    B = cp.asarray(random_values(rng, k * n, dtype).reshape(k, n))
    C = cp.asarray(random_values(rng, m * n, "f32" if dtype == "f16" else dtype).reshape(m, n), order=order)
    D1 = cp.full_like(C, np.nan if dtype[0] in "fc" else -1)
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D1)
    assert plan.kernel().config.split_k > 1
    gett.contract(plan, 2.0, A, B, 0.5 if dtype != "i32" else 3, C, D1)
    D2 = cp.full_like(C, np.nan if dtype[0] in "fc" else -1)
    gett.contract(plan, 2.0, A, B, 0.5 if dtype != "i32" else 3, C, D2)
    wide = np.int64 if dtype == "i32" else np.complex128 if dtype == "c64" else np.float64
    expect = 2 * cp.asnumpy(A).astype(wide) @ cp.asnumpy(B).astype(wide) + \
        (0.5 if dtype != "i32" else 3) * cp.asnumpy(C).astype(wide)
    got = cp.asnumpy(D1)
    if dtype == "i32":
        assert np.array_equal(got, expect.astype(np.int32))
    else:
        assert_close(got, expect, {"f16": 2e-3, "f32": 1e-5, "f64": 1e-12, "c64": 1e-5}[dtype])
    assert cp.array_equal(cp.ascontiguousarray(D1).view(cp.uint8), cp.ascontiguousarray(D2).view(cp.uint8))


def test_split_k_with_a_max_plus_semiring():
    rng = np.random.default_rng(12)
    A = cp.asarray(rng.uniform(-5, 5, (30, 5000)).astype(np.float32))
    B = cp.asarray(rng.uniform(-5, 5, (5000, 20)).astype(np.float32))
    D = cp.full((30, 20), np.nan, dtype=np.float32)
    plan = gett.plan_contraction(A, "mk", B, "kn", D, "mn", op_ab=lambda a, b: a + b,
                                 reduce=(lambda x, y: max(x, y), -np.inf))
    assert plan.kernel().config.split_k > 1
    gett.contract(plan, 1.0, A, B, 0.0, D)
    a, b = cp.asnumpy(A).astype(np.float64), cp.asnumpy(B).astype(np.float64)
    expect = np.max(a[:, :, None] + b[None, :, :], axis=1)
    np.testing.assert_allclose(cp.asnumpy(D), expect, rtol=1e-6)


def test_repeated_calls_still_check_their_arrays():
    """A call with arrays like an accepted one takes the short path; anything else is checked again."""
    rng = np.random.default_rng(13)
    A, B = cp.asarray(rng.standard_normal((20, 30))), cp.asarray(rng.standard_normal((30, 40)))
    C = cp.zeros((20, 40))
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    for _ in range(3):
        D = cp.full((20, 40), cp.nan)
        gett.contract(plan, 1.0, A, B, 0.0, C, D)
        np.testing.assert_allclose(cp.asnumpy(D), cp.asnumpy(A) @ cp.asnumpy(B), rtol=1e-12)
    with pytest.raises(gett.PlanMismatchError, match="dtype"):
        gett.contract(plan, 1.0, A, B, 0.0, C, cp.zeros((20, 40), dtype=cp.float32))
    with pytest.raises(gett.PlanMismatchError, match="strides"):
        gett.contract(plan, 1.0, A, B, 0.0, C, cp.zeros((20, 80))[:, ::2])
    with pytest.raises(gett.PlanMismatchError, match="shape"):
        gett.contract(plan, 1.0, A[:10], B, 0.0, C, cp.zeros((20, 40)))


@pytest.mark.parametrize("dtype,tol", [("f16", 2e-3), ("f32", 1e-5), ("f64", 1e-12)])
@pytest.mark.parametrize("m,n", [(40, 48), (41, 39)], ids=["whole-lines", "ragged"])
def test_split_k_partials_dropped_from_l2_are_written_again_by_the_next_call(dtype, tol, m, n):
    """reduce_splits drops the partials' lines from L2 once it has read them, without their write-back, where
    each split's partials fill whole 128-byte lines (40 x 48; not 41 x 39): a split plan run four times in a
    row on new inputs (its partials in the same pool memory each time) gives each call its own result, and
    the second input run again gives the same bits."""
    rng = np.random.default_rng(41)
    np_dtype = NUMPY_DTYPE[dtype]
    inputs = [(rng.standard_normal((m, 6000)).astype(np_dtype), rng.standard_normal((6000, n)).astype(np_dtype))
              for _ in range(4)]
    D = cp.full((m, n), np.nan, dtype=np_dtype)
    plan = gett.plan_contraction(cp.asarray(inputs[0][0]), "mk", cp.asarray(inputs[0][1]), "kn", D, "mn")
    assert plan.kernel().config.split_k > 1
    results = []
    for a, b in inputs:
        D.fill(np.nan)
        gett.contract(plan, 1.0, cp.asarray(a), cp.asarray(b), 0.0, D)
        assert_close(cp.asnumpy(D).astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), tol)
        results.append(cp.asnumpy(D))
    a, b = inputs[1]
    D.fill(np.nan)
    gett.contract(plan, 1.0, cp.asarray(a), cp.asarray(b), 0.0, D)
    assert np.array_equal(cp.asnumpy(D), results[1])


def test_split_k_partials_off_a_line_are_kept_in_l2():
    """Partials whose block does not start on a 128-byte line (an allocator handing out blocks 16 bytes past
    one) are added up as ever and not dropped from L2 (the discard needs whole lines): right results, twice."""
    rng = np.random.default_rng(42)
    A = cp.asarray(rng.standard_normal((40, 6000)).astype(np.float32))
    B = cp.asarray(rng.standard_normal((6000, 48)).astype(np.float32))
    D = cp.full((40, 48), np.nan, dtype=np.float32)
    plan = gett.plan_contraction(A, "mk", B, "kn", D, "mn")
    assert plan.kernel().config.split_k > 1
    pool = cp.get_default_memory_pool()
    shifted = []

    def off_a_line(size):
        block = pool.malloc(size + 256)
        pointer = cp.cuda.MemoryPointer(block.mem, block.ptr - block.mem.ptr + 16)
        shifted.append(pointer.ptr % 128)
        return pointer

    cp.cuda.set_allocator(off_a_line)
    try:
        for _ in range(2):
            D.fill(np.nan)
            gett.contract(plan, 1.0, A, B, 0.0, D)
            cp.cuda.Device().synchronize()
            assert_close(cp.asnumpy(D).astype(np.float64),
                         cp.asnumpy(A).astype(np.float64) @ cp.asnumpy(B).astype(np.float64), 1e-5)
    finally:
        cp.cuda.set_allocator(pool.malloc)
    assert shifted and all(offset == 16 for offset in shifted)


def _rows_padded(values, pad):
    """``values`` (a host array) on the GPU as a view of a buffer whose rows are padded to ``pad`` elements."""
    last = values.shape[-1]
    buf = cp.full(values.shape[:-1] + (-(-last // pad) * pad,), np.nan, dtype=values.dtype)
    buf[..., :last] = cp.asarray(values)
    return buf[..., :last]


ODD_CONFIGS = {   # None: the heuristic's (wgmma with TMA loads for f16)
    "heuristic": None, "mma16": dict(math="mma16", bm=128, bn=128, bk=32, stages=3, wm=64, wn=32),
    "wgmma": dict(math="wgmma", bm=128, bn=128, bk=64, stages=3), "simt": dict(math="simt", bm=128, bn=64, bk=16,
                                                                             stages=3, tm=8, tn=4)}


@pytest.mark.parametrize("a_modes,b_modes", [("mk", "kn"), ("km", "nk")])
@pytest.mark.parametrize("rows", ["padded", "unaligned", "shifted"])
@pytest.mark.parametrize("dtype,config", [("f16", "heuristic"), ("f16", "mma16"), ("f16", "wgmma"),
                                          ("f32", "heuristic"), ("f32", "simt")])
def test_odd_extents(a_modes, b_modes, rows, dtype, config):
    """Odd extents along every operand's stride-1 mode (1001 x 263 x 777): with rows padded to 16 bytes the
    loads take vectors clipped at the operand's end, K- and row-contiguous; with unaligned rows (plain
    row-major arrays) a 16-bit plan copies its operands into padded runs first, as it does for views that
    start one element into a row (``x[:, 1:]``: even row lengths, but a 2-byte aligned pointer). Every output
    element is checked against float64 (outputs poisoned with NaN; padding holds NaN)."""
    from gett.config import KernelConfig
    if cp.cuda.Device().compute_capability != "90" and config in ("heuristic", "wgmma") and dtype == "f16":
        pytest.skip("the wgmma path needs an sm_90 GPU")
    rng = np.random.default_rng(1001)
    ext = {"m": 1001, "n": 263, "k": 777}
    host = {t: random_values(rng, int(np.prod([ext[x] for x in modes])), dtype).reshape([ext[x] for x in modes])
            .astype(NUMPY_DTYPE[dtype]) for t, modes in (("A", a_modes), ("B", b_modes))}
    pad = 16 // np.dtype(NUMPY_DTYPE[dtype]).itemsize
    def place(x):
        if rows == "padded":
            return _rows_padded(x, pad)
        if rows == "shifted":
            wider = cp.full(x.shape[:-1] + (x.shape[-1] + 1,), np.nan, dtype=x.dtype)
            wider[..., 1:] = cp.asarray(x)
            return wider[..., 1:]
        return cp.asarray(x)
    A, B = (place(host[t]) for t in "AB")
    D = cp.full((1001, 263), np.nan, dtype=cp.float32)
    cfg = None if ODD_CONFIGS[config] is None else KernelConfig(**ODD_CONFIGS[config])
    plan = gett.plan_contraction(A, a_modes, B, b_modes, D, "mn", config=cfg)
    staged = [st.tensor for st in plan.staging]
    assert staged == (["A", "B"] if rows != "padded" and dtype == "f16" else [])
    gett.contract(plan, 1.0, A, B, 0.0, D)
    expect = np.einsum(f"{a_modes},{b_modes}->mn", host["A"].astype(np.float64), host["B"].astype(np.float64))
    assert_close(cp.asnumpy(D), expect, tol=2e-3 if dtype == "f16" else 1e-5)


def test_unaligned_bf16_torch_rows_are_copied_into_padded_rows():
    """Row-major bf16 torch tensors with odd row lengths through gett.einsum (the PyTorch path: the copies'
    workspace on the caller's stream): the plan copies both operands into padded rows, and every output
    element matches float64 (bf16 data, f32 accumulation)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(50)
    a, b = rng.uniform(-1, 1, (1001, 777)), rng.uniform(-1, 1, (777, 263))
    A, B = (torch.from_numpy(x).to("cuda", torch.bfloat16) for x in (a, b))
    plan = gett.plan_contraction(A, "mk", B, "kn", torch.empty(1001, 263, device="cuda", dtype=torch.float32), "mn",
                                 beta=0)
    assert [(st.tensor, st.target.strides) for st in plan.staging] == [("A", (832, 1)), ("B", (264, 1))]
    D = torch.full((1001, 263), float("nan"), device="cuda", dtype=torch.float32)
    gett.einsum("mk,kn->mn", A, B, out=D)
    expect = A.double().cpu().numpy() @ B.double().cpu().numpy()
    assert_close(D.cpu().numpy().astype(np.float64), expect)
