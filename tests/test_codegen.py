"""Every kernel variant the planner can choose compiles with NVRTC for sm_80 and sm_90 with zero spills
(no GPU needed), and the generated source makes the decisions the plan implies."""
import itertools
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

import gett
from gett.codegen import operand_layout, render_kernel
from gett.config import NARROW_K, KernelConfig, default_config, math_path
from gett.kernel import build_kernel, compile_arch

ARCHS = ("sm_80", "sm_90")
PATHS = {  # math path -> (data dtype, output dtype, compute_type)
    "mma16-f16": ("f16", "f32", None), "mma16-f16out": ("f16", "f16", None), "mma16-bf16": ("bf16", "f32", None),
    "tf32": ("f32", "f32", "tf32"), "3xtf32": ("f32", "f32", "3xtf32"), "f64mma": ("f64", "f64", None),
    "simt-f32": ("f32", "f32", None), "simt-c64": ("c64", "c64", None), "simt-c128": ("c128", "c128", None),
    "simt-i32": ("i32", "i32", None), "simt-i64": ("i64", "i64", None),
}
# (M, N): small, medium, large and skinny GEMMs select every tile size of the heuristic
SHAPES = ((20, 24), (50, 60), (300, 300), (300, 24), (24, 300))
# operand layouts: K contiguous in both, rows contiguous in both, strided (scalar accesses) in both
LAYOUTS = ("k-contig", "row-contig", "strided")


def tccg_plan(i: int, **kw):
    """The plan of TCCG contraction ``i`` over f16 descriptors laid out as the suite's (no arrays);
    ``kw`` go to plan_contraction."""
    from tccg_suite.suite import select
    c = select([i])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
    return gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), **kw)


def descriptors(m, n, k, dtype, out, layout):
    """A[m,k] B[k,n] C[m,n] descriptors with the requested memory layout."""
    D = gett.TensorDescriptor
    if layout == "k-contig":
        a, b = D((m, k), (k, 1), dtype), D((k, n), (1, k), dtype)
    elif layout == "row-contig":
        a, b = D((m, k), (1, m), dtype), D((k, n), (n, 1), dtype)
    else:
        a, b = D((m, k), (2 * k, 2), dtype), D((k, n), (2, 2 * k), dtype)
    return a, b, D((m, n), (n, 1), out)


def variants():
    for name, (dtype, out, compute) in PATHS.items():
        for (m, n), layout in itertools.chain(((s, "k-contig") for s in SHAPES),
                                              ((SHAPES[2], l) for l in LAYOUTS[1:])):
            yield name, dtype, out, compute, m, n, layout


def _compile(args):
    name, dtype, out, compute, m, n, layout, arch = args
    a, b, c = descriptors(m, n, 96, dtype, out, layout)
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn", compute_type=compute)
    return args, plan, build_kernel(plan, arch)


@pytest.fixture(scope="module")
def compiled():
    jobs = [v + (arch,) for v in variants() for arch in ARCHS]
    with ThreadPoolExecutor(max_workers=2) as pool:   # NVRTC releases the GIL
        return list(pool.map(_compile, jobs))


def test_every_variant_compiles_without_spills(compiled):
    seen_configs = set()
    for args, plan, kernel in compiled:
        r = kernel.report
        seen_configs.add((args[-1], r.config))
        assert r.spill_stores == 0 and r.spill_loads == 0, f"{args}: {r}"
        assert 0 < r.registers <= 255, f"{args}: {r}"
        assert r.threads == kernel.config.threads
        assert r.shared_bytes >= kernel.shared_bytes > 0
        assert r.arch == compile_arch(args[-1], kernel.config)   # sm_90a for wgmma (K = 96 >= WGMMA_MIN_K)
    # the shapes really exercise several tiles per path
    assert len({c for _, c in seen_configs}) >= 25


def test_resource_report_describes_the_kernel(compiled):
    _, plan, kernel = compiled[0]
    text = str(kernel.report)
    assert "registers" in text and "smem" in text and kernel.report.arch in text
    assert kernel.report.compile_seconds > 0


def test_heuristic_picks_tiles_that_fit_skinny_gemms():
    a, b, c = descriptors(300, 24, 96, "f16", "f32", "k-contig")
    cfg = default_config(gett.plan_contraction(a, "mk", b, "kn", c, "mn"))
    assert cfg.bn == 32 and cfg.bm == 128 and cfg.math == "mma16"


@pytest.mark.parametrize("layout,row_contig,vector", [("k-contig", False, 8), ("row-contig", True, 8),
                                                       ("strided", False, 1)])
def test_operand_layout_follows_the_stride_one_mode(layout, row_contig, vector):
    a, b, c = descriptors(64, 64, 64, "f16", "f32", layout)
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn")
    lay = operand_layout(plan, "A", "M", 128, 32)
    assert (lay.row_contig, lay.vector) == (row_contig, vector)
    assert lay.is_async == (vector * 2 >= 4)   # cp.async moves at least 4 bytes


def test_misaligned_pointer_narrows_vectors():
    D = gett.TensorDescriptor
    a = D((64, 64), (64, 1), "f16", alignment=4)
    plan = gett.plan_contraction(a, "mk", D((64, 64), (1, 64), "f16"), "kn", D((64, 64), (64, 1), "f32"), "mn")
    assert operand_layout(plan, "A", "M", 128, 32).vector == 2


def test_source_bakes_in_the_index_tables():
    D = gett.TensorDescriptor
    plan = gett.plan_contraction(D((5, 7, 3), None, "f32"), "bda", D((7, 4), None, "f32"), "dc",
                                 D((3, 5, 4), None, "f32"), "abc")
    src, smem, threads, _ = render_kernel(plan, default_config(plan))
    t = plan.tables["M"]
    for e, d, s in zip(t.extents, t.divisors, t.strides_of("A")):
        assert f"gett::Mode<{e}, {d}, {s}>" in src
    assert f"static_assert(Kernel::SMEM_BYTES == {smem}" in src


def test_math_path_selection():
    D = gett.TensorDescriptor
    def path(dtype, out, compute=None):
        return math_path(gett.plan_contraction(D((8, 8), None, dtype), "mk", D((8, 8), None, dtype), "kn",
                                               D((8, 8), None, out), "mn", compute_type=compute))
    assert path("f16", "f32") == "mma16" and path("bf16", "bf16") == "mma16"
    assert path("f32", "f32") == "simt" and path("f32", "f32", "tf32") == "tf32"
    assert path("f64", "f64") == "f64mma" and path("c128", "c128") == "simt" and path("i64", "i64") == "simt"


def test_compile_error_names_the_kept_source(tmp_path, monkeypatch):
    """An NVRTC failure raises CompileError with NVRTC's message and the path of the kept source."""
    import re
    from pathlib import Path
    from gett.nvrtc import compile_cubin
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path))
    source = 'extern "C" __global__ void k() { this is not C++; }'
    with pytest.raises(gett.CompileError) as info:
        compile_cubin(source, arch="sm_90")
    message = str(info.value)
    assert "error" in message.lower()
    kept = re.search(r"Source kept at: (\S+)", message)
    assert kept, message
    assert Path(kept.group(1)).read_text() == source



