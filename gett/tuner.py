"""Autotuning: time candidate kernel configurations of one plan on the GPU and record the fastest.

:func:`tune` compiles the candidates in parallel processes (kernels land in the disk cache, so later
builds are cache hits), times each on the current GPU with CUDA events on random, never-zero inputs laid
out as the plan's descriptors say, discards any whose result differs from the heuristic's, and stores the
winner with :func:`gett.plan_db.record`, where :func:`gett.kernel.build_kernel` finds it from then on.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import math
import multiprocessing
import os
import statistics
import threading
import time
import warnings
from itertools import product

import numpy as np

from . import plan_db
from .config import (DOT_MAX_SPLIT, DOT_THREADS, TARGET_CTAS, WGMMA_N, WGMMA_WIDE_N, KernelConfig, default_config,
                     fit_tile, gemm_config, has_wgmma, math_path, output_tiles, split_k_for)
from .errors import DeviceError

__all__ = ["DEFAULT_BUDGET", "autotune", "candidate_configs", "tune"]

DEFAULT_BUDGET = 20.0    # seconds, for autotune=True
MAX_CANDIDATES = 32
RUNS, WARMUP = 10, 3


# Candidates ------------------------------------------------------------------------------------------------
def _tile_sizes(extent: int, path: str) -> list:
    """Tile sizes up to the smallest one covering ``extent``: bigger tiles would only hold padding."""
    sizes = (32, 64, 128, 256) if path in ("mma16", "tf32", "3xtf32") else (32, 64, 128)
    cover = next((s for s in sizes if s >= extent), sizes[-1])
    return [s for s in sizes if s <= cover]


def _thread_shapes(path: str, bm: int, bn: int) -> list:
    """Warp tiles (tensor-core paths) or thread tiles (SIMT) giving 1 to 8 warps for a bm x bn tile."""
    if path == "simt":
        return [{"tm": bm // d, "tn": bn // d} for d in (8, 16) if bm >= d and bn >= d]
    return [{"wm": wm, "wn": wn} for wm, wn in product((32, 64), (32, 64))
            if wm <= bm and wn <= bn and (bm // wm) * (bn // wn) <= 8]


def _closeness(cfg: KernelConfig, base: KernelConfig) -> tuple:
    """Order candidates nearest the heuristic first, so a short budget times the likeliest ones. Another
    math path counts as one step (wgmma has no warp tile to compare: without this, log2(1/32) twice
    put every wgmma tile behind all mma.sync ones, and #9's best, a wgmma tile, was never timed)."""
    def log2(a, b):
        return abs(math.log2(max(a, 1) / max(b, 1)))
    if (cfg.wm or cfg.tm) and (base.wm or base.tm):
        shape = log2(cfg.wm or cfg.tm, base.wm or base.tm) + log2(cfg.wn or cfg.tn, base.wn or base.tn)
    else:
        shape = float(cfg.math != base.math)
    return (log2(cfg.bm, base.bm) + log2(cfg.bn, base.bn) + log2(cfg.bk, base.bk)
            + abs(cfg.stages - base.stages) + shape + log2(cfg.split_k, base.split_k)
            + 0.5 * (cfg.ws != base.ws) + 0.5 * (cfg.swap != base.swap) + 0.5 * (cfg.persistent != base.persistent)
            + 0.5 * (cfg.lanes_m != base.lanes_m) + 0.5 * (cfg.resident != base.resident)
            + 0.5 * (cfg.pingpong != base.pingpong), cfg.key())


def _valid(cfg: KernelConfig) -> bool:
    try:
        cfg.validate()
    except ValueError:
        return False
    return True


def _wgmma_configs(plan, arch: str) -> list:
    """Warpgroup-MMA tiles (sm_90, 16-bit data): 64 or 128 rows, 64 to 256 columns, 3 to 5 stages, with
    and without a producer warpgroup (ws), and a producer over several tiles (persistent) where K is not
    split, also with A's or B's tile resident (one batch), and those of 128 rows with the math warpgroups
    taking tiles in turn (pingpong, up to 160 columns); 192 rows of 192 to 240 columns and 128 rows of
    the wide widths (valid with a producer loading by TMA only); for M up to 128 also swapped ones (M the
    instruction's width, the smallest that covers it, over 64 to 256 rows of N)."""
    if not has_wgmma(arch) or math_path(plan) != "mma16":
        return []
    shapes = [(bm, bn, False) for bm, bn in product((64, 128), WGMMA_N)]
    shapes += [(192, bn, False) for bn in (192, 216, 224, 240)] + [(128, bn, False) for bn in WGMMA_WIDE_N]
    if plan.m <= 128:
        shapes += [(fit_tile(plan.m, WGMMA_N), bn, True) for bn in (64, 128, 256)]
    configs = [dataclasses.replace(cfg, split_k=split_k_for(plan, cfg))
               for (bm, bn, swap), stages, ws in product(shapes, (3, 4, 5), (False, True))
               for cfg in [KernelConfig("wgmma", bm, bn, 64, stages, ws=ws, swap=swap)] if _valid(cfg)]
    persistent = [dataclasses.replace(cfg, persistent=True) for cfg in configs if cfg.ws and cfg.split_k == 1]
    resident = [dataclasses.replace(cfg, resident=r) for cfg in persistent for r in "ab"
                if not cfg.swap and plan.batch == 1]
    in_turn = [dataclasses.replace(cfg, pingpong=True) for cfg in persistent + resident if cfg.bm == 128]
    return configs + persistent + resident + [cfg for cfg in in_turn if _valid(cfg)]


def _fits(plan, arch: str, cfg: KernelConfig) -> bool:
    """Whether ``cfg``'s shared memory fits ``arch`` as it is (build_kernel would lower its stages)."""
    from .codegen import render_kernel
    from .kernel import _MAX_SHARED, arch_number
    from .tiling import tile_plan
    try:   # for ``arch``: a persistent mma.sync tile needs A's TMA box, which only sm_90 has
        smem = render_kernel(tile_plan(plan, cfg), cfg, arch=arch)[1]
    except ValueError:   # e.g. a producer warpgroup for operands that can't be copied asynchronously
        return False
    return smem <= _MAX_SHARED.get(arch_number(arch), 99 * 1024)


TALL_ROWS = (256, 288, 384, 576, 768)   # rows of the tall memory-bound mma.sync tile (N <= 32) the tuner tries


def candidate_configs(plan, arch: str) -> list:
    """The heuristic's configuration first, then up to MAX_CANDIDATES - 1 others nearest it: on sm_90 the
    wgmma tiles (16-bit data); around the heuristic's mma.sync/SIMT choice, its own tile size and those up to
    the one covering each GEMM extent, 1 to 8 warps (or 64/256 SIMT threads, a warp's lanes along N or M),
    half/double the K depth, one stage fewer or more, split-K by the heuristic's rule, and split-K of 1 to 32
    for that tile when the output tiles are too few to fill the GPU; where the heuristic gives the dot kernel,
    its neighbours too (half and twice its threads and loads in flight, twice its split). All pass validate()
    and fit ``arch``'s shared memory."""
    base = default_config(plan, arch)
    sync = gemm_config(plan)   # the centre of the mma.sync / SIMT neighbourhood
    grid = set(_wgmma_configs(plan, arch)) | {sync}
    sizes = {(sync.bm, sync.bn), *product(_tile_sizes(plan.m, sync.math), _tile_sizes(plan.n, sync.math))}
    for bm, bn in sizes:
        for bk, stages in product((sync.bk // 2, sync.bk, sync.bk * 2), (sync.stages - 1, sync.stages,
                                                                        sync.stages + 1)):
            for shape, lanes_m in product(_thread_shapes(sync.math, bm, bn),
                                          (False, True) if sync.math == "simt" else (False,)):
                cfg = dataclasses.replace(sync, bm=bm, bn=bn, bk=bk, stages=stages, split_k=1, lanes_m=lanes_m,
                                          **shape)
                if _valid(cfg):
                    grid.add(dataclasses.replace(cfg, split_k=split_k_for(plan, cfg)))
    if sync.math == "mma16" and sync.bm in TALL_ROWS and sync.bn == 32:
        # the tall memory-bound tile (N <= 32): 288, 384 and 576 rows (9, 12 and 18 warps) give box-tiled M
        # modes of extents like 72 or 312 longer runs than any power of two can. H100 (tile_sweep,
        # 2026-11-22): #1 ``abc-bda-dc`` 48.4 -> 39.0 us with 384 rows, #4 ``abcd-deca-be`` 84.0 -> 75.4 with
        # 288 (but 112 -> 143 with leaky ReLU on A, B and C), 71.7 with 576 (the heuristic's, _tall_tile)
        tall = [dataclasses.replace(sync, bm=bm, bk=bk, split_k=1) for bm in TALL_ROWS
                for bk in sorted({32, 64, sync.bk}) if bm != sync.bm]
        grid.update(tall)
        if has_wgmma(arch):
            # sm_90: CTAs over several tiles where A's tile is one TMA box (f16 #6-8's 768-row entries; 768
            # rows hold 16 x 48 boxes, D's whole 48-element mode: gett.tiling.box_sides)
            grid.update(dataclasses.replace(c, persistent=True, stages=s) for c in tall + [sync] for s in (2, 3))
    if base.math == "dot":   # half and twice its threads and loads in flight, twice its split
        threads = {t for t in (base.bk // 2, base.bk, 2 * base.bk) if t in DOT_THREADS}
        stages = {max(1, base.stages // 2), base.stages, 2 * base.stages}
        splits = {base.split_k, min(2 * base.split_k, DOT_MAX_SPLIT)} if base.split_k > 1 else {1}
        grid.update(c for t, s, k in product(threads, stages, splits)
                    for c in [dataclasses.replace(base, bk=t, stages=s, split_k=k)] if _valid(c))
    tiles = output_tiles(plan, sync)
    if tiles < TARGET_CTAS // 2:
        grid.update(dataclasses.replace(sync, split_k=s) for s in (1, 2, 4, 8, 16, 32)
                    if s <= max(1, -(-plan.k // sync.bk) // 2))
    grid.discard(base)
    out = [base]
    for cfg in sorted(grid, key=lambda c: _closeness(c, base)):
        if len(out) == MAX_CANDIDATES:
            break
        if _fits(plan, arch, cfg):
            out.append(cfg)
    return out


# Compiling in parallel -------------------------------------------------------------------------------------
def _compile_job(source: str, arch: str, name: str, include_dirs: list) -> str:
    """Worker: compile one rendered kernel into the disk cache (strings in, nothing of the plan)."""
    from gett.kernel_cache import compile_cached
    compile_cached(source, arch=arch, name=name, include_dirs=include_dirs)
    return name


def _start_builds(plan, arch: str, configs: list) -> tuple:
    """(executor, {future: config}) compiling ``configs`` into the disk cache in spawned processes (the
    parent renders the sources: plans don't pickle, and forking a process that holds a CUDA context can
    deadlock), or in threads where no process can start."""
    from .kernel import compile_arch, kernel_source, kernels_dir
    jobs = []
    for cfg in configs:
        try:
            jobs.append((kernel_source(plan, arch, cfg), cfg))
        except (ValueError, DeviceError):   # a candidate that can't be rendered here is no choice
            continue
    workers = max(1, min(len(jobs), (os.cpu_count() or 1) - 2))   # spare cores keep the timing loop prompt
    include = [str(kernels_dir())]
    for make in (lambda: cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")),
                 lambda: cf.ThreadPoolExecutor(workers)):   # NVRTC runs in ctypes calls, which release the GIL
        pool = None
        try:
            pool = make()
            return pool, {pool.submit(_compile_job, ks.source, compile_arch(arch, cfg), ks.name, include): cfg
                          for ks, cfg in jobs}
        except (OSError, ValueError, RuntimeError, ImportError):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
    raise RuntimeError("no worker could be started to compile candidates")


# Buffers and timing ----------------------------------------------------------------------------------------
def _storage(dtype) -> np.dtype:
    return dtype.numpy if dtype.numpy_name else np.dtype(np.uint16)   # bf16 as its bits


def _random_values(dtype, n: int, rng) -> np.ndarray:
    """``n`` values of ``dtype`` away from zero (1 to 3 for integers, 0.5 to 1.5 in magnitude otherwise).
    Floating-point signs are random: with one sign, sums over a long K overflow 16-bit outputs (K =
    92352 of TCCG #13 gave inf everywhere, and a candidate's result then matched any other)."""
    if dtype.kind == "i":
        return rng.integers(1, 4, n).astype(dtype.numpy)
    x = rng.uniform(0.5, 1.5, n) * rng.choice((-1.0, 1.0), n)
    if dtype.kind == "c":
        return (x + 1j * rng.uniform(0.5, 1.5, n)).astype(dtype.numpy)
    if dtype.name == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(dtype.numpy)


class _Buffer:
    """Device memory holding one tensor with its descriptor's strides, its element (0, ..., 0) at
    ``pointer`` aligned as the descriptor promises."""

    def __init__(self, desc, rng):
        import cupy
        self.desc, itemsize = desc, desc.dtype.itemsize
        lo, hi = desc.offset_range
        step = max(1, desc.alignment // itemsize)
        self.origin = -lo + lo % step   # CuPy's allocations are 256-byte aligned
        self.data = cupy.asarray(_random_values(desc.dtype, self.origin + hi + 1, rng))
        self.pointer = self.data.data.ptr + self.origin * itemsize

    def poison(self) -> None:
        """Fill with values no kernel computes, so elements a kernel leaves unwritten are caught."""
        if self.desc.dtype.name == "bf16":
            self.data.fill(0x7FC0)   # NaN
        else:
            self.data.fill(np.nan if self.desc.dtype.kind != "i" else np.iinfo(self.data.dtype).min)

    def get(self) -> np.ndarray:
        """The tensor's elements on the host (bf16 as float32)."""
        host = self.data.get()
        if self.desc.dtype.name == "bf16":
            host = (host.astype(np.uint32) << 16).view(np.float32)
        view = np.lib.stride_tricks.as_strided(host[self.origin:], self.desc.shape,
                                               [s * host.itemsize for s in self.desc.strides])
        return np.array(view)


def _median_ms(run, evict) -> float:
    """Median milliseconds of RUNS calls of ``run()`` after WARMUP, each between two CUDA events and after
    an untimed ``evict()``, so no call finds the call before's data in L2, as a program's next call rarely
    does and as the TCCG runner times (its buffers rotate). H100, ``benchmarks/tune_tccg.py --budget 3``,
    session 14: timed hot, tuning picked #4 256 x 32 s4 (68.8 us in the runner against the heuristic's
    66.5) and #39 128 x 128 x 64 w64 x 64 (39.1 against 36.9); evicting, none of the 48 came out slower
    than the heuristic. (That run's #19, 58.3 us, was slow for another reason: its configuration ran
    40.1 us in the next.)"""
    import cupy
    for _ in range(WARMUP):
        run()
    stream = cupy.cuda.get_current_stream()
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(RUNS)]
    for start, end in events:
        evict()
        start.record(stream)
        run()
        end.record(stream)
    events[-1][1].synchronize()
    return statistics.median(cupy.cuda.get_elapsed_time(s, e) for s, e in events)


def _tolerance(plan) -> float:
    """Largest relative (Frobenius) difference from the heuristic's result that still counts as equal:
    the two differ only in summation order and, for narrow outputs, in one rounding."""
    d = plan.descriptors["D"].dtype
    if d.kind == "i":
        return 0.0
    eps = 2.0 ** -7 if d.name == "bf16" else float(np.finfo(_storage(d)).eps)
    return max(8 * eps, 1e-4)


def _mismatch(x: np.ndarray, ref: np.ndarray, tol: float) -> bool:
    """True unless ``x`` has non-finite values where ``ref`` has and is within ``tol`` of it elsewhere."""
    finite = np.isfinite(ref)
    if not np.array_equal(finite, np.isfinite(x)):
        return True
    diff = np.linalg.norm((x - ref)[finite].astype(np.complex128))
    return not diff <= tol * np.linalg.norm(ref[finite].astype(np.complex128))


# Tuning ----------------------------------------------------------------------------------------------------
def _gpu_arch() -> str:
    from .kernel import current_arch
    try:
        return current_arch()
    except DeviceError as e:
        reason = str(e).split(";")[0]   # drop current_arch's advice on compiling ahead
        raise DeviceError(f"tuning times kernels on a GPU, and none is available: {reason}") from None


def tune(plan, budget_seconds: float, candidates=None) -> tuple:
    """Find the fastest configuration of ``plan`` on the current GPU within about ``budget_seconds``;
    returns ``(config, median ms)`` and records it in the user plan database.

    ``candidates`` (default :func:`candidate_configs`) are tried after the heuristic's configuration, which
    is always timed and is the reference: a candidate whose result differs from it is discarded, as are
    candidates that fail validate(), don't fit shared memory, or fail to compile. Raises DeviceError
    without a GPU and ValueError for an empty plan (no kernel to tune). A staged plan tunes the kernel
    of its contraction over the staged copies."""
    from .kernel import build_kernel
    plan = plan.staged_plan or plan
    arch = _gpu_arch()
    import cupy  # present: _gpu_arch found a device through it
    if plan.is_empty:
        raise ValueError("an extent is 0: the plan runs no kernel, there is nothing to tune")
    deadline = time.monotonic() + budget_seconds
    base = default_config(plan, arch)
    if candidates is None:
        configs = candidate_configs(plan, arch)[1:]
    else:
        configs = [c for c in dict.fromkeys(candidates) if c != base and _valid(c) and _fits(plan, arch, c)]
    pool, futures = _start_builds(plan, arch, configs)
    try:
        bench = _Bench(plan, arch)
        best = bench.measure(build_kernel(plan, arch, base), reference=True)
        for future in cf.as_completed(futures, timeout=max(0.0, deadline - time.monotonic())):
            if future.exception() is not None:   # a candidate that doesn't compile is simply not a choice
                continue
            try:
                result = bench.measure(build_kernel(plan, arch, futures[future]))   # a disk-cache hit now
            except cupy.cuda.driver.CUDADriverError:   # nor is one the driver won't launch (e.g. out of resources)
                continue
            if result is not None and result[1] < best[1]:
                best = result
            if time.monotonic() > deadline:
                break
    except cf.TimeoutError:
        pass   # the budget ran out while candidates were still compiling
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    try:
        plan_db.record(plan, arch, *best)
    except OSError as e:
        warnings.warn(f"gett: could not record the tuned configuration: {e}")
    return best


class _Bench:
    """Random inputs and an output laid out like ``plan``'s descriptors, and the reference result."""

    def __init__(self, plan, arch: str):
        rng = np.random.default_rng(0)
        self.plan, self.arch = plan, arch
        self.buffers = {t: _Buffer(plan.descriptors[t], rng) for t in "ABCD"}
        # beta: 0 where the plan was made for beta = 0 (C is never read), else 1 (signature: see plan.py)
        self.beta = 0.0 if plan.beta_hint is False else 1.0
        self.reference, self.tol = None, _tolerance(plan)
        import cupy
        # written over before each timed run: twice L2, so none of the run before's lines are left
        self.evictor = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=np.uint8)

    def measure(self, kernel, reference: bool = False):
        """(config, median ms) of ``kernel``, or None when its result differs from the reference."""
        import cupy

        from .launch import Launcher
        candidate = dataclasses.replace(
            self.plan, signature=self.plan.signature + (("tuning", kernel.config.key()),),
            config_override=kernel.config, device_arch=self.arch, _compiled={self.arch: kernel},
            _lock=threading.Lock())
        launch = Launcher(candidate, cupy.cuda.Device().id, "cupy")
        b = self.buffers
        args = (b["A"].pointer, b["B"].pointer, b["C"].pointer, b["D"].pointer, 1.0, self.beta)
        b["D"].poison()
        launch(*args)
        result = b["D"].get()
        if reference:
            self.reference = result
        elif _mismatch(result, self.reference, self.tol):
            return None
        return kernel.config, _median_ms(lambda: launch(*args), lambda: self.evictor.fill(0))


def autotune(plan, budget) -> None:
    """``plan_contraction(..., autotune=budget)``: tune ``plan`` for ``budget`` seconds (True: DEFAULT_BUDGET)
    unless it has an explicit config or an exact entry in the plan database already; without a GPU, warn
    and leave the plan to the heuristic. A plan this process already compiled keeps its kernel: the tuned
    configuration applies to plans made afterwards (see gett.clear_plan_cache)."""
    if budget is None or budget is False or plan.config_override is not None or plan.is_empty:
        return
    plan = plan.staged_plan or plan
    try:
        arch = _gpu_arch()
    except DeviceError as e:
        warnings.warn(f"gett: autotune skipped: {e}", stacklevel=3)
        return
    from .kernel import current_model
    if plan_db.lookup(plan, arch, exact=True, model=current_model(arch)) is None:
        tune(plan, DEFAULT_BUDGET if budget is True else float(budget))