def test_split_k_for_long_thin_contractions():
    """Few output tiles and a long K (TCCG #13: 312×296 outputs, K = 92352) split K; a big output doesn't."""
    D = gett.TensorDescriptor
    thin = gett.plan_contraction(D((312, 92352), None, "f16"), "mk", D((92352, 296), None, "f16"), "kn",
                                 D((312, 296), None, "f16"), "mn")
    cfg = default_config(thin)
    assert cfg.split_k > 1
    tiles = -(-312 // cfg.bm) * -(-296 // cfg.bn)
    assert 132 <= tiles * cfg.split_k <= 264   # enough CTAs for every SM, and no second round for a few
    assert -(-92352 // cfg.bk) // cfg.split_k >= 8   # each slice still has a real main loop
    wide = gett.plan_contraction(D((4096, 512), None, "f16"), "mk", D((512, 4096), None, "f16"), "kn",
                                 D((4096, 4096), None, "f16"), "mn")
    assert default_config(wide).split_k == 1


@pytest.mark.parametrize("a, b, m, n, k, tile", [
    ("ik", "kj", 1000, 1000, 1000, (128, 64)),      # 128 x 256 gave 32 CTAs, then split K in two
    ("ik", "kj", 1152, 560, 1440, (128, 64)),       # 128 x 192: 27 CTAs, split in two
    ("ik", "kj", 1024, 1024, 1024, (128, 64)),      # the wide tile's path: 128 x 256, 32 CTAs, split in two
])
def test_small_gemms_narrow_the_producer_tile_before_splitting_k(a, b, m, n, k, tile):
    """A GEMM with wide producer tiles for under half the SMs and K short of NARROW_K takes 128 x 64 tiles, unsplit,
    rather than K split in two (H100 f16: 1000^3 25.8 -> 13.8 us); a long K still splits the wide tile."""
    D = gett.TensorDescriptor
    ext = {"i": m, "j": n, "k": k}
    plan = gett.plan_contraction(D(tuple(ext[x] for x in a), None, "f16"), a, D(tuple(ext[x] for x in b), None, "f16"),
                                 b, D((m, n), None, "f16"), "ij")
    cfg = default_config(plan, "sm_90")
    assert (cfg.math, cfg.bm, cfg.bn, cfg.split_k, cfg.ws, cfg.persistent) == ("wgmma", *tile, 1, True, False)
    long_k = gett.plan_contraction(D((m, NARROW_K), None, "f16"), "ik", D((NARROW_K, n), None, "f16"), "kj",
                                   D((m, n), None, "f16"), "ij")
    wide = default_config(long_k, "sm_90")
    assert wide.bn > 128 and wide.split_k > 1


@pytest.mark.parametrize("a, b, d, extents, expected", [
    ("bhqd", "bhkd", "bhqk", {"b": 8, "h": 16, "q": 512, "k": 512, "d": 64}, "wgmma_128x256x64_s3_g8_ws_p"),
    ("ik", "kj", "ij", {"i": 4096, "k": 64, "j": 4096}, "wgmma_128x256x64_s5_g8_ws_p_rb"),
])
def test_a_short_k_of_64_or_more_takes_the_producer_tile_over_several_tiles(a, b, d, extents, expected):
    """Write-bound GEMMs (K of 64 to 255, M and N of 128 or more) run wgmma producer tiles over several tiles,
    not mma.sync's 128 x 128 (H100 f16: attention scores 64.5 -> 33.6 us, 4096 x 4096 x 64 29.1 -> 17.2)."""
    D = gett.TensorDescriptor
    plan = gett.plan_contraction(*(x for t in (a, b, d) for x in (D(tuple(extents[m] for m in t), None, "f16"), t)))
    assert default_config(plan, "sm_90").key() == expected
    assert default_config(plan, "sm_80").math == "mma16"


def test_split_k_fills_one_round_of_the_ctas_an_sm_holds():
    """Split K gives one round of resident CTAs: a tile whose stages take most of an SM's shared memory
    (TCCG #13 with the 128 x 160 producer tile, 4 stages: 147 KB, one CTA an SM) splits into 132 CTAs,
    not 264, which would run in two rounds (H100: 70.3 against 78.1 us); a smaller one into two an SM
    without a producer warpgroup, one an SM with one (#19: 31.4 against 34.7 us)."""
    from gett.codegen import shared_bytes, shared_ctas
    from gett.config import KernelConfig, _layouts, split_k_for
    from gett.tiling import tile_plan
    D = gett.TensorDescriptor
    thin = gett.plan_contraction(D((312, 92352), None, "f16"), "mk", D((296, 92352), None, "f16"), "nk",
                                 D((312, 296), None, "f16"), "mn")   # B K-major, as #13's
    tiles = 3 * 2   # 128 x 160 tiles of 312 x 296
    for stages, ws, per_sm in ((4, True, 1), (2, False, 2)):
        cfg = KernelConfig("wgmma", 128, 160, 64, stages, ws=ws)
        assert min(shared_ctas(shared_bytes(tile_plan(thin, cfg), cfg, *_layouts(thin, cfg))), 2) == per_sm
        assert split_k_for(thin, cfg) == 132 * per_sm // tiles
    two_fit = KernelConfig("wgmma", 128, 160, 64, 2, ws=True)   # a producer tile two of which would fit
    assert min(shared_ctas(shared_bytes(tile_plan(thin, two_fit), two_fit, *_layouts(thin, two_fit))), 2) == 2
    assert split_k_for(thin, two_fit) == 132 // tiles


def test_reduction_threads_take_16_bytes_of_partials_where_the_fast_extent_allows():
    """reduce_splits reads each split's partial sums as 16-byte vectors along the partials' fast dimension
    (4 f32, 2 f64, 1 c128) where that extent is a multiple of the vector, else one element a thread; the
    reduction's grid has a thread per vector."""
    from gett.codegen import REDUCE_THREADS, reduce_grid, reduce_vector
    D = gett.TensorDescriptor
    for extent, dtype, vector in ((40, "f16", 4), (42, "f16", 1), (42, "f64", 2), (40, "c128", 1)):
        plan = gett.plan_contraction(D((extent, 8192), None, dtype), "mk", D((8192, extent), None, dtype), "kn",
                                     D((extent, extent), None, dtype), "mn")
        cfg = default_config(plan)
        assert cfg.split_k > 1
        assert reduce_vector(plan, cfg) == vector, (extent, dtype)
        assert reduce_grid(plan, cfg) == (-(-extent * extent // vector // REDUCE_THREADS), 1, 1)


@pytest.mark.parametrize("d_modes,m_fast", [("nm", True), ("mn", False)])
def test_host_and_device_agree_on_the_partials_fast_dimension(d_modes, m_fast):
    """Split-K partial sums run along D's stride-1 side where that is M's first mode, else along N; the host
    (codegen.partials_m_fast, which sizes reduce_splits' vectors) and the kernel (Gett::PARTIALS_M_FAST)
    decide it apart, and the TU static_asserts that they agree (NVRTC would refuse it otherwise)."""
    from gett.codegen import partials_m_fast
    D = gett.TensorDescriptor
    d = D((40, 44), None, "f32") if d_modes == "mn" else D((44, 40), None, "f32")
    plan = gett.plan_contraction(D((40, 8192), None, "f32"), "mk", D((8192, 44), None, "f32"), "kn", d, d_modes)
    kernel = build_kernel(plan, "sm_90")
    assert kernel.config.split_k > 1 and partials_m_fast(plan, kernel.config) == m_fast
    assert f"Kernel::PARTIALS_M_FAST == {'true' if m_fast else 'false'}" in kernel.source


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64", "c128"])
def test_split_k_kernels_compile(arch, dtype):
    D = gett.TensorDescriptor
    plan = gett.plan_contraction(D((40, 8192), None, dtype), "mk", D((8192, 40), None, dtype), "kn",
                                 D((40, 40), None, dtype), "mn")
    kernel = build_kernel(plan, arch)
    assert kernel.config.split_k > 1
    assert "gett_reduce_splits" in kernel.source
    assert kernel.report.spill_stores == 0 and kernel.report.spill_loads == 0


def test_second_mode_of_a_box_loads_strided_vectors():
    """TCCG #28 abcd-eafb-fdec: after box tiling K = [e%8, f%4, ...], B's stride-1 mode f is the box's
    second mode — B moves 4-element vectors whose elements lie 8 tile positions apart (register-staged)."""
    from gett.tiling import tile_plan
    D = gett.TensorDescriptor
    col = lambda shape: tuple(int(np.prod(shape[:i])) for i in range(len(shape)))
    s = (72,) * 4
    plan = gett.plan_contraction(D(s, col(s), "f16"), "eafb", D(s, col(s), "f16"), "fdec", D(s, col(s), "f16"),
                                 "abcd")
    cfg = default_config(plan)
    tiled = tile_plan(plan, cfg)
    b = operand_layout(tiled, "B", "N", cfg.bn, cfg.bk)
    assert (b.row_contig, b.vector, b.step, b.is_async) == (False, 4, 8, False)
    a = operand_layout(tiled, "A", "M", cfg.bm, cfg.bk)
    assert (a.vector, a.step, a.is_async) == (8, 1, True)
    src, _, _, _ = render_kernel(tiled, cfg)
    assert "false, 4, false, 8, false>" in src


WGMMA_TILES = ((64, 64), (64, 128), (128, 128), (128, 160), (128, 192), (128, 256))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,out", [("f16", "f32"), ("bf16", "bf16")])
def test_wgmma_kernels_compile_for_sm90a(layout, dtype, out):
    """Every operand direction (K-major, MN-major, staged scalars) and tile of the wgmma path; without
    spills where operands move as vectors (scalar staging of 64-deep tiles spills: the heuristic never
    picks wgmma there, see the next test)."""
    a, b, c = descriptors(300, 300, 300, dtype, out, layout)
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn")
    for bm, bn in WGMMA_TILES:   # (an MN-major B of 160 columns: three 64-column atoms, the last half read)
        k = build_kernel(plan, "sm_90", KernelConfig("wgmma", bm, bn, 64, 3))
        assert k.report.arch == "sm_90a" and k.threads == 128 * bm // 64
        if layout != "strided":
            assert k.report.spill_stores == 0 and k.report.spill_loads == 0, k.report
        assert "gett::WgmmaMath<" in k.source and ", true>;" in k.source   # swizzled loaders


def test_wgmma_stages_one_operand_with_an_op_through_registers():
    """With ops on the wgmma path, the operand with the larger tile (B on a tie) is staged through
    registers with its op; the other is copied asynchronously and transformed in place. mma.sync keeps
    both asynchronous. Where the staging spills (the 128 x 256 tile with partial K tiles here),
    build_kernel applies the op in shared memory instead; with whole tiles it keeps the staging."""
    from gett.codegen import operand_layouts
    leaky = gett.ops.leaky_relu(0.01)
    a, b, c = descriptors(300, 300, 300, "f16", "f32", "k-contig")

    def staged(cfg, **ops):
        plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn", **ops)
        return "".join(t for t, x in zip("AB", operand_layouts(plan, cfg)) if not x.is_async)
    big, tall = KernelConfig("wgmma", 128, 256, 64, 4), KernelConfig("wgmma", 128, 64, 64, 4)
    assert staged(KernelConfig("wgmma", 128, 256, 64, 3), op_b=leaky) == ""   # no slack to hide the loads
    assert staged(big) == "" and staged(big, op_a=leaky) == "A" and staged(big, op_b=leaky) == "B"
    assert staged(big, op_a=leaky, op_b=leaky) == "B" and staged(tall, op_a=leaky, op_b=leaky) == "A"
    assert staged(KernelConfig("wgmma", 128, 128, 64, 4), op_a=leaky, op_b=leaky) == "B"
    assert staged(KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32), op_a=leaky, op_b=leaky) == ""
    assert staged(big, op_c=leaky) == ""
    for m, k_extent, staging in ((300, 300, False), (1024, 1024, True)):
        a, b, c = (gett.TensorDescriptor((m, k_extent), (k_extent, 1), "f16"),
                   gett.TensorDescriptor((k_extent, m), (1, k_extent), "f16"), gett.TensorDescriptor((m, m), (m, 1), "f32"))
        plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn", op_a=leaky, op_b=leaky, op_c=leaky)
        k = build_kernel(plan, "sm_90", big)
        assert k.report.spill_stores == 0 and k.report.spill_loads == 0, k.report
        assert (", false, 1, true>;" in k.source) == staging   # B's loader: vectors not asynchronous



def test_unknown_resources_keep_the_staged_kernel(monkeypatch):
    """On a machine with a CUDA driver, NVRTC may answer from the driver's compute cache, which skips
    ptxas: no report, registers and spills -1. That is no evidence of spills: build_kernel keeps the
    kernel that stages an operand through registers (it used to treat -1 as spilling)."""
    import dataclasses

    from gett import kernel as kernel_module
    real = kernel_module.compile_source
    compiled = []

    def without_report(ks, arch):
        k = real(ks, arch)
        compiled.append(ks.source)
        return dataclasses.replace(k, report=dataclasses.replace(k.report, registers=-1, spill_stores=-1,
                                                                 spill_loads=-1, stack_bytes=-1))
    monkeypatch.setattr(kernel_module, "compile_source", without_report)
    leaky = gett.ops.leaky_relu(0.01)
    a, b = gett.TensorDescriptor((1024, 1024), (1024, 1), "f16"), gett.TensorDescriptor((1024, 1024), (1, 1024), "f16")
    c = gett.TensorDescriptor((1024, 1024), (1024, 1), "f32")
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn", op_a=leaky, op_b=leaky)
    k = build_kernel(plan, "sm_90", KernelConfig("wgmma", 128, 256, 64, 4))
    assert len(compiled) == 1 and ", false, 1, true>;" in k.source and k.report.registers == -1

@pytest.mark.parametrize("ops", ["none", "ab"])
@pytest.mark.parametrize("notation", ["ab-ac-cb", "abcd-aebf-dfce", "abcd-eafb-fdec"])
def test_warp_specialised_kernels_compile_without_spills(notation, ops):
    """TCCG #12/#20/#28 patterns (K- and MN-major operands; #28's K box transposes 8 x 8 blocks) as
    warp-specialised wgmma kernels: a producer warpgroup (384 threads in all), two mbarriers per stage
    after the tiles, ops applied by the producer (no operand staged through registers), no spills."""
    from gett.codegen import operand_layouts
    from gett.tiling import tile_plan
    d, a_modes, b_modes = notation.split("-")
    ext = dict(zip("abcdef", (72, 72, 72, 72, 72, 72)))
    desc = {t: gett.TensorDescriptor(tuple(ext[x] for x in m), tuple(int(np.prod([ext[y] for y in m[:i]]))
                                                                    for i in range(len(m))), dt)
            for t, m, dt in (("A", a_modes, "f16"), ("B", b_modes, "f16"), ("C", d, "f16"))}
    leaky = gett.ops.leaky_relu(0.01)
    kw = {"op_a": leaky, "op_b": leaky, "op_c": leaky} if ops == "ab" else {}
    plan = gett.plan_contraction(desc["A"], a_modes, desc["B"], b_modes, desc["C"], d, **kw)
    cfg = KernelConfig("wgmma", 128, 256, 64, 4, ws=True)
    assert all(x.is_async for x in operand_layouts(tile_plan(plan, cfg), cfg))
    k = build_kernel(plan, "sm_90", cfg)
    assert k.threads == 384 and k.report.threads == 384 and cfg.key().endswith("_ws")
    assert k.report.spill_stores == 0 and k.report.spill_loads == 0, k.report
    stages = min(4, -(-plan.k // 64))   # #12's K = 72 fills only two of the four
    assert k.shared_bytes == stages * (128 + 256) * 64 * 2 + 4 * 16   # the stages, then 8 mbarriers
    assert "__launch_bounds__(384, 1)" in k.source and k.source.count(", 64, 128, ") == 2   # loaders: 128 threads


@pytest.mark.parametrize("bn", [192, 216, 240])
def test_three_math_warpgroups_compile_without_spills(bn):
    """192-row tiles (TCCG #12's pattern, loaded by TMA): 512 threads launch with 128 registers each, and
    the math warpgroups hold up to 120 accumulators a thread only because the producer hands them its
    registers (setmaxnreg) and each wgmma takes at most 128 columns (64 accumulators): without either,
    ptxas spills or refuses the instruction."""
    a = gett.TensorDescriptor((1024, 512), (1, 1024), "f16")
    b = gett.TensorDescriptor((512, 1024), (1, 512), "f16")
    plan = gett.plan_contraction(a, "mk", b, "kn", gett.TensorDescriptor((1024, 1024), (1, 1024), "f16"), "mn")
    k = build_kernel(plan, "sm_90", KernelConfig("wgmma", 192, bn, 64, 4, ws=True))
    assert k.tma is not None and k.threads == 512 and k.report.registers == 128
    assert k.report.spill_stores == 0 and k.report.spill_loads == 0, k.report


@pytest.mark.parametrize("b_modes,n,bn,stages", [("kn", 296, 160, 4), ("nk", 312, 192, 3)])
def test_resident_b_kernels_hold_all_of_k_and_compile_without_spills(b_modes, n, bn, stages):
    """A resident B tile (``resident`` "b", TCCG #15/#17's shapes, K-major and N-major B): the shared memory
    holds the A stages, B's tile for every K tile (K = 312: five of 64) and the epilogue tile; the host's
    size agrees with the kernel's (a static_assert), under the launch bounds of one CTA an SM, no spills."""
    m, k = 92352, 312
    ext = {"m": m, "n": n, "k": k}
    b = gett.TensorDescriptor(tuple(ext[x] for x in b_modes), (1, ext[b_modes[0]]), "f16")
    plan = gett.plan_contraction(gett.TensorDescriptor((m, k), (1, m), "f16"), "mk", b, b_modes,
                                 gett.TensorDescriptor((m, n), (1, m), "f16"), "mn")
    cfg = KernelConfig("wgmma", 128, bn, 64, stages, ws=True, persistent=True, resident="b")
    k_ = build_kernel(plan, "sm_90", cfg)
    plain = build_kernel(plan, "sm_90", replace(cfg, resident=""))
    assert k_.shared_bytes - plain.shared_bytes == (5 - stages) * bn * 64 * 2
    assert k_.report.spill_stores == 0 and k_.report.spill_loads == 0, k_.report
    assert cfg.key().endswith("_p_rb") and ", gett::NoTmaStore, 'B'>;" in k_.source


@pytest.mark.parametrize("tccg,bn,resident,tma", [(15, 160, "b", True), (16, 128, "a", False),
                                                   (18, 160, "b", True)])
def test_warpgroups_in_turn_hold_whole_tiles_and_compile_without_spills(tccg, bn, resident, tma):
    """Math warpgroups that take tiles in turn (``pingpong``, TCCG #15's, #16's and #18's shapes): each holds a
    whole 128-row tile, two 64-row slabs (WgmmaMath's SLABS), so 160 columns take 160 accumulators a thread,
    which the producer's registers make room for, a TMA producer's (#15; #18, whose A's rows of two modes load
    in runs, gett.tma.m_run); 128 columns (128 accumulators) fit a cp.async producer's launch (#16: N's modes
    not one stride). The shared memory is the same as with both warpgroups on one tile (they share one epilogue tile
    by turns); no spills under the launch bounds of one CTA an SM."""
    from tccg_suite.suite import select
    c = select([tccg])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"))
    cfg = KernelConfig("wgmma", 128, bn, 64, 5, ws=True, persistent=True, resident=resident, pingpong=True)
    turns = build_kernel(plan, "sm_90", cfg)
    together = build_kernel(plan, "sm_90", replace(cfg, pingpong=False))
    assert (turns.tma is not None) == tma and cfg.shares_registers == (bn > 128) and cfg.key().endswith("_pp")
    assert turns.shared_bytes == together.shared_bytes and turns.threads == together.threads == 384
    assert ", 256, 2>;" in turns.source and f", '{resident.upper()}', true>;" in turns.source   # PART, SLABS
    assert turns.report.spill_stores == 0 and turns.report.spill_loads == 0, turns.report


def test_warpgroups_in_turn_need_a_wgmma_producer_over_several_128_row_tiles():
    assert KernelConfig("wgmma", 128, 160, 64, 4, ws=True, persistent=True, pingpong=True).tile_threads == 128
    for bad in (KernelConfig("wgmma", 128, 128, 64, 4, ws=True, pingpong=True),
                KernelConfig("wgmma", 128, 128, 64, 4, persistent=True, pingpong=True),
                KernelConfig("wgmma", 192, 192, 64, 4, ws=True, persistent=True, pingpong=True),
                KernelConfig("wgmma", 128, 192, 64, 3, ws=True, persistent=True, pingpong=True),
                KernelConfig("wgmma", 72, 128, 64, 3, ws=True, persistent=True, swap=True, pingpong=True),
                KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32, persistent=True, pingpong=True)):
        with pytest.raises(ValueError, match="in turn \\(pingpong\\)"):
            bad.validate()


def test_resident_tiles_need_a_wgmma_producer_over_several_tiles():
    with pytest.raises(ValueError, match="resident must be '', 'a' or 'b'"):
        KernelConfig("wgmma", 128, 160, 64, 4, ws=True, persistent=True, resident="c").validate()
    assert KernelConfig("wgmma", 128, 160, 64, 4, ws=True, persistent=True, resident="a").key().endswith("_p_ra")
    for bad in (KernelConfig("wgmma", 128, 160, 64, 4, ws=True, resident="b"),
                KernelConfig("wgmma", 128, 160, 64, 4, persistent=True, resident="b"),
                KernelConfig("wgmma", 128, 128, 64, 4, ws=True, persistent=True, swap=True, resident="b"),
                KernelConfig("simt", 128, 128, 24, 4, tm=8, tn=8, ws=True, persistent=True, resident="b")):
        with pytest.raises(ValueError, match="resident B tile"):
            bad.validate()


def _leaky(x):
    return x if x > 0 else 0.5 * x


def test_a_resident_tile_is_refused_where_the_operand_has_an_op_or_a_batch():
    """The kernel copies a resident tile once, as it lies in memory (gett.cuh's static_assert): an op on that
    operand, or a batch, is refused with the reason before NVRTC sees the kernel."""
    f16 = lambda shape: gett.TensorDescriptor(shape, tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape))),
                                              "f16")
    cfg = KernelConfig("wgmma", 128, 128, 64, 3, ws=True, persistent=True, resident="b")
    plan = gett.plan_contraction(f16((16384, 512)), "ik", f16((512, 128)), "kj", f16((16384, 128)), "ij",
                                 op_b=_leaky, staging=False, config=cfg, device_arch=None)
    with pytest.raises(ValueError, match="resident B tile .* op_b would be applied to it"):
        build_kernel(plan, "sm_90", cfg)
    staged = gett.plan_contraction(f16((16384, 512)), "ik", f16((512, 128)), "kj", f16((16384, 128)), "ij",
                                   op_b=_leaky, staging=True, config=cfg, device_arch=None)
    assert build_kernel(staged.staged_plan, "sm_90", cfg).config == cfg   # the hint: the copy applies op_b
    batched = gett.plan_contraction(f16((4, 4096, 256)), "bik", f16((4, 256, 128)), "bkj", f16((4, 4096, 128)),
                                    "bij", config=cfg, device_arch=None)
    with pytest.raises(ValueError, match="resident B tile .* the batch has 4 indices"):
        build_kernel(batched, "sm_90", cfg)
    plain = gett.plan_contraction(f16((16384, 512)), "ik", f16((512, 128)), "kj", f16((16384, 128)), "ij",
                                  config=cfg, device_arch=None)
    assert build_kernel(plain, "sm_90", cfg).config == cfg


def test_warp_specialisation_needs_asynchronous_operands():
    """A producer warpgroup only copies asynchronously: scalar-staged operands and other math paths are
    refused with the reason, not compiled into a kernel that would read garbage."""
    with pytest.raises(ValueError, match="ws.*needs the wgmma or simt path"):
        KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32, ws=True).validate()
    a, b, c = descriptors(300, 300, 300, "f16", "f32", "strided")
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn")
    with pytest.raises(ValueError, match="needs both operands copied asynchronously.*A staged, B staged"):
        build_kernel(plan, "sm_90", KernelConfig("wgmma", 128, 128, 64, 3, ws=True))


def test_wgmma_configurations_are_checked():
    for bad in (KernelConfig("wgmma", 96, 128, 64, 3), KernelConfig("wgmma", 128, 112, 64, 3),
                KernelConfig("wgmma", 128, 128, 32, 3), KernelConfig("wgmma", 512, 128, 64, 3),
                KernelConfig("wgmma", 64, 256, 64, 3), KernelConfig("wgmma", 128, 128, 64, 2)):
        with pytest.raises(ValueError, match="wgmma (tile|needs)"):
            bad.validate()
    a, b, c = descriptors(300, 300, 300, "f16", "f32", "k-contig")
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn")
    with pytest.raises(gett.DeviceError, match="only sm_90"):
        build_kernel(plan, "sm_80", KernelConfig("wgmma", 128, 128, 64, 3))


def test_swapped_wgmma_tiles():
    """``swap``: B's tile gives the warpgroups their 64-row slabs and M is the instruction's width (any of
    WGMMA_N, 72 included); the configuration is checked that way round. TCCG #11's heuristic tile
    (72 x 128, K-major A) compiles for sm_90a without spills, its math instantiated swapped, in two
    warpgroups of 36 accumulators a thread capped for three CTAs per SM (their 51 KB of shared memory
    would allow four; the registers would not leave 40 beyond the accumulators), with ops on A and B
    too (their pass fits in the 80 registers without spills). The tuner offers swapped tiles
    where M is at most 128, of the smallest width covering it."""
    from gett.codegen import ctas_per_sm
    from gett.tuner import _wgmma_configs
    from tccg_suite.suite import select
    swapped = KernelConfig("wgmma", 72, 256, 64, 3, swap=True)
    swapped.validate()
    assert swapped.math_threads == 512 and swapped.key() == "wgmma_72x256x64_s3_g8_swap"
    for bad in (KernelConfig("wgmma", 128, 72, 64, 3, swap=True),    # 72 rows of B: not whole warpgroups
                KernelConfig("wgmma", 112, 128, 64, 3, swap=True),   # no instruction 112 wide
                KernelConfig("wgmma", 256, 64, 64, 3, swap=True)):   # one warpgroup of 128 accumulators
        with pytest.raises(ValueError, match="wgmma tile"):
            bad.validate()
    with pytest.raises(ValueError, match="swapped operands"):
        KernelConfig("mma16", 64, 64, 32, 3, wm=32, wn=32, swap=True).validate()
    c = select([11])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"))
    cfg = default_config(plan, "sm_90")
    assert cfg.swap and ctas_per_sm(plan, cfg) == 3
    k = build_kernel(plan, "sm_90", cfg)
    assert "gett::WgmmaMath<__half, LoadA, LoadB, 72, 128, 64, true>" in k.source
    assert "__launch_bounds__(256, 3)" in k.source and k.report.registers <= 80, k.report
    assert k.report.spill_stores == 0 and k.report.spill_loads == 0, k.report
    leaky = gett.ops.leaky_relu(0.01)
    fused = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"),
                                  op_a=leaky, op_b=leaky)
    assert default_config(fused, "sm_90") == cfg and ctas_per_sm(fused, cfg) == 3
    k = build_kernel(fused, "sm_90", cfg)
    assert "__launch_bounds__(256, 3)" in k.source and k.report.spill_stores == 0, k.report
    tiles = {(x.bm, x.bn) for x in _wgmma_configs(plan, "sm_90") if x.swap}
    assert tiles == {(72, 64), (72, 128), (72, 256)}
    long_m = gett.plan_contraction(d["B"], c.modes("B"), d["A"], c.modes("A"), d["C"], c.modes("C"))   # M 373248
    assert not any(x.swap for x in _wgmma_configs(long_m, "sm_90"))


def test_heuristic_uses_wgmma_only_on_hopper_for_large_gemms():
    a, b, c = descriptors(2048, 2048, 2048, "f16", "f32", "k-contig")
    big = gett.plan_contraction(a, "mk", b, "kn", c, "mn")
    assert default_config(big, "sm_90").math == "wgmma"
    assert (default_config(big, "sm_90").bm, default_config(big, "sm_90").bn) == (128, 256)
    assert default_config(big, "sm_90").ws   # a producer warpgroup, unless it would apply an op alone:
    leaky = gett.plan_contraction(a, "mk", b, "kn", c, "mn", op_b=gett.ops.leaky_relu(0.01), op_c=gett.ops.relu)
    assert not default_config(leaky, "sm_90").ws
    assert default_config(gett.plan_contraction(a, "mk", b, "kn", c, "mn", op_c=gett.ops.relu), "sm_90").ws
    for arch in ("sm_80", "sm_100", None):
        assert default_config(big, arch).math == "mma16"
    a, b, c = descriptors(2048, 2048, 2048, "f32", "f32", "k-contig")   # 32-bit data: no wgmma path here
    assert default_config(gett.plan_contraction(a, "mk", b, "kn", c, "mn"), "sm_90").math != "wgmma"
    a, b, c = descriptors(2048, 24, 2048, "f16", "f32", "k-contig")     # skinny N: mma.sync's small tiles
    assert default_config(gett.plan_contraction(a, "mk", b, "kn", c, "mn"), "sm_90").math == "mma16"
    a, b, c = descriptors(2048, 2048, 2048, "f16", "f32", "strided")    # scalar staging: 64-deep tiles spill
    assert default_config(gett.plan_contraction(a, "mk", b, "kn", c, "mn"), "sm_90").math == "mma16"


def test_heuristic_tiles_for_skinny_tccg_shapes_with_ops_on_their_loads():
    """N = 24 with a long M and leaky ReLU on A and B (fusion.py's work): 128 x 32 x 64 where K is past
    the 576-row tiles' 128 (#1, #2: K = 312; 256 rows 64 deep spill in the op pass), the 576-row tiles
    below it (#3, #4: K = 72; H100, tile_sweep --leaky, session 62: 57.8 against 105.5 us). The kernel
    NVRTC builds for #2 does not spill."""
    leaky = gett.ops.leaky_relu(0.01)

    def config(i):
        return default_config(tccg_plan(i, op_a=leaky, op_b=leaky, beta=1.0), "sm_90")
    for i in (1, 2):
        assert config(i) == KernelConfig("mma16", 128, 32, 64, 3, wm=32, wn=32), i
    assert (config(3).bm, config(4).bm) == (576, 576)
    kernel = tccg_plan(2, op_a=leaky, op_b=leaky, beta=1.0, device_arch="sm_90").kernel("sm_90")
    assert kernel.config == config(2) and kernel.report.spill_stores == 0


def test_heuristic_tiles_for_memory_bound_tccg_shapes():
    """Measured choices (benchmarks/tile_sweep.py): for N = 24 with a long M, 576 rows where that M is
    boxed and 256 rows would leave 8 x 8 boxes of 72-element modes (#3, #4: 24 x 24), else one CTA an SM
    over several tiles, 768 rows where K fits two 32-deep tiles (#6-8), 384 where it is longer (#1, #2), 192 rows
    where D's stride-1 mode has an extent of 24 (#31), plain 128x128 where D runs are long (#33), one
    tile row for M = 72 (#9-11: with A K-major, M is the wgmma instruction's width), wgmma with a
    producer over several tiles where N or M is in the hundreds (#15-18), one tile a CTA where K is split (#13),
    80 wide where N = 72 (#19)."""
    from tccg_suite.suite import select

    def config(i):
        return default_config(tccg_plan(i), "sm_90")
    assert (config(3).bm, config(4).bm, config(1).bm, config(5).bm) == (576, 576, 384, 256)
    # K = 72 in one tile of 80 where A is K-major (#5), not in #3/#4's TMA boxes (K's tile inside K)
    assert (config(5).bk, config(3).bk, config(4).bk) == (80, 32, 32)
    # the 576-row box tiles (one CTA per SM) run several tiles a CTA on sm_90; #5's A tile, copied by
    # cp.async, does with 2 stages, all of K in one tile
    assert config(3).persistent and config(4).persistent and config(3).stages == 3
    assert config(5).persistent and config(5).stages == 2
    # 256 rows would leave two CTAs an SM (#6-8's boxes) or A's K tiles copied by cp.async (#1/#2): taller
    # tiles over several tiles a CTA instead, 768 rows of 64 x 32 warps in 2 stages where K fits two 32-deep
    # tiles (#7: K = 48), else 384 rows of 32 x 32 warps in 3
    for i in (6, 7, 8):
        assert config(i) == KernelConfig("mma16", 768, 32, 32, 2, wm=64, wn=32, persistent=True), i
    for i in (1, 2):
        assert config(i) == KernelConfig("mma16", 384, 32, 32, 3, wm=32, wn=32, persistent=True), i
    assert (config(31).bm, config(31).bn) == (192, 128)
    assert (config(32).bm, config(32).bn) == (128, 192)   # D's run of 24 lies in N there
    assert (config(33).bm, config(33).bn) == (128, 128)
    # all of K (24) in one tile: 4 warps of 64 x 64 (no spills under the register cap of 3 CTAs an SM); the tiles
    # of 192 keep 64 x 32 warps (#31-48, session 39)
    assert all(config(i).wn == 64 for i in (33, 36, 39, 40, 43, 46)) and config(31).wn == config(32).wn == 32
    assert config(12).math == "wgmma" and (config(12).bm, config(12).bn) == (192, 216)   # B K-major: see test_tma
    # N or M in the hundreds: 128 rows, a producer over several tiles, the narrowest width of the fewest
    # column tiles (N = 296, B K-major: 160; N = 312, B N-major: 192); the tile for all of K of the operand
    # with fewer tiles resident: B where the shared memory holds it with 5 stages of A, its math warpgroups
    # taking the tiles in turn (#15, #18; 160 accumulators a thread, which the producer's registers make room
    # for), else 3 (#17); A (M = 312 against N = 92352) 128 wide with 5 stages of B, in turn (#16 as given, not
    # exchanged; a warpgroup's 128 accumulators a thread need none of the producer's registers)
    tiles = {i: (config(i).bm, config(i).bn, config(i).stages, config(i).ws, config(i).persistent,
                 config(i).resident, config(i).pingpong) for i in (15, 16, 17, 18)}
    assert tiles == {15: (128, 160, 5, True, True, "b", True), 16: (128, 128, 5, True, True, "a", True),
                     17: (128, 192, 3, True, True, "b", False), 18: (128, 160, 5, True, True, "b", True)}
    # K split (312 x 296 outputs, K = 92352): the same producer tile one tile a CTA, 6 tiles x 22 = 132 CTAs
    assert config(13) == KernelConfig("wgmma", 128, 160, 64, 4, ws=True, split_k=22)
    # N = 72 (#19): the producer tile as wide as N rounded up to 16; its 41 tiles of 128 rows would split K, so
    # 64 rows (81 tiles, one a CTA) with 8 stages, K whole (config._thin_tile)
    assert config(19) == KernelConfig("wgmma", 64, 80, 64, 8, ws=True)
    for i in (9, 10, 11):   # M = 72 in one tile: wgmma 72 (swapped) x 128 on Hopper, else mma.sync 96 x 128
        assert config(i) == KernelConfig("wgmma", 72, 128, 64, 3, swap=True) and config(i).threads == 256
        c = select([i])[0]
        d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
        plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"))
        assert (default_config(plan, "sm_80").bm, default_config(plan, "sm_80").bn) == (96, 128)
        # ops on A and B keep the swapped tile (faster with leaky ReLU too), as does an op on C alone;
        # an M-major A (no swap: its tile would need whole 64-row atoms) keeps 128 x 128, or 128 x 64 with
        # an op on B, three CTAs per SM to hide the op pass
        leaky = gett.ops.leaky_relu(0.01)
        fused = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"),
                                      op_a=leaky, op_b=leaky)
        assert default_config(fused, "sm_90") == config(i)
        a_m = gett.TensorDescriptor(d["A"].shape, d["A"].strides[::-1], "f16")   # 72 x 72, M's stride 1
        m_major = gett.plan_contraction(a_m, c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"))
        assert (default_config(m_major, "sm_90").bm, default_config(m_major, "sm_90").bn) == (128, 128)
        m_fused = gett.plan_contraction(a_m, c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), op_b=leaky)
        assert (default_config(m_fused, "sm_90").bm, default_config(m_fused, "sm_90").bn) == (128, 64)
        out_only = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"),
                                         op_c=leaky)
        assert default_config(out_only, "sm_90") == config(i)


def test_heuristic_simt_tiles_for_memory_bound_f32_tccg_shapes():
    """Measured choices for f32 data (tile_sweep --dtype f32, config._memory_bound_simt_tile): 384 x 24 for
    N = 24 with a long M (#1, #3-8; #3/#4's boxes 24 x 8 since SIMT boxes square strictly),
    128 x 24 for a K-major A with K = 312 (#2); one 72-row tile for M = 72 (#9-11) and one 72-column tile
    for N = 72 (#19); 128 x 128 for K = 24 where D's stride-1 mode has 24 or 384 elements (#31-48) and C is
    not read (beta hint 0), with a producer warpgroup over several tiles, else 192 x 64 where B is
    K-major (#31-39), 64 x 192 where A is (#40-48); GEMMs keep 128 x 128 (#12)."""
    from tccg_suite.suite import select

    def config(i, full=False, beta=0.0):
        c = select([i])[0]
        d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
        plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=beta)
        cfg = default_config(plan, "sm_90")
        return cfg if full else (cfg.bm, cfg.bn, cfg.tm, cfg.tn)
    c = select([9])[0]   # B K-major (#9): all of K in one stage, 4 columns a thread
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
    nine = default_config(gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C")))
    assert (nine.bk, nine.stages, nine.threads) == (72, 2, 256)
    # ... unless C is never read (beta hint 0): a producer over several tiles, 24 deep, lanes along M (D's a)
    assert config(9, full=True) == KernelConfig("simt", 72, 128, 24, 3, tm=9, tn=4, ws=True, persistent=True,
                                                lanes_m=True)
    assert not config(10, full=True).ws and not config(11, full=True).ws
    for i in (1, 5, 6, 7, 8):
        assert config(i) == (384, 24, 12, 3)
    assert config(3) == config(4) == (384, 24, 12, 3)   # a, d = 72: 24 x 8 boxes (strict squaring)
    assert config(2) == (128, 24, 8, 3)   # K-major A, K = 312: 128 rows, 32 deep
    assert [config(i) for i in (9, 10, 11, 19)] == [(72, 128, 9, 4)] + [(72, 128, 9, 8)] * 2 + [(128, 72, 8, 9)]
    # K = 24 with D's run of 24 or 384: a producer over several tiles, a warp's lanes along D's stride-1
    # side; 128 x 128 (4 stages where both operands copy asynchronously, else 3: the producer stages a
    # box's strided vectors through registers), or 96 rows (columns) where M's (N's) first mode is 24 and
    # that makes D's tile one TMA box (4 stages): 16 threads each way, or 32 along D's stride-1 side where
    # that side is 128 and the other 96 (#36, #43)
    assert all(config(i, full=True).ws and config(i, full=True).persistent for i in range(31, 49))
    assert {i for i in range(31, 49) if config(i) == (96, 128, 6, 8)} == {31, 34, 37, 41, 44, 47}
    assert {i for i in range(31, 49) if config(i) == (128, 96, 8, 6)} == {32, 35, 38, 42, 45, 48}
    assert config(36) == (96, 128, 12, 4) and config(43) == (128, 96, 4, 12)
    assert {i for i in range(31, 49) if config(i) == (128, 128, 8, 8)} == {33, 39, 40, 46}
    assert {i for i in range(31, 49) if config(i, full=True).stages == 3} == set()
    # lanes along M where A holds D's stride-1 mode a (M's first)
    assert {i for i in range(31, 49) if config(i, full=True).lanes_m} == {31, 34, 37, 40, 41, 43, 44, 46, 47}
    # a plan that may read C (beta hint 1 or none) keeps the 192-wide tiles: 192 x 64 where B is K-major
    # (#31-39), 64 x 192 where A is (#40-48)
    for beta in (None, 1.0):
        assert {config(i, beta=beta) for i in range(31, 40)} == {(192, 64, 12, 4)}
        assert {config(i, beta=beta) for i in range(40, 49)} == {(64, 192, 4, 12)}
    for i in (33, 32):   # with an op on A, no producer (it would apply the op alone): 2 stages
        c = select([i])[0]
        d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
        fused = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"),
                                      op_a=gett.ops.relu, beta=0.0)
        assert (default_config(fused, "sm_90").ws, default_config(fused, "sm_90").bm) == (False, 128 if i == 32 else 192)
    assert config(12)[:2] == (128, 128)
    # a max-plus semiring takes the SIMT path for 16-bit data too, but these rules are for 4-byte data
    a, b, c = descriptors(80, 8192, 64, "f16", "f32", "k-contig")
    f16 = gett.plan_contraction(a, "mk", b, "kn", c, "mn", op_ab=lambda x, y: x + y, reduce=(max, -np.inf))
    assert default_config(f16).math == "simt" and default_config(f16).bm == 64
    a, b, c = descriptors(80, 8192, 64, "f32", "f32", "k-contig")
    f32 = gett.plan_contraction(a, "mk", b, "kn", c, "mn", op_ab=lambda x, y: x + y, reduce=(max, -np.inf))
    assert (default_config(f32).bm, default_config(f32).tm) == (80, 10)


def test_simt_tiles_with_a_producer_compile_without_spills_and_need_three_stages_for_ops():
    """SIMT math fed by a producer warpgroup (f32 TCCG #33's heuristic tile: 128 x 128, 4 stages, over
    several tiles): 256 math threads and the producer, no spills under NVRTC. A producer applies an op
    to a stage after issuing the next one's copies, so with an op on A it needs 3 stages."""
    from tccg_suite.suite import select
    c = select([33])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0)
    cfg = default_config(plan, "sm_90")
    assert (cfg.math, cfg.ws, cfg.persistent, cfg.threads) == ("simt", True, True, 384)
    k = build_kernel(plan, "sm_90", cfg)
    assert k.report.spill_stores == 0 and k.report.spill_loads == 0, k.report
    a, b, out = descriptors(300, 300, 300, "f32", "f32", "k-contig")
    fused = gett.plan_contraction(a, "mk", b, "kn", out, "mn", op_a=gett.ops.relu)
    with pytest.raises(ValueError, match="producer warpgroup applies ops.*3 stages"):
        render_kernel(fused, KernelConfig("simt", 64, 64, 16, 2, tm=4, tn=4, ws=True))
    render_kernel(fused, KernelConfig("simt", 64, 64, 16, 3, tm=4, tn=4, ws=True))


def test_simt_lanes_along_m_are_a_simt_option_that_reaches_the_kernel():
    """``lanes_m`` puts a warp's lanes along M (kernels/math_simt.cuh, M_LANES): the key says so, other
    math paths refuse it, and the SIMT math is instantiated with it; with lanes along M the threads'
    columns may come in runs even where D's fast side is M (their stores then run along M)."""
    from gett.codegen import simt_column_runs
    from tccg_suite.suite import select
    cfg = KernelConfig("simt", 128, 128, 24, 4, tm=8, tn=8, ws=True, persistent=True, lanes_m=True)
    cfg.validate()
    assert cfg.key() == "simt_128x128x24_s4_t8x8_g8_ws_p_lm"
    with pytest.raises(ValueError, match="lanes along M"):
        KernelConfig("mma16", 64, 64, 32, 3, wm=32, wn=32, lanes_m=True).validate()
    c = select([40])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0)
    for lanes in (False, True):
        src = render_kernel(plan, replace(cfg, lanes_m=lanes), arch="sm_90")[0]
        assert re.search(r"gett::SimtMath<.*, (true|false), %s>" % str(lanes).lower(), src)
        assert simt_column_runs(plan, replace(cfg, lanes_m=lanes), m_fast=True) == lanes


def test_heuristic_f32_tccg_31_48_tiles_compile_without_spills():
    """The f32 TCCG #31-48 tiles of config._d_box_tile (96 x 128, 128 x 96 with 6 x 8 / 8 x 6 a thread,
    lanes along M or N, a producer over several tiles) compile for sm_90 without spills under NVRTC."""
    from tccg_suite.suite import select
    for c in select(range(31, 49)):
        d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
        plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0)
        k = plan.kernel("sm_90")
        assert k.report.spill_stores == 0 and k.report.spill_loads == 0, (c.id, k.config.key(), k.report)


def test_epilogue_moves_vectors_where_c_and_d_are_contiguous():
    """A plain walk along D's stride-1 mode stores 16 bytes at a time; a C laid out differently (or an
    odd extent) keeps it to what both allow."""
    from gett.codegen import epilogue_vector, epilogue_walk
    D = gett.TensorDescriptor

    def vector(c_desc, d_desc, m=256, n=256):
        plan = gett.plan_contraction(D((m, 64), (64, 1), "f16"), "mk", D((64, n), (n, 1), "f16"), "kn",
                                     c_desc, "mn", D=d_desc)
        cfg = default_config(plan)
        m_fast, tx, _ = epilogue_walk(plan, cfg)
        return epilogue_vector(plan, cfg, m_fast, tx)
    row_major = D((256, 256), (256, 1), "f16")
    assert vector(row_major, row_major) == 8
    assert vector(D((256, 256), (1, 256), "f16"), row_major) == 1          # C walks the other way
    f32 = D((256, 256), (256, 1), "f32")
    assert vector(f32, f32) == 4                                           # f32: 16 bytes are 4
    odd = D((256, 250), (250, 1), "f16")
    assert vector(odd, odd, n=250) == 2                                    # 250 = 2 x 125


def test_short_k_kernels_allocate_only_the_stages_they_fill():
    """K = 24 fits one 32-deep tile: a 3-stage kernel allocates one stage, and with C and D in f16 its
    epilogue tile holds f16 values (half the bytes of f32 accumulators). The TU's static_assert checks
    the host's figure against the kernel's own; this checks the figure."""
    from gett.codegen import shared_bytes
    from gett.tiling import tile_plan
    D = gett.TensorDescriptor
    cfg = KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32)

    def smem(k, out):
        plan = gett.plan_contraction(D((4096, k), (k, 1), "f16"), "mk", D((k, 4096), (4096, 1), "f16"), "kn",
                                     D((4096, 4096), (4096, 1), out), "mn")
        tiled = tile_plan(plan, cfg)
        return shared_bytes(tiled, cfg, *gett.codegen.operand_layouts(tiled, cfg))
    offsets = 2 * (128 + 128) * 4
    assert smem(24, "f16") == 128 * (128 + 8) * 2 + offsets        # epilogue tile, f16 (one stage is less)
    assert smem(24, "f32") == 128 * (128 + 4) * 4 + offsets        # epilogue tile, f32
    assert smem(4096, "f16") == 3 * (128 * 40 + 32 * 136) * 2       # three stages of A and B


def test_single_k_tile_kernels_ask_for_more_ctas_per_sm():
    """TCCG #31-48 (K = 24): 64 accumulators a thread or more, so the registers are capped for as many
    CTAs per SM as leave one per accumulator (2 for 384 threads, 3 for 256); longer K and wgmma keep
    one; 256 x 32 tiles (32 accumulators, 256 threads) ask for 2, which holds ops on A and B (#5) to
    128 registers. A capped kernel keeps a few spills (CAPPED_SPILL_BYTES, measured faster); with more,
    it is built without the cap, and then spills nothing."""
    from gett.codegen import ctas_per_sm
    from gett.kernel import CAPPED_SPILL_BYTES, compile_source, kernel_source

    plan_of = tccg_plan
    for i, ctas in ((31, 2), (32, 2), (36, 3), (12, 1), (15, 1)):
        plan = plan_of(i)
        cfg = default_config(plan, "sm_90")
        assert ctas_per_sm(plan, cfg) == ctas, (i, cfg.key())
        if i in (31, 36):
            k = build_kernel(plan, "sm_90", cfg)
            r = k.report
            if f"__launch_bounds__({cfg.threads}, {ctas})" in k.source:
                assert r.registers <= 65536 // (cfg.threads * ctas), r
                assert max(r.spill_stores, r.spill_loads) <= CAPPED_SPILL_BYTES, r
            else:
                assert r.spill_stores == 0 and r.spill_loads == 0, r
                capped = compile_source(kernel_source(plan, "sm_90", cfg), "sm_90").report
                assert max(capped.spill_stores, capped.spill_loads) > CAPPED_SPILL_BYTES, capped
    assert ctas_per_sm(plan_of(6), KernelConfig("mma16", 256, 32, 32, 3, wm=32, wn=32)) == 2   # a fused #6's tile
    leaky = gett.ops.leaky_relu(0.01)
    fused = tccg_plan(5, op_a=leaky, op_b=leaky)
    k = build_kernel(fused, "sm_90", default_config(fused, "sm_90"))
    assert "__launch_bounds__(256, 2)" in k.source and k.report.registers <= 128, k.report
    # no cap beyond the CTAs the shared memory holds: #8's 768 x 32 tile over several tiles, warps of 64
    # rows (64 accumulators a thread), takes 159.5 KB, so one CTA an SM and the registers it needs
    tall = KernelConfig("mma16", 768, 32, 32, 2, wm=64, wn=32, persistent=True)
    assert ctas_per_sm(plan_of(8), tall) == 1
    assert ctas_per_sm(plan_of(8), replace(tall, bm=256, persistent=False)) == 3   # 256 rows: three fit


def test_epilogue_crosses_into_the_other_dimension_after_a_short_run():
    """TCCG #31: D's stride-1 mode (24) is M's first, and N's first mode (b·c) continues D
    contiguously: the walk takes 24 rows, then 128 columns. #32: D's run is in N and its continuation
    b (16) in M, which the planner therefore orders by D (b first, ahead of A's stride-1 modes), so
    the walk takes 24 columns, then 16 rows. #33's run (384) is longer than the tile: a plain walk."""
    from gett.codegen import epilogue_cross, epilogue_walk
    from gett.tiling import tile_plan

    def cross(i):
        plan = tccg_plan(i)
        cfg = default_config(plan, "sm_90")
        tiled = tile_plan(plan, cfg)
        return epilogue_cross(tiled, cfg, *epilogue_walk(tiled, cfg)[:2])
    assert cross(31) == (24, 128)
    assert cross(32) == (24, 16)
    assert cross(33)[1] == 1


def test_crossing_walks_of_odd_chunk_runs_get_a_pitch_of_one_run():
    """TCCG #32 (f16): the walk reads 24-element runs (three 16-byte chunks) one tile row apart, so the
    epilogue tile's pitch is one run modulo 128 bytes (192 + 24 elements: 432 bytes, 48 past three
    lines), where the usual 16 bytes of pad would put a wavefront's three runs on the same chunks. In
    f32 a run is six chunks and #33's walk does not cross: both keep the 16 bytes."""
    from gett.codegen import epilogue_pad, epilogue_walk
    from gett.tiling import tile_plan
    from tccg_suite.suite import select

    def pad(i, dtype):
        c = select([i])[0]
        d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), dtype) for t in "ABC"}
        plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"))
        cfg = default_config(plan, "sm_90")
        tiled = tile_plan(plan, cfg)
        m_fast, tx, _ = epilogue_walk(tiled, cfg)
        return epilogue_pad(tiled, cfg, m_fast, tx), (cfg.bm if m_fast else cfg.bn)
    p, fast = pad(32, "f16")
    assert p == 24 and (fast + p) * 2 % 128 == 48
    assert pad(32, "f32")[0] == 4 and pad(33, "f16")[0] == 8


def test_box_walks_move_vectors_along_the_box_second_side():
    """TCCG #3 and #6: A's and D's stride-1 modes both lie in M, so M is tiled in boxes whose second
    side is D's stride-1 mode; the epilogue moves 8 f16 elements of C and D at a time along it (they
    are contiguous there in both), and scalars where C is laid out otherwise."""
    from gett.codegen import epilogue_vector, epilogue_walk
    from gett.tiling import tile_plan
    from tccg_suite.suite import select

    def walk(i, c_strides=False):
        c = select([i])[0]
        d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
        out = d["C"]
        if c_strides:   # C row-major: its stride-1 mode is the last one, not D's
            d["C"] = gett.TensorDescriptor(out.shape, tuple(int(np.prod(out.shape[k + 1:]))
                                                            for k in range(len(out.shape))), "f16")
        plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), D=out,
                                     beta=1.0)
        cfg = default_config(plan, "sm_90")
        tiled = tile_plan(plan, cfg)
        m_fast, tx, ty = epilogue_walk(tiled, cfg)
        return tx, ty, epilogue_vector(tiled, cfg, m_fast, tx)
    for i in (3, 6):
        tx, ty, v = walk(i)
        assert tx > 1 and ty % 8 == 0 and v == 8
    assert walk(3, c_strides=True)[2] == 1


@pytest.mark.parametrize("tccg, run", [(3, 4), (4, 4), (6, 1), (7, 4), (8, 4), (1, 1), (2, 1)])
def test_box_walks_store_a_lanes_rows_in_runs(tccg, run):
    """In a box walk whose first side is 8 rows (f16 #3/#4: 8 x 72 boxes), a lane's fragment rows that far
    apart are neighbours in the epilogue tile, so it stores 4 of them at once (kernels/gett.cuh kBoxRun);
    so do #7/#8's entries (16 x 48 boxes, warps of 64 rows: rows 16 apart); #6's warps of 32 rows would
    make runs of 2 (4 bytes: measured no faster), #1's 12-row side none, and #2's plain walk keeps single
    stores. The generated TCCG kernel, with a static_assert on the run appended, compiles."""
    from pathlib import Path
    from gett import nvrtc
    from gett.kernel import kernel_source
    plan = tccg_plan(tccg, beta=0.0, device_arch="sm_90")
    source = kernel_source(plan, "sm_90").source + f'\nstatic_assert(Kernel::kBoxRun == {run}, "run");\n'
    kernels = str(Path(__file__).resolve().parents[1] / "kernels")
    assert nvrtc.compile_ptx(source, arch="sm_90", include_dirs=[kernels])


@pytest.mark.parametrize("k, m_fast, runs", [(24, True, "false"), (24, False, "true"), (4096, True, "true")])
def test_simt_column_runs_only_where_the_epilogue_stores_stay_cheap(k, m_fast, runs):
    # f32 SIMT, B row-contiguous (16-byte reads along its columns); D's stride-1 mode in M or in N
    D = gett.TensorDescriptor
    m, n = 2048, 2048
    a, b = D((m, k), (k, 1), "f32"), D((k, n), (n, 1), "f32")
    c = D((m, n), (1, m) if m_fast else (n, 1), "f32")
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn")
    cfg = default_config(plan, "sm_90")
    assert cfg.math == "simt"
    source = render_kernel(plan, cfg)[0]
    assert f"{cfg.tm}, {cfg.tn}, {runs}, false>;" in source   # lanes along N (no lanes_m)


@pytest.mark.parametrize("tccg,cfg", [
    (1, KernelConfig("mma16", 384, 32, 32, 3, wm=32, wn=32, persistent=True)),   # 10 K tiles of B stay
    (5, KernelConfig("mma16", 256, 32, 80, 2, wm=32, wn=32, persistent=True)),   # A K-major, one K tile
])
def test_a_tile_copied_asynchronously_runs_in_ctas_over_several_tiles(tccg, cfg):
    """A's tile need not be a TMA box for CTAs over several tiles (kernels/gett.cuh run_tiles): its rows are
    found again at each tile's first K tile. B's K tiles are copied once and stay, so only A's stages grow
    with the depth; NVRTC compiles the kernel without spills."""
    from gett.tiling import tile_plan
    plan = tccg_plan(tccg)
    src, smem, _, tma = render_kernel(tile_plan(plan, cfg), cfg, arch="sm_90")
    assert tma is None and "gett::TileLoader<Problem::TA" in src
    assert "true>;" in src.split("using Kernel = ")[1].split("\n")[0]   # PERSIST
    deeper = replace(cfg, stages=cfg.stages + 1)
    a_stage = (cfg.bm + 8) * cfg.bk * 2 if tccg == 1 else cfg.bm * (cfg.bk + 8) * 2   # padded rows
    assert render_kernel(tile_plan(plan, deeper), deeper, arch="sm_90")[1] == smem + a_stage
    kernel = build_kernel(plan, "sm_90", cfg)
    assert kernel.shared_bytes == smem and kernel.report.spill_stores == 0
    # an op on A would be applied by a loader already set to a later tile's rows: refused, and the
    # heuristic keeps one tile a CTA
    fused = tccg_plan(tccg, op_a=lambda x: 2 * x)
    with pytest.raises(ValueError, match="cp.async with an op"):
        render_kernel(tile_plan(fused, cfg), cfg, arch="sm_90")
    assert not default_config(fused, "sm_90").persistent


def padded_rows(shape, dtype, pad=8):
    """A row-major descriptor of ``shape`` whose rows start ``pad``-element multiples apart (an odd last
    extent in a padded buffer)."""
    strides, step = [], 1
    for i, e in enumerate(reversed(shape)):
        strides.append(step)
        step *= -(-e // pad) * pad if i == 0 else e
    return gett.TensorDescriptor(shape, tuple(reversed(strides)), dtype)


@pytest.mark.parametrize("a_modes,b_modes", [("mk", "kn"), ("km", "nk")])
def test_odd_extents_with_aligned_rows_load_clipped_vectors(a_modes, b_modes):
    """An odd extent along the stride-1 mode (rows padded to 16 bytes) still loads 16-byte vectors, the last
    one of each run clipped at the operand's end (cp.async's src-size), K- and row-contiguous alike; the
    heuristic then takes the wgmma path (TMA), and a loader with clipped vectors compiles. Not where the
    operand has an op (op(0) would fill the clipped tail): one element at a time there."""
    ext = {"m": 1001, "n": 263, "k": 777}
    shape = lambda modes: tuple(ext[x] for x in modes)
    a, b = padded_rows(shape(a_modes), "f16"), padded_rows(shape(b_modes), "f16")
    c = gett.TensorDescriptor((1001, 263), (263, 1), "f32")
    plan = gett.plan_contraction(a, a_modes, b, b_modes, c, "mn")
    la, lb = operand_layout(plan, "A", "M", 128, 64), operand_layout(plan, "B", "N", 128, 64)
    assert (la.vector, la.partial, la.is_async, la.row_contig) == (8, True, True, a_modes == "km")
    assert (lb.vector, lb.partial, lb.is_async, lb.row_contig) == (8, True, True, b_modes == "kn")
    assert plan.staging == () and plan.kernel("sm_90").config.math == "wgmma" and plan.kernel("sm_90").tma
    k = build_kernel(plan, "sm_90", KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32))
    assert k.source.count("gett::TileLoader<") == 2 and k.source.count(", true>;") == 2   # both loaders clip
    assert k.report.spill_stores == 0
    with_op = gett.plan_contraction(a, a_modes, b, b_modes, c, "mn", op_a=lambda x: 2 * x)
    assert operand_layout(with_op, "A", "M", 128, 64).vector == 1
    assert operand_layout(with_op, "B", "N", 128, 64).partial


def test_vectors_are_clipped_only_at_the_operand_end():
    """Where the stride-1 mode shares its group with another mode, a vector would cross into the next run
    mid-tile: the width stays a divisor of the run (here 1001 x 3 rows of M: scalars)."""
    D = gett.TensorDescriptor
    a = D((1001, 3, 64), (1, 1008, 3024), "f16")     # (a, b) together are M, k
    b, d = D((64, 128), (1, 64), "f16"), D((1001, 3, 128), (1, 1001, 3003), "f32")
    plan = gett.plan_contraction(a, "abk", b, "kn", d, "abn")
    lay = operand_layout(plan, "A", "M", 128, 64)
    assert not lay.partial and lay.vector == 1


def test_layouts_of_an_operand_with_batch_modes_only():
    """An operand with neither M nor K modes (only batch modes) loads single elements, unclipped."""
    D = gett.TensorDescriptor
    plan = gett.plan_contraction(D((64,), (1,), "f16"), "b", D((64, 32), (32, 1), "f16"), "bn",
                                 D((64, 32), (32, 1), "f32"), "bn")
    lay = operand_layout(plan, "A", "M", 128, 32)
    assert (lay.vector, lay.partial) == (1, False)
