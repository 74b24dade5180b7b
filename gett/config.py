"""Kernel configurations: the tunable shape of a generated kernel, and the default heuristic.

A :class:`KernelConfig` fixes the math path, the CTA tile (BM x BN x BK), how warps or threads split
it, the pipeline depth and the rasterisation group. Everything else a kernel needs (vector widths,
shared-memory layouts, index tables) follows from the plan in :mod:`gett.codegen`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

MATH_PATHS = ("mma16", "wgmma", "tf32", "3xtf32", "f64mma", "simt", "dot")
PRODUCER_THREADS = 128   # the producer warpgroup of a warp-specialised (ws) kernel
# the wgmma tile widths (kernels/math_wgmma.cuh; 192-row tiles issue theirs in parts of at most 128)
WGMMA_N = (64, 72, 80, 96, 128, 160, 192, 216, 224, 240, 256)
# the dot kernel (kernels/dot.cuh): output tile sides, outputs a thread sums, threads a CTA, vectors in flight
DOT_TILE = (1, 2, 4, 8, 16)
DOT_OUTPUTS = 16
DOT_THREADS = (1, 32, 64, 128, 256, 512)
DOT_LOADS = 16
DOT_CTA_THREADS = 128   # a dot CTA's fewest threads: tiles of a short K share one (65536 CTAs of 32 threads ran
#                         f16 'ij,ij->i' over 65536 x 256 at 1.2 TB/s on the H100)
DOT_MIN_K = 256      # the dot kernel's shortest K: below it a tile's threads would mostly idle
DOT_MAX_SPLIT = 128  # CTAs sharing one output's K: reduce_splits adds them up one output a thread
GEMV_ROWS = 4   # a matrix-vector product's dot tile: rows over M
# wider tiles of two warpgroups of rows, issued as two instructions (224 + 72): one column of tiles for
# N = 296 (TCCG #13/#14), the math warpgroups taking the producer's spare registers
WGMMA_WIDE_N = (296,)


@dataclass(frozen=True)
class KernelConfig:
    """``math``: one of MATH_PATHS. ``wm``/``wn``: warp tile (mma.sync paths); ``tm``/``tn``:
    per-thread tile (SIMT path). ``threads`` follows: warps = (bm/wm)·(bn/wn), or (bm/tm)·(bn/tn);
    ``dot`` (a few outputs over a long K, kernels/dot.cuh): tiles of bm × bn outputs, ``bk`` threads sharing out
    each tile's K, each one vector of K a step, ``stages`` steps of loads in flight a thread, and a CTA of at
    least DOT_CTA_THREADS threads over as many tiles as that takes (``tiles_per_cta``);
    ``wgmma`` (sm_90a, 16-bit data) gives each warpgroup of 128 threads 64 rows × bn; with ``swap``, 64
    columns × bm: the warpgroups multiply B's tile by A's, so a short M (72) is the instruction's width
    rather than a 128-row tile half empty."""
    math: str
    bm: int
    bn: int
    bk: int
    stages: int
    wm: int = 0
    wn: int = 0
    tm: int = 0
    tn: int = 0
    group_m: int = 8
    split_k: int = 1     # CTAs sharing one output tile's K range (partials reduced deterministically)
    ws: bool = False     # wgmma or simt: a producer warpgroup loads, the others only compute (warp specialisation)
    swap: bool = False   # wgmma only: B's tile is the instruction's rows (64 a warpgroup), A's its width
    persistent: bool = False   # a few CTAs per SM, each over several tiles: mma16 (A a TMA box tile) or ws
    lanes_m: bool = False   # simt only: a warp's lanes run along M, not N (epilogue stores where D is M-fast)
    resident: str = ""   # "a" or "b", wgmma producer over several tiles: that operand's tile (all of K) stays in
    #                      shared memory, a CTA's tiles sharing its row (column) of tiles
    pingpong: bool = False   # wgmma producer over several 128-row tiles: the two math warpgroups take whole tiles
    #                          in turn, one storing a tile while the other multiplies the next

    @property
    def min_stages(self) -> int:
        """wgmma keeps one tile's MMAs in flight, so it needs a stage more than the others to load into; the
        dot kernel's stages are loads in flight, of which one will do."""
        return 3 if self.math == "wgmma" else 1 if self.math == "dot" else 2

    @property
    def math_threads(self) -> int:
        """The threads that compute the tile (and store it)."""
        if self.math == "wgmma":
            return 128 * ((self.bn if self.swap else self.bm) // 64)
        if self.math == "simt":
            return (self.bm // self.tm) * (self.bn // self.tn)
        if self.math == "dot":
            return max(self.bk, DOT_CTA_THREADS)
        return 32 * (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def tiles_per_cta(self) -> int:
        """Output tiles one CTA computes at a time: several only for the dot kernel's short K (few threads a tile)."""
        return self.math_threads // self.bk if self.math == "dot" else 1

    @property
    def three_math_warpgroups(self) -> bool:
        """A 192-row tile with a producer (kernels/gett.cuh, Gett::kShareRegisters): the math warpgroups
        take most of the producer's registers, so it must load by TMA."""
        return self.ws and self.math == "wgmma" and self.math_threads == 384

    @property
    def shares_registers(self) -> bool:
        """The math warpgroups take most of the producer's registers (kernels/gett.cuh,
        Gett::kShareRegisters): three of them (192 rows), or two with more than 128 accumulators a thread."""
        return self.three_math_warpgroups or (self.ws and self.math == "wgmma" and not self.swap
                                               and self.bm * self.bn // self.tile_threads > 128)

    @property
    def tile_threads(self) -> int:
        """The threads that hold one tile's accumulators: the math threads, or one warpgroup (``pingpong``)."""
        return 128 if self.pingpong else self.math_threads

    @property
    def load_threads(self) -> int:
        """The threads that copy A and B into shared memory: the producer warpgroup with ``ws``."""
        return PRODUCER_THREADS if self.ws else self.math_threads

    @property
    def threads(self) -> int:
        """Threads per CTA: the math threads, plus the producer warpgroup with ``ws``."""
        return self.math_threads + (PRODUCER_THREADS if self.ws else 0)

    def validate(self) -> None:
        if self.math not in MATH_PATHS:
            raise ValueError(f"unknown math path {self.math!r}; choose from {MATH_PATHS}")
        if self.stages < self.min_stages:
            raise ValueError(f"{self.math} needs at least {self.min_stages} stages, got {self.stages}")
        if self.split_k < 1:
            raise ValueError(f"split_k must be ≥ 1, got {self.split_k}")
        if self.ws and self.math not in ("wgmma", "simt"):
            raise ValueError(f"warp specialisation (ws) needs the wgmma or simt path, not {self.math}")
        if self.swap and self.math != "wgmma":
            raise ValueError(f"swapped operands (swap) need the wgmma path, not {self.math}")
        if self.lanes_m and self.math != "simt":
            raise ValueError(f"lanes along M (lanes_m) need the simt path, not {self.math}")
        if self.resident not in ("", "a", "b"):
            raise ValueError(f"resident must be '', 'a' or 'b', got {self.resident!r}")
        if self.resident and not (self.math == "wgmma" and self.ws and self.persistent and not self.swap):
            raise ValueError(f"a resident {self.resident.upper()} tile (resident) needs a wgmma producer over several "
                             f"tiles (ws, persistent) without swap")
        if self.pingpong and not (self.math == "wgmma" and self.ws and self.persistent and not self.swap
                                  and self.bm == 128 and self.bn <= 160):
            raise ValueError(f"warpgroups taking tiles in turn (pingpong) need a wgmma producer over several tiles "
                             f"(ws, persistent) without swap, 128 rows and at most 160 columns (a warpgroup's "
                             f"accumulators), not {self.key()}")
        if self.persistent and (self.math != "mma16" and not self.ws or self.split_k > 1):
            raise ValueError(f"CTAs over several tiles (persistent) need the mma16 path or a producer warpgroup "
                             f"(ws), without split K, not {self.math}{' ws' if self.ws else ''} with split_k "
                             f"{self.split_k}")
        if self.math == "wgmma":
            # Swapped, the width is M's and short (few accumulators): up to four warpgroups of rows.
            # With a producer, three warpgroups of rows (192), which take most of its registers.
            rows, width, counts = (("bn", "bm", (64, 128, 256)) if self.swap
                                   else ("bm", "bn", (64, 128, 192) if self.ws else (64, 128)))
            wide = not self.swap and self.ws and self.bm == 128 and self.bn in WGMMA_WIDE_N
            if getattr(self, rows) not in counts or getattr(self, width) not in WGMMA_N and not wide or self.bk != 64:
                raise ValueError(f"wgmma tile {self.bm}x{self.bn}x{self.bk}{' (swap)' if self.swap else ''}: "
                                 f"{rows} must be one of {counts} (warpgroups of 64; more spill"
                                 f"{'; 192 with a producer warpgroup, ws' if not self.swap and not self.ws else ''}), "
                                 f"{width} one of {WGMMA_N} (or {WGMMA_WIDE_N} for 128 rows with a producer, "
                                 f"ws), bk 64 (one 128-byte swizzle line of f16)")
            if self.bm == 192 and not self.swap and (self.bn > 240 or 128 < self.bn < 192):
                # issued in parts of 128 columns (WgmmaMath's PART): the rest must be a width of its own
                raise ValueError(f"wgmma tile {self.bm}x{self.bn}: three warpgroups of rows take widths up to "
                                 f"128 or 192-240 (256 spills)")
            if getattr(self, rows) == 64 and getattr(self, width) == 256:   # one warpgroup: 128 accumulators
                raise ValueError(f"wgmma tile {self.bm}x{self.bn}: one warpgroup's 128 accumulators plus the "
                                 f"loads spill; use two ({rows} 128)")
        elif self.math == "dot":
            if self.bm not in DOT_TILE or self.bn not in DOT_TILE or self.bm * self.bn > DOT_OUTPUTS \
                    or self.bk not in DOT_THREADS or self.stages > max(1, DOT_LOADS // (self.bm + self.bn)):
                raise ValueError(f"dot tile {self.bm}x{self.bn}x{self.bk} s{self.stages}: bm and bn one of {DOT_TILE} "
                                 f"with at most {DOT_OUTPUTS} outputs, bk (threads) one of {DOT_THREADS}, stages x "
                                 f"(bm + bn) at most {DOT_LOADS} vectors in flight a thread (or one stage)")
        elif self.math == "simt":
            if self.bm % self.tm or self.bn % self.tn:
                raise ValueError(f"thread tile {self.tm}x{self.tn} does not divide {self.bm}x{self.bn}")
        else:
            step_m, step_n, step_k = {"mma16": (16, 16, 16), "tf32": (16, 8, 8), "3xtf32": (16, 8, 8),
                                      "f64mma": (8, 8, 4)}[self.math]
            if self.bm % self.wm or self.bn % self.wn or self.wm % step_m or self.wn % step_n \
                    or self.bk % step_k:
                raise ValueError(f"tile {self.bm}x{self.bn}x{self.bk} with warp tile {self.wm}x{self.wn} "
                                 f"does not fit the {self.math} instruction shape")
        if not 32 <= self.threads <= 1024 or self.threads % 32:
            raise ValueError(f"configuration gives {self.threads} threads per CTA")

    def key(self) -> str:
        t = {"simt": f"_t{self.tm}x{self.tn}", "wgmma": "", "dot": ""}.get(self.math, f"_w{self.wm}x{self.wn}")
        split = f"_k{self.split_k}" if self.split_k > 1 else ""
        ws = "_ws" if self.ws else ""
        swap = "_swap" if self.swap else ""
        persistent = "_p" if self.persistent else ""
        lanes = "_lm" if self.lanes_m else ""
        resident = f"_r{self.resident}" if self.resident else ""
        pingpong = "_pp" if self.pingpong else ""
        return (f"{self.math}_{self.bm}x{self.bn}x{self.bk}_s{self.stages}{t}_g{self.group_m}{split}{ws}{swap}"
                f"{persistent}{lanes}{resident}{pingpong}")


def math_path(plan) -> str:
    """The instruction family a plan's dtypes, compute type and semiring call for."""
    dtype = plan.descriptors["A"].dtype.name
    if not plan.ops.is_plus_times:
        return "simt"
    if dtype in ("f16", "bf16"):
        return "mma16"
    if plan.compute_type.name in ("tf32", "3xtf32"):
        return plan.compute_type.name
    if dtype == "f64":
        return "f64mma"
    return "simt"


def round_up(x: int, step: int) -> int:
    """``x`` rounded up to a multiple of ``step``."""
    return -(-x // step) * step


def row_tiles(plan, cfg: KernelConfig) -> int:
    """Tiles of ``cfg`` along M: BM rows at a time, where A's rows load in runs of M's first mode
    (gett.tma.m_run) of M with each run padded to whole 64 rows; mirrors gett::Gett::TILES_M."""
    from .tma import m_run   # gett.tma imports this module
    run = m_run(plan, cfg)
    rows = round_up(run, 64) * (plan.m // run) if run else plan.m
    return -(-rows // cfg.bm)


def output_tiles(plan, cfg: KernelConfig) -> int:
    """Output tiles of ``cfg`` over ``plan`` (M tiles · N tiles · batch), before any split of K."""
    return row_tiles(plan, cfg) * -(-plan.n // cfg.bn) * plan.batch


def grid_ctas(plan, cfg: KernelConfig) -> int:
    """CTAs of a launch of ``cfg`` over ``plan`` (before CTAs over several tiles cap them): its output tiles,
    ``tiles_per_cta`` a CTA, times the split of K."""
    return -(-output_tiles(plan, cfg) // cfg.tiles_per_cta) * cfg.split_k


def fit_tile(extent: int, choices) -> int:
    """Smallest tile from ``choices`` (ascending) that covers ``extent``, else the largest."""
    for c in choices:
        if extent <= c:
            return c
    return choices[-1]


def _tiled_layouts(plan, cfg: KernelConfig) -> tuple:
    """(the plan box-tiled for ``cfg``, A's layout, B's layout): how A and B move into shared memory,
    leaving out the staging of an operand for its op (the tile choices below are about the shape and
    strides)."""
    from .codegen import operand_layouts
    from .tiling import tile_plan
    tiled = tile_plan(plan, cfg)
    return (tiled, *operand_layouts(tiled, cfg, stage_ops=False))


def _layouts(plan, cfg: KernelConfig) -> tuple:
    """(A's layout, B's layout) of :func:`_tiled_layouts`."""
    return _tiled_layouts(plan, cfg)[1:]


def _scalar_staging(plan, cfg: KernelConfig) -> int:
    """How many operands of the (box-tiled) plan are loaded one element at a time through registers."""
    return sum(x.vector == 1 and not x.is_async for x in _layouts(plan, cfg))


def _staged(plan, cfg: KernelConfig) -> int:
    """How many operands are staged through registers (scalars, or a box's strided vectors)."""
    return sum(not x.is_async for x in _layouts(plan, cfg))


# Two CTAs on each of an H100's 132 SMs; split-K is used only below half that many output tiles.
TARGET_CTAS = 264
# K below which a wide producer tile for under half the SMs narrows rather than splits K (_producer_tile)
NARROW_K = 3072
# The longest K for which _wide_tile's 128-row tiles run over several tiles a CTA
WIDE_PERSISTENT_K = 1024
WAVE_SMS = 132   # an H100 SXM's SMs, for the wave counts of the heuristic
# The longest K the 576-row mma.sync tiles take (_tall_tile); past it, tall tiles with an op on a load
# take 128 rows (_memory_bound_tile)
TALL_TILE_MAX_K = 128


def split_k_for(plan, cfg: KernelConfig) -> int:
    """How many CTAs should share each output tile's K range: when the output tiles alone can't fill
    the GPU and K is long, split K so that each slice still runs at least 8 K tiles — into at most one
    round of the CTAs the SMs hold at once (WAVE_SMS times ``cfg``'s CTAs an SM, _resident_ctas), so
    that none waits for a second round behind the others. H100 (tile_sweep): #14 ``ab-cad-dcb`` (9 tiles,
    A staged) 151.6 -> 135.6 us as 261 CTAs instead of 270, #19 ``abc-adec-ebd`` (41 tiles) 59.3 -> 53.1
    as 246 instead of 287 (2026-11-22, two CTAs an SM); with a producer warpgroup and 147-160 KB of
    stages (one CTA an SM, session 25) #13 ``ab-acd-dbc`` 128 x 160 s4 78.1 -> 70.3 us as 132 CTAs (k22)
    instead of 264 (k44), k16 79.6, k11 95.1; #19 128 x 80 s6 39.3 -> 36.8 as 123 (k3) instead of 246. A
    producer tile splits for one CTA an SM even where two fit: #19 (B staged) 128 x 80 s4 (106 KB) k3 31.4
    us, k6 (246 CTAs, two an SM) 34.7, k4 36.1, k2 33.4 (session 48)."""
    tiles = output_tiles(plan, cfg)
    k_tiles = -(-plan.k // cfg.bk)
    if tiles >= TARGET_CTAS // 2 or k_tiles < 16:
        return 1
    # a 64-row producer tile (_thin_tile) splits only until half the SMs have a CTA, its stages being deep
    ctas = WAVE_SMS // 2 if cfg.ws and cfg.bm == 64 else WAVE_SMS * (1 if cfg.ws else _resident_ctas(plan, cfg))
    return max(1, min(ctas // tiles, k_tiles // 8, 64))


def _resident_ctas(plan, cfg: KernelConfig) -> int:
    """CTAs of ``cfg`` one SM holds at once as its shared memory allows, 1 or 2 (TARGET_CTAS: registers
    are known only once compiled, and more than two CTAs of a split tile were never measured)."""
    from .codegen import shared_bytes, shared_ctas
    tiled, a, b = _tiled_layouts(plan, cfg)
    return max(1, min(TARGET_CTAS // WAVE_SMS, shared_ctas(shared_bytes(tiled, cfg, a, b))))


def default_config(plan, arch: str | None = None) -> KernelConfig:
    """The heuristic: the dot kernel for a few outputs over a long K (:func:`dot_config`), else tile shape
    from the dtypes, GEMM extents and (when given) the target architecture ("sm_90" opens wgmma), then
    split-K for long, thin work."""
    return dot_config(plan) or gemm_config(plan, arch)


def gemm_config(plan, arch: str | None = None) -> KernelConfig:
    """The heuristic's GEMM tile (any kernel but the dot kernel)."""
    cfg = _tile_config(plan, arch)
    cfg = replace(cfg, split_k=split_k_for(plan, cfg))
    return _persistent_tile(plan, cfg, arch) if cfg.math == "mma16" and cfg.split_k == 1 else cfg


def dot_config(plan) -> KernelConfig | None:
    """The dot kernel (kernels/dot.cuh) where M and N are small enough for every output of a tile to be a
    sum each thread keeps (bm · bn ≤ DOT_OUTPUTS) and K is at least DOT_MIN_K; else None. A GEMM tile has 32
    rows or more, so a dot product (M = N = 1) used one row of each and waited on a few bytes a K step: H100,
    f16 ``i,i->`` over 2^24 elements 2022 us against torch's 71, f32 ``ij,ij->i`` (4096 x 4096) 2281 us
    against 94 (session 49). Threads a tile: up to 256, as many as K's vectors give ``stages`` steps each
    (a CTA of DOT_CTA_THREADS at least, over several tiles where K is short); the loads of ``stages`` steps
    in flight, up to 4, as registers allow (DOT_LOADS); K split until the CTAs reach two an SM (each then
    keeps 16-32 KB of loads in flight), each with 16 steps a thread at least. Where the batch and not K
    is stride-1 in A and B, one thread a tile instead, the batch along a warp's lanes. A matrix-vector product
    (N = 1, K stride-1 in A and B) takes tiles of GEMV_ROWS rows over all of M: H100 f16, row-major, against
    the GEMM tile (session 51, results/gemv_f16_*_session51.txt): 8192 x 8192 54.7 -> 47.6 us (torch.einsum
    49.6), 4096 x 16384 67.6 -> 47.6 (51.9), 1024 x 1024 8.6 -> 4.8 (6.6), 65536 x 512 30.3 -> 25.9 (28.8)."""
    from .codegen import dot_vector
    bm, bn = fit_tile(plan.m, DOT_TILE), fit_tile(plan.n, DOT_TILE)
    vector = dot_vector(plan)
    gemv = plan.n == 1 and plan.m > bm and vector > 1
    if gemv:
        bm = GEMV_ROWS
    if plan.m > bm and not gemv or plan.n > bn or bm * bn > DOT_OUTPUTS or plan.k < DOT_MIN_K:
        return None
    if vector == 1 and bm == bn == 1 and _batch_is_stride_one(plan):
        # a thread a row, a warp's loads side by side along the batch; 16 CTAs of 128 an SM (all its threads)
        cfg = KernelConfig("dot", 1, 1, 1, DOT_LOADS // 2)
        return replace(cfg, split_k=max(1, min(-(-16 * WAVE_SMS // grid_ctas(plan, cfg)), plan.k // 64,
                                               DOT_MAX_SPLIT)))
    stages = max(1, min(4, DOT_LOADS // (bm + bn)))
    steps = plan.k // vector
    threads = next(t for t in DOT_THREADS if t >= min(256, -(-steps // stages)) and t >= 32 or t == 256)
    cfg = KernelConfig("dot", bm, bn, threads, stages)
    return replace(cfg, split_k=max(1, min(-(-TARGET_CTAS // grid_ctas(plan, cfg)), steps // (threads * 16),
                                           DOT_MAX_SPLIT)))


def _batch_is_stride_one(plan) -> bool:
    """Whether the batch's first mode is A's and B's stride-1 mode (row-major ``ij,ij->j``: the sums run down
    columns)."""
    table = plan.tables["L"]
    return bool(table.extents) and all(table.strides_of(t)[0] == 1 for t in "AB")


def _persistent_tile(plan, cfg: KernelConfig, arch: str | None) -> KernelConfig:
    """``cfg`` with CTAs over several tiles (``persistent``, 3 stages) where its A tile is one TMA box
    (gett.tma.tile_box; the kernel's other conditions: codegen.check_persistent) and its shared memory
    leaves one CTA per SM, which alone would load a tile and store the one before in turn. H100, f16
    (tile_sweep, session 22): #3 ``abcd-dbea-ec`` 576 x 32 x 32 71.6 -> 57.5 us (s2 61.9, s4 57.8), #4
    ``abcd-deca-be`` 70.2 -> 59.9 (s2 59.2, s4 59.8). Where the tile is small enough for two CTAs an SM
    (N ≤ 32's 256 rows), or A's tile is copied by cp.async over several K tiles, the taller tile of
    :func:`_skinny_persistent_tile` instead. Where A's tile is copied by cp.async and all of K fits one
    tile, with 2 stages (the next tile's copies in flight while a tile is stored; B's K tile copied once):
    H100, f16 (tile_sweep, session 32, two rounds) #5 ``abcd-ebad-ce`` 256 x 32 x 80 37.8/37.5 -> 35.5/35.2 us."""
    from .codegen import check_persistent, shared_bytes, shared_ctas
    from .tma import tile_box
    tiled, a, b = _tiled_layouts(plan, cfg)
    box = tile_box(tiled, replace(cfg, persistent=True, stages=3), a, arch)
    if box is None and plan.k <= cfg.bk:   # A copied by cp.async, if check_persistent allows it
        persistent = replace(cfg, persistent=True, stages=2)
    elif box is not None and shared_ctas(shared_bytes(tiled, cfg, a, b, a_box=True)) < 2:
        persistent = replace(cfg, persistent=True, stages=3)
    else:   # two CTAs an SM, or A's K tiles copied by cp.async: a taller tile where N ≤ 32
        persistent = _skinny_persistent_tile(plan, cfg, arch)
        if persistent is None:
            return cfg
        tiled, a, b = _tiled_layouts(plan, persistent)
        box = tile_box(tiled, persistent, a, arch)
    try:
        check_persistent(tiled, persistent, box, a, b)
    except ValueError:
        return cfg
    return persistent


def _skinny_persistent_tile(plan, cfg: KernelConfig, arch: str | None) -> KernelConfig | None:
    """For N ≤ 32 and a long M (:func:`_memory_bound_tile`'s 256 rows, two or more CTAs an SM), on sm_90
    where it was measured (the tuner's neighbourhood, around the arch-free heuristic, keeps the 256 rows): a
    tile tall enough for one CTA an SM over several tiles, or None. K within two 32-deep tiles: 768 rows in
    12 warps of 64 x 32, 2 stages; a longer K: 384 rows in 12 warps of 32 x 32, 3 stages.
    H100, f16 (tile_sweep, session 39, two rounds; the 256-row tiles not persistent, as session 22 found
    them slower so): #6 ``abcde-efbad-cf`` 204.4 -> 116.1/116.8 us (32 x 32 warps 113.1), #7
    ``abcde-ecbfa-fd`` (K = 48) 212.1 -> 159.6/160.6 (32 x 32 warps 177.4; 48 deep 175.3), #8 177.6 ->
    105.7/105.9, #1 ``abc-bda-dc`` (K = 312) 45.4 -> 37.0 (768 rows 46.4), #2 ``abc-dca-bd`` 36.9 -> 33.9
    (its database entry, 256 x 32 x 64, 31.9); 512 rows and 384 rows at 2 stages lost on #6-8. Not where A or
    B has an op or the plan reads C (the fusion benchmark's leaky ReLU on A, B and C, beta = 1: #6 282.2 ->
    280.0 us, #7 318.5 -> 345.7, #8 255.6 -> 276.2), as for config._producer_tile."""
    if not has_wgmma(arch) or _ops_or_reads_c(plan) or not (cfg.bn == 32 and plan.n <= 32 and plan.m >= 65536):
        return None
    if plan.k <= 2 * 32:
        return replace(cfg, bm=768, bk=32, wm=64, wn=32, stages=2, persistent=True)
    return replace(cfg, bm=384, bk=32, wm=32, wn=32, stages=3, persistent=True)


def has_wgmma(arch: str | None) -> bool:
    """Hopper (sm_90) is the one architecture with warpgroup MMA."""
    from .kernel import arch_number  # gett.kernel imports this module
    return arch is not None and arch_number(arch) == 90


# The shortest K of a wgmma tile for M and N of 128 or more. K of 64 to 255 (write-bound: attention scores
# 'bhqd,bhkd->bhqk' with d = 64 or 128, 4096 x 4096 x 64) runs the producer tile over several tiles (its
# next tile's loads in flight while one is stored), not the wide one: H100 f16 (session 49,
# small_k_configs_f16_*_session49.txt) 128 x 256 s3 p 33.9 / 42.0 / 17.1 us against mma.sync 128 x 128's
# 64.5 / 82.3 / 29.1 (torch.einsum 35 on the first).
WGMMA_MIN_K = 64
# wgmma 128 x 128 with 3 stages: for M or N in the hundreds, and for one tile row of M = 72 (see below).
_WGMMA_128X128 = KernelConfig("wgmma", 128, 128, 64, 3)


def _wgmma_tile(plan):
    """The wgmma tile for a large GEMM-like plan, or None where mma.sync is the better path.

    Measured on H100 (benchmarks/tile_sweep.py, TCCG #12-#30, 2026-11-22): 128x256 with 4 stages runs
    #12 and #20 1.5x faster than mma.sync's best. With M or N in the hundreds, 128x128 with 3 stages
    (98 KB: two CTAs per SM), since the epilogue tile holds 16-bit values: #15 81.8 -> 72.2 us, #16
    102.9 -> 83.9, #17 99.6 -> 83.6, #18 100.8 -> 83.2 against 128x64 with 4 stages (session 6), which
    stays for operands staged through registers (box tiling's strided vectors), as wider tiles spill.
    Element-wise staging would spill with 64-deep tiles: mma.sync keeps those. The 128x256 tile gets a
    producer warpgroup (ws) unless A or B has an op: #12 525 -> 511 us, #20 855 -> 820, #21 822 -> 795,
    #28 even; with leaky ReLU on A and B the producer alone applies it, #20 1227 -> 1336 us."""
    big = KernelConfig("wgmma", 128, 256, 64, 4)
    small = KernelConfig("wgmma", 128, 64, 64, 4)
    if _scalar_staging(plan, small):
        return None
    if plan.m >= 1024 and plan.n >= 1024 and plan.k >= 256 and _staged(plan, big) == 0 \
            and not _few_wide_tiles(plan, big):
        return _wide_tile(plan, replace(big, ws=not loads_have_ops(plan)))
    if _staged(plan, _WGMMA_128X128):
        return small
    return _producer_tile(plan) or _WGMMA_128X128


def _producer_tile(plan) -> KernelConfig | None:
    """For a GEMM-like plan with M or N in the hundreds: 128 rows with a producer warpgroup (ws), over several
    tiles unless K is split (persistent: the next tile's loads in flight while a tile is stored), as wide as the fewest
    column tiles allow and no wider (WGMMA_N from 128; an N-major B in whole 64-column atoms, which its
    shared tile takes anyway: #17 as 128 x 160 measured even with 128 x 192, session 30), 4 stages where
    the shared memory holds them, else 3. None where A or B has an op (the producer would apply
    it) or is transposed in shared memory, or where the plan reads C (its beta hint is not 0): one CTA an SM
    then waits for C in every epilogue, where two overlapped (fusion.py, beta = 1, no ops: #15 106.4 ->
    109.2 us, #16 125.2 -> 132.2, #17 114.2 -> 130.4, #18 112.8 -> 121.4). H100, f16 (tile_sweep, session
    24, beta = 0), against 128 x 128 s3 without
    a producer: #15 ``abc-acd-db`` (N = 296, B K-major) 72.1 -> 63.0 us as 128 x 160 s4 (128 x 192 69.3,
    128 x 256 s3 85.2, 128 x 128 s4 80.8); #18 ``abc-adc-db`` 83.0 -> 70.5 (192: 71.6); #17 ``abc-adc-bd``
    (N = 312, B N-major) 83.0 -> 73.3 as 128 x 192 s4 (256 s3: 78.5); #16 ``abc-ad-bdc`` (N = 92352)
    83.7 -> 71.8 as 128 x 256 s3 (192 s4: 74.8). Without persistence 128 x 256 s3 was 84.7-92.5.
    Where K is split (M and N in the hundreds, K in the tens of thousands), the same tile runs one tile a
    CTA, in one round of CTAs (split_k_for; session 25, tune_tccg.py): #13 ``ab-acd-dbc`` 85.6 -> 70.4
    us against 128 x 128 s3 k29, #14 ``ab-cad-dcb`` (A staged) 121.3 -> 113.3.
    Over several tiles and one batch, the tile for all of K of the operand with fewer tiles stays in shared memory
    (``resident``: a CTA's tiles share one column, or row) where it fits with stages of the other (B with 5, 4 or 3 of
    A, A with 4 or 3 of B), which then is all that the tiles after a CTA's first read through L2 (tile_sweep, session
    30): B as wide as it is, #15 63.5 -> 53.3 us (3 stages 56.4), #18 70.6 -> 55.0 (58.8), #17 73.5 -> 62.4 as 128 x
    192 s3 (128 x 128 s4 64.8); A with a narrower width, #16 72.8 -> 63.6 as 128 x 128 s4 (128 x 192 s3 65.4). A
    resident B takes up to 5 stages, a whole next tile of #15/#18's K (5 K tiles) in flight while a tile is stored:
    #15 52.3 -> 48.3 us, #18 54.6 -> 52.1; a resident A not (#16 62.0 -> 62.9 at 5, 64.0 at 6). A resident A's tiles
    go first to math warpgroups that take them in turn (``pingpong``: one stores a tile while the other multiplies the
    next), 128 wide (a warpgroup's 128 accumulators a thread) with 5 stages: #16 61.0-61.7 -> 56.6-57.3 us (4 stages
    58.8-59.0, 6 58.2-58.6; session 38). #15's resident B in turn (128 x 160 s5) measured 47.6-48.1 against 48.1-48.9;
    in session 57, with a cp.async producer handing the math warpgroups its registers (Gett::PRODUCER_REGISTERS),
    #15 48.5/48.6 -> 47.9/48.1 us, #17 54.1/54.3 -> 53.4/53.5, #18 51.4/51.6 -> 50.5/51.0 (4 stages, or 128
    columns: slower), so a resident B's tiles go in turn at 5 stages. Where the epilogue walks N (#16's exchanged
    plan) in turn gained only once wgmma's accumulators went to the epilogue tile by stmatrix there too (session 58,
    runner A/B, three rounds: 54.9-55.4 us in turn with column-pair stores, 53.8-54.1 with stmatrix, against
    55.0-55.5 not in turn; session 57's 80 us for it was the plan as given, not exchanged, at 3 stages: a
    configuration given to plan_contraction skips the exchange)."""
    if _ops_or_reads_c(plan):
        return None
    widths = _producer_widths(not _layouts(plan, _WGMMA_128X128)[1].row_contig, plan.n)
    cfg = replace(_WGMMA_128X128, bn=_fewest_columns(plan, widths), ws=True, persistent=True)
    if cfg.bn > 128 and _few_wide_tiles(plan, cfg):
        # wide tiles for under half the SMs and a short K: 128 x 64 tiles, for more CTAs rather than K split for a few
        # K tiles a slice and a reduction kernel. H100 f16, row-major (session 49, .exp/session49/gemm_sweep.py):
        # 1000^3 25.8 us as 128 x 256 k2 -> 13.8 (128 x 128 12.9); 'abcd,cdef->abef' (1152 x 560 x 1440) 22.5 ->
        # 13.2; 'abcd,dcef->fabe' (the same, B N-major over two modes) 88.6 -> 22.0
        cfg = replace(cfg, bn=64, persistent=False)
    if not _plain_async_loads(plan, cfg):
        return None
    if split_k_for(plan, cfg) > 1:   # K split (default_config's split_k_for): one tile a CTA, or 64-row tiles
        thin = _thin_tile(plan, cfg)
        if thin is not None:
            return thin
        cfg = replace(cfg, persistent=False)
    candidates = [replace(cfg, stages=s) for s in (4, 3)]
    if cfg.persistent and plan.batch == 1:
        if -(-plan.n // cfg.bn) <= -(-plan.m // cfg.bm):   # B the smaller operand: its tile stays, as wide
            resident = [replace(cfg, resident="b", stages=s) for s in (5, 4, 3)]
            if 128 < cfg.bn <= 160:   # as measured: 160 wide
                resident.insert(0, replace(resident[0], pingpong=True))
        else:   # A's tile stays: warpgroups in turn, then the width narrowed to fit: 4 stages first, then 3
            turns = [replace(cfg, resident="a", bn=128, stages=5, pingpong=True)] if cfg.bn >= 128 else []
            resident = turns + [replace(c, resident="a", bn=w) for c in candidates for w in widths[::-1]
                                if w <= cfg.bn]
        candidates = resident + candidates
    return next((c for c in candidates if _fits(plan, c)), None)


def _plain_async_loads(plan, cfg: KernelConfig) -> bool:
    """Whether ``cfg``'s tiles of A and B both load by asynchronous copies of whole contiguous vectors (what a
    producer warpgroup needs: nothing staged through registers, no strided vectors)."""
    _, a, b = _tiled_layouts(plan, cfg)
    return a.is_async and b.is_async and a.step == 1 and b.step == 1


def _fits(plan, cfg: KernelConfig) -> bool:
    """Whether one CTA of ``cfg`` fits an SM's shared memory."""
    from .codegen import shared_bytes, shared_ctas
    tiled, a, b = _tiled_layouts(plan, cfg)
    return shared_ctas(shared_bytes(tiled, cfg, a, b)) >= 1


def _thin_tile(plan, cfg: KernelConfig) -> KernelConfig | None:
    """For a producer tile at most 128 wide whose 128-row tiles would split K: 64 rows, as many stages as fit of
    8, 6 and 4, K split only until half the SMs have a CTA (split_k_for); None where the 64-row tile's loads are
    not asynchronous. The loads of one tile a CTA then fill the memory pipeline without partial sums and their
    reduction. H100 f16, row-major (session 51,
    results/thin_tiles_f16_*_session51.txt), the 128-row tile K split -> the 64-row tile: 8192 x 64 x 8192 58.2 (k2)
    -> 52.1 us (torch.einsum 51.4), 4096 x 64 x 1024 14.3 (k2) -> 9.1 (8.5), 8192 x 64 x 4096 34.9 (k2) -> 28.9
    (28.7), 2048 x 64 x 8192 22.8 (k8) -> 20.5 (k2; 29.7 unsplit), 8192 x 128 x 8192 64.9 (k2) -> 53.4 (52.5),
    8192 x 96 x 8192 61.9 (k2) -> 56.4 (52.6), 4096 x 96 x 4096 26.2 (k4) -> 22.7 (18.9); TCCG #19 (N = 72) 31.8
    (128 x 80 k3) -> 29.5 (64 x 80 s8, its database entry since session 48)."""
    if cfg.bn > 128:
        return None
    # one tile a CTA: twice the 128-row tiles, at most 132 where those split K (#19, 81 tiles: 30.4 us over several
    # tiles, 29.4 not)
    thin = replace(cfg, bm=64, persistent=False)
    if not _plain_async_loads(plan, thin):
        return None
    return next((c for c in (replace(thin, stages=s) for s in (8, 6, 4)) if _fits(plan, c)), None)


def _few_wide_tiles(plan, cfg: KernelConfig) -> bool:
    """Whether ``cfg``'s tiles leave more than half the SMs idle and K is short of NARROW_K: narrower tiles
    then beat K split for a few K tiles a slice (see _producer_tile; 1024^3 takes that path too, not the
    wide tile's: 128 x 256 k2 26.8 us, 16.3 unsplit, H100 f16, session 49)."""
    return output_tiles(plan, cfg) < WAVE_SMS // 2 and plan.k < NARROW_K


def _producer_widths(k_major_b: bool, n: int = 128) -> list:
    """The widths a producer tile takes: WGMMA_N from 128 (from N rounded up to 16 where N is shorter), for
    an N-major B whole 64-column atoms."""
    least = min(128, round_up(n, 16))
    return [w for w in WGMMA_N if w >= least and (k_major_b or w % 64 == 0)]


def _fewest_columns(plan, widths) -> int:
    """The narrowest of ``widths`` that covers N in the fewest column tiles."""
    return min(widths, key=lambda w: (-(-plan.n // w), w))


def _waves(plan, cfg: KernelConfig) -> int:
    """Rounds of one CTA per SM that ``cfg``'s tiles take on WAVE_SMS SMs."""
    return -(-output_tiles(plan, cfg) * cfg.split_k // WAVE_SMS)


def _wide_tile(plan, cfg: KernelConfig) -> KernelConfig:
    """The 128 x 256 tile, rasterised in groups of 16 row tiles (with or without a producer warpgroup;
    measured with one), or with a producer a narrower or taller one: where B loads K-major, 128 x 240,
    and where the producer loads both operands by TMA 192 x {216, 224, 240, 192} (three math
    warpgroups); where B loads N-major (whole 64-column swizzle atoms), 192 x 192 by TMA. Of these, the
    tile whose waves of WAVE_SMS CTAs times its area is least (the work each SM is given, the last wave's
    idle slots included), the first on ties. H100, f16 (tile_sweep, TMA loads): 128 x 240 against 256
    on #28 (5184^3, 7 waves either way) 498.6 -> 479.9 us, #12 even (421.7 against 423.0); groups of 16
    row tiles against 8: #12 416.8 -> 410.9, #28 479.9 -> 476.6 (session 15). 192 x 216 (5 waves)
    against 128 x 240 (7): #12 (5136 x 5120 x 5136) 405.1 -> 369.6 us (192 x 224 384.7, 192 x 192
    403.5, 192 x 240 393.0), #20-30 454.6-467.4 -> 442.2-449.4; #12's sizes with B N-major (a row-major
    GEMM) 128 x 256 393.6 us, 192 x 192 384.3, 192 x 128 433.7 (session 23)."""
    cfg = replace(cfg, group_m=16)
    if not cfg.ws:
        return cfg
    k_major_b = not _layouts(plan, cfg)[1].row_contig
    candidates = [cfg, replace(cfg, bn=240)] if k_major_b else [cfg]
    if _tma_loads(plan, cfg):
        candidates += [replace(cfg, bm=192, bn=bn) for bn in ((216, 224, 240, 192) if k_major_b else (192,))]
    best = min(candidates, key=lambda c: _waves(plan, c) * c.bm * c.bn)
    if best.bm == 128 and plan.k <= WIDE_PERSISTENT_K and not plan.beta_hint:
        # a short K: each tile's store and its next tile's first loads are a large share, so the producer runs
        # over several tiles (persistent, 3 stages for the epilogue's own shared memory). H100 f16, row-major
        # (session 51, results/wide_tile_short_k_f16_*_session51.txt), one tile a CTA -> persistent:
        # 8192 x 8192 x 256 109.0 -> 84.2 us, x 512 137.1 -> 126.7, 8192 x 4096 x 768 92.6 -> 87.8,
        # 4096 x 4096 x 1024 59.6 -> 57.6, 8192 x 4096 x 1024 112.5 -> 109.6; but 6144 x 4096 x 1536 116.4 ->
        # 116.9, 4096 x 4096 x 2048 100.2 -> 101.2, 4096^3 185.3 -> 193.8, and 192-row tiles persistent slower
        # (8192 x 4096 x 1024: 126.6 against 113.9). Not where the plan reads C (measured with beta = 0 only; the
        # producer tile keeps such plans to one tile a CTA too, see _producer_tile)
        return replace(best, persistent=True, stages=3)
    return best


def _tma_loads(plan, cfg: KernelConfig) -> bool:
    """Whether the producer of ``cfg`` (warp-specialised) loads both operands of ``plan`` by TMA."""
    from .tma import tma_operands
    tiled, a, b = _tiled_layouts(plan, cfg)
    return tma_operands(tiled, cfg, (a, b)) is not None


def for_load_ops(plan, cfg: KernelConfig) -> KernelConfig:
    """``cfg``, tuned for ``plan`` without ops, adapted to ``plan``'s op on A or B, which the kernel
    applies to every element of every tile it loads, K padding included:
    - a producer tile of 128 rows or more that the TMA still loads (ops with op(0) = 0, gett.tma.tma_operand)
      stays, its math threads applying the ops to each landed stage, K split by split_k_for (one CTA an SM:
      more math threads for the op). H100, leaky ReLU on A, B and C, beta 1 (tile_sweep --leaky, session
      62): #13 ``ab-acd-dbc``'s 128 x 296 s4 k22 entry 119.6 us, k33 86.2, k44 72.3/71.9 (s5 72.4/71.7, s3
      75.6/74.2) against 92.4-93.2 as 128 x 160 s3 k44 without a producer; #12 unstaged 192 x 216 s4 713 us
      against 980 as 128 x 256 s4. Not 64 rows, whose one math warpgroup applies the ops alone: #14's
      64 x 160 s8 k13 entry 149.6 us so, against 113.2 as below;
    - else no producer warpgroup (ws), which would apply the op alone (measured slower, see _wgmma_tile);
      a wide tile (WGMMA_WIDE_N, loaded by TMA) first narrows to the width _producer_tile would take;
      a 192-row tile, whose three math warpgroups take the TMA producer's registers, becomes _wgmma_tile's
      128 x 256 for operands with ops;
      a split-K 128 x 256 tile also narrows to 128 x 128 with 4 stages, so that an op'd operand is
      staged through registers (codegen.operand_layouts): #14 ``ab-cad-dcb`` f16 with leaky ReLU, H100
      (tile_sweep --leaky): 328 us as 128 x 256 s3 k44, 266 us as 128 x 128 s4 k44 (s3: 318 at k30;
      #13's 128 x 128 s3 k30 stays its best); any other split-K producer tile takes 3 stages, the deep
      pipeline having been for the producer (tile_sweep --leaky, session 13: #19 ``abc-adec-ebd``
      128 x 80 k6 s6 55.3 us, s4 51.7, s3 43.2; #13 ``ab-acd-dbc`` 128 x 160 k44 s4 98.4, s3 91.2; but
      the unsplit 128 x 256 of #12/#20 s4 600.9/576.7 against s3 611.4/591.3, so those keep theirs), and
      the split for the CTAs an SM then holds, the entry's having been for the producer tile's (#13's
      k22 becomes k44: fusion.py fused #13 0.1239 -> 0.0979 ms, session 25); a
      producer tile of 64 rows, split or not, whose one math warpgroup would apply the op alone, becomes
      128 rows of the same width with 3 stages, split by split_k_for (tile_sweep --leaky, session 61: #19's
      unsplit 64 x 80 s8 entry 68.3 us as such, 128 x 80 s3 k6 36.2, k3 35.0; #14's 64 x 160 s8 k13 entry,
      on its K-major copy, 128 x 160 s3 k44 114.4-114.7, k22 121.5-123.2, against 131.0-131.6 as 128 x 128
      s3 k29, which the rule took from 2026-11-23's M-major copy: 128 x 128 s3 k26 150.0, 128 x 160 157.8);
    - mma.sync tiles 64 deep become 32 deep where that pads K less, and 256 rows become 128, a kernel
      that needs no cap on its registers for two CTAs per SM (codegen.ctas_per_sm), which the op pass
      took into spills; where K then fits the stages, one more stage, which costs no shared memory
      (only K's tiles are allocated) and starts every tile's loads at once. H100, leaky ReLU,
      tile_sweep --leaky: #2 ``abc-dca-bd`` (K = 312) 256 x 32 x 64 s3 45.0 us (28 B of spills),
      128 x 32 x 64 s3 42.3, s4 46.1 (a stage more of shared memory); #5 ``abcd-ebad-ce`` (K = 72: 128
      positions transformed 64 deep, 96 at 32) 256 x 32 x 64 s3 64.4 us, 256 x 32 x 32 s3 59.7,
      128 x 32 x 32 s3 62.5, s4 57.8. Warps of 64 x 64 over all of K in one tile become 64 x 32 (#31-48
      with leaky ReLU on A, B and C, session 39: 96-99 us against 81)."""
    if cfg.ws and cfg.bm >= 128 and not cfg.resident and _tma_loads(plan, cfg):
        # the TMA still loads (ops that keep 0); more CTAs, more math threads to apply the ops
        return replace(cfg, split_k=split_k_for(plan, replace(cfg, split_k=1))) if cfg.split_k > 1 else cfg
    cfg = replace(cfg, persistent=cfg.persistent and not cfg.ws)   # the ws branches below drop the producer
    if cfg.bn in WGMMA_WIDE_N:   # a wide tile loads by TMA (its B K-major): _producer_tile's width instead
        cfg = replace(cfg, bn=_fewest_columns(plan, _producer_widths(k_major_b=True)))
    if cfg.ws and cfg.split_k > 1 and cfg.bn == 256:
        return replace(cfg, ws=False, bn=128, stages=max(cfg.stages, 4))
    if cfg.ws and (cfg.split_k > 1 or cfg.bm == 64):   # the split of the CTAs an SM then holds (split_k_for)
        plain = replace(cfg, ws=False, bm=128 if cfg.bm == 64 else cfg.bm, stages=3, split_k=1)
        return replace(plain, split_k=split_k_for(plan, plain))
    if cfg.three_math_warpgroups:   # they need a TMA producer's registers: the op'd operands' tile
        return replace(cfg, ws=False, bm=128, bn=256)
    if cfg.math == "mma16":
        cfg = replace(cfg, persistent=False)   # the tile may change below, and then be no TMA box of A
        if cfg.bk == 64 and round_up(plan.k, 32) < round_up(plan.k, 64):
            cfg = replace(cfg, bk=32)
        if wide_warps_over_one_k_tile(plan, cfg):   # the op pass would spill them
            cfg = replace(cfg, wn=32)
        if cfg.bm == 256:
            cfg = replace(cfg, bm=128)
            if -(-plan.k // cfg.bk) <= cfg.stages:
                cfg = replace(cfg, stages=cfg.stages + 1)
        return cfg
    return replace(cfg, ws=False)


def loads_have_ops(plan) -> bool:
    """Whether A or B has an elementwise op: then the heuristic takes no producer warpgroup (ws), which
    would apply it alone (measured slower, see _wgmma_tile); a database entry's TMA producer may stay
    (for_load_ops)."""
    return plan.ops.op_a is not None or plan.ops.op_b is not None


def _ops_or_reads_c(plan) -> bool:
    """Whether ``plan`` has an op on A or B or reads C (its beta hint not 0; no hint: the common beta = 0 is
    worth more): the tiles measured faster without them (a producer over several tiles, the tall and the
    64 x 64-warp mma.sync tiles) are kept from such plans."""
    return loads_have_ops(plan) or bool(plan.beta_hint)


def wide_warps_over_one_k_tile(plan, cfg: KernelConfig) -> bool:
    """Whether ``cfg`` has mma.sync warps of 64 x 64 over all of ``plan``'s K in one tile (_tile_config):
    they fit the registers of 3 CTAs an SM with none to spare for an op pass or a read of C."""
    return cfg.math == "mma16" and cfg.wm == cfg.wn == 64 and plan.k <= cfg.bk


def _memory_bound_tile(plan, cfg: KernelConfig) -> KernelConfig:
    """Taller tiles for the memory-bound shapes of the TCCG suite (benchmarks/tile_sweep.py, H100,
    2026-11-22): with N ≤ 32 and a long M, 256 rows let both A's and D's runs in the M box reach 16
    elements (whole sectors): #6 2.4x faster; where D's stride-1 mode has an extent like 24 that no
    power-of-two tile holds whole, 192 rows or columns (12 warps), whichever dimension holds that mode,
    write D in whole runs: #31 1.4x; #32, #35 (N) 82 -> 58 us with the crossing epilogue walk. A K of at
    most 64 in 16s is one K tile: #7 ``abcde-ecbfa-fd`` (K = 48) 256 x 32 x 32 223.0 -> 213.2 us as 256 x
    32 x 48 (H100, tile_sweep, session 22; 48 on #3/#4, K = 72: even). Where A is K-major (no TMA box,
    whose K tile must lie inside K), a K of at most 96 is one K tile too, rounded up to 16s (the rows' zero-
    filled tail): #5 ``abcd-ebad-ce`` (K = 72) 256 x 32 x 64 (its database entry) 39.8 -> 37.4 us as 256 x 32
    x 80 (x 96: 38.1; H100, tile_sweep, session 29). With an op on A or B and K past 128 (the 576-row tiles'
    limit), 128 x 32 x 64 (256 rows 64 deep spill in the op pass; see for_load_ops): leaky ReLU on A, B
    and C, beta 1 (H100, tile_sweep --leaky, session 62), #2 ``abc-dca-bd`` (K = 312) 47.7/47.6 us as
    256 x 32 x 32 s3 -> 41.8/41.5 (128 x 32 x 32 48.8, 128 x 32 x 64 s4 44.8), #1 53.8 -> 52.3; not #3/#4
    (K = 72): 57.8 us as 576 x 32 x 32, 105.5 as 128 x 32 x 64."""
    if cfg.bn == 32 and plan.n <= 32 and plan.m >= 65536:
        if loads_have_ops(plan) and plan.k > TALL_TILE_MAX_K:
            return replace(cfg, bm=128, wm=32, bk=64)
        k_major = not _layouts(plan, cfg)[0].row_contig
        one_tile = cfg.bk < plan.k <= (96 if k_major else 64) and (k_major or plan.k % 16 == 0)
        bk = round_up(plan.k, 16) if one_tile else cfg.bk
        return _tall_tile(plan, replace(cfg, bm=256, wm=32, bk=bk))
    for group, tile, extent in (("M", cfg.bm, plan.m), ("N", cfg.bn, plan.n)):
        table = plan.tables[group]
        if cfg.bm != 128 or plan.m < 192 or extent <= tile or not table.extents \
                or table.strides_of("D")[0] != 1:
            continue
        run = table.extents[0]
        if run & (run - 1) and 192 % run == 0:   # not a power of two, and 192 holds whole runs
            return replace(cfg, bm=192, wm=64, wn=32) if group == "M" else replace(cfg, bn=192, wm=64, wn=32)
    return cfg


def _tall_tile(plan, cfg: KernelConfig) -> KernelConfig:
    """``cfg``, or 576 rows where M is box-tiled and ``cfg``'s rows leave the box's deciding side
    (:func:`_box_side`) under 16 elements while 576 make it at least 16, with K short (≤ 128): extents of
    72 = 8 · 9 give 8 x 8 boxes in any power-of-two tile, 24 x 24 in 576 (8 x 72 since session 28: D's
    whole mode). H100, f16 (tile_sweep, session 13, against 256 rows): #3 ``abcd-dbea-ec`` 86.2 -> 71.6
    us, #4 ``abcd-deca-be`` 83.5 -> 71.7 (with leaky ReLU on A, B and C 113.7 -> 96.2, 112.1 -> 96.5); not
    #1 (K = 312: 48.4 -> 50.3; its database entry has 384 rows) nor #6-8, whose 16 x 16 boxes are whole
    sectors already. f32: see _memory_bound_simt_tile."""
    tall = replace(cfg, bm=576)
    if plan.k <= TALL_TILE_MAX_K and 0 < _box_side(plan, cfg) < 16 <= _box_side(plan, tall):
        return tall
    return cfg


def _box_side(plan, cfg: KernelConfig) -> int:
    """The side of the M box that box tiling makes for ``cfg`` which decides how whole D's runs are: D's
    own in tall mma.sync tiles (N ≤ 32, whose boxes take D's whole mode where they can), else the shorter
    side (SIMT too: f32 #3/#4 as 8 x 72 in 576 rows measured slower than 24 x 8 in 384, see
    gett.tiling.box_sides); 0 where M is not box-tiled."""
    from .tiling import tile_plan
    table = tile_plan(plan, cfg).tables["M"]
    if not (len(table.modes) > 1 and str(table.modes[1][-1]).startswith("%")):
        return 0
    if cfg.math == "mma16" and cfg.bn <= 32:
        return table.extents[0 if table.strides_of("D")[0] == 1 else 1]
    return min(table.extents[:2])


def _tile_config(plan, arch: str | None = None) -> KernelConfig:
    """Tile sizes from the GEMM extents, so skinny dimensions waste little of a tile."""
    path = math_path(plan)
    m, n = plan.m, plan.n
    if path == "mma16" and has_wgmma(arch) and m >= 128 and n >= 128 and plan.k >= WGMMA_MIN_K:
        cfg = _wgmma_tile(plan)
        if cfg is not None:
            return cfg
    if path == "mma16" and has_wgmma(arch) and m >= 128 and 64 <= n < 128 and plan.k >= 256 \
            and not _scalar_staging(plan, _WGMMA_128X128):
        # N short of 128: the producer tile as wide as N rounded up to 16, where it has one (H100, tile_sweep,
        # session 39, two rounds: #19 ``abc-adec-ebd`` (N = 72) 128 x 80 s4 k6 35.9/35.8 us against mma.sync
        # 128 x 128 k6's 40.1/39.6; 72 wide 36.5/37.2). From N = 64 on (session 51, f16 row-major,
        # results/{n64_producer_tile,thin_tiles}_f16_*_session51.txt, against mma.sync's 128 x 64): attention's
        # P·V (8 x 16 heads, 512 x 64 x 512) 37.4 -> 33.5 us, 1024 x 64 x 512 11.8 -> 7.2, and the thin GEMMs
        # through _thin_tile, 8192 x 64 x 8192 67.2 (k4) -> 52.1, 4096 x 64 x 1024 17.4 (k4) -> 9.1
        cfg = _producer_tile(plan)
        if cfg is not None:
            return cfg
    if path == "mma16":
        bm, bn = fit_tile(m, (32, 64, 128)), fit_tile(n, (32, 64, 128))
        wm = 64 if bm == 128 and bn == 128 else 32
        cfg = KernelConfig(path, bm, bn, 32, 3, wm=wm, wn=32)
        scalar = _scalar_staging(plan, cfg)
        # Measured on H100 (benchmarks/tile_sweep.py, TCCG #9, #12, #21, #31, 2026-11-22):
        if scalar == 2:   # element-wise staging of both operands: halve the depth or registers spill
            return replace(cfg, bk=16)
        if scalar == 0 and bm == bn == 128 and plan.k >= 256:
            return replace(cfg, wn=64)   # 4 warps of 64x64: +40% on #12, +20% on #21
        if scalar == 0 and 64 < m <= 96 and plan.k <= 128:   # one 96-row tile holds all of M: +13-24% on #9-11
            if has_wgmma(arch) and n >= 128 and _staged(plan, _WGMMA_128X128) == 0:
                # H100 (tile_sweep, 2026-11-22): #9 71.6 -> 59.8 us, #10 70.0 -> 65.1, #11 even. With an
                # op on A or B, 128 x 64 (80 registers: three CTAs per SM hide the op pass's latency):
                # leaky ReLU #9 125.8 -> 116.8 us, #10 108.9 -> 106.6, #11 105.4 -> 103.1 (#10/#11 even on
                # another H100: the op pass is issue-bound, and its speed varies from machine to machine).
                # A K-major A (no 64-row swizzle atoms) lets M be the instruction's width instead (swap):
                # 72 x 128, no half-empty rows, 78 registers, three CTAs per SM. H100 (tile_sweep,
                # 2026-11-23): #9 57.2 -> 50.4 us, #10 56.7 -> 55.8, #11 55.9 -> 44.7; with leaky ReLU on
                # A, B and C 117.7 -> 108.2, 110.8 -> 107.7, 109.5 -> 105.0 at two CTAs per SM, 87.9, 87.8,
                # 84.6 at three (codegen.ctas_per_sm); 72 x 64 and 72 x 256 slower.
                if not _layouts(plan, _WGMMA_128X128)[0].row_contig:
                    return KernelConfig("wgmma", fit_tile(m, WGMMA_N), 128, 64, 3, swap=True)
                return replace(_WGMMA_128X128, bn=64) if loads_have_ops(plan) else _WGMMA_128X128
            return KernelConfig(path, 96, 128, 32, 4, wm=32, wn=64)
        if scalar == 0 and 32 < m <= 64 and plan.k <= 128:
            return KernelConfig(path, 64, 64, 32, 4, wm=32, wn=32)   # short M and K: +40% on #9 (M = 72 then)
        cfg = _memory_bound_tile(plan, cfg)
        wide = replace(cfg, wn=64)
        if has_wgmma(arch) and scalar == 0 and cfg.bm == cfg.bn == 128 and wide_warps_over_one_k_tile(plan, wide) \
                and not _ops_or_reads_c(plan):
            # all of K in one tile: 4 warps of 64 x 64, whose 165 registers a thread ptxas fits under the cap
            # for 3 CTAs an SM without the 64 x 32 warps' spills (H100 (sm_90, where measured), tile_sweep,
            # session 39, two rounds: #40 ``abcdef-gdab-efgc`` 37.2/37.2 -> 30.6/30.9 us, #43 37.3/37.4 ->
            # 31.0/31.2, #46 37.6/37.3 -> 30.3/30.3, #33 33.3/33.5 -> 31.7/31.9, #36 33.6/33.8 -> 32.4/32.1,
            # #39 33.2/33.2 -> 31.9/31.7). Not with ops on A or B or a read of C: their registers spill these
            # warps (fusion.py's leaky ReLU on A, B, C, beta = 1: #33 81.0 -> 96.0 us, #40 80.9 -> 97.3)
            cfg = wide
        return cfg
    if path in ("tf32", "3xtf32"):
        bm, bn = fit_tile(m, (32, 64, 128)), fit_tile(n, (32, 64, 128))
        wm = 64 if bm == 128 and bn == 128 else 32
        return KernelConfig(path, bm, bn, 16, 4, wm=wm, wn=32)
    if path == "f64mma":
        bm, bn = fit_tile(m, (32, 64)), fit_tile(n, (32, 64))
        return KernelConfig(path, bm, bn, 16, 3, wm=32, wn=32)
    itemsize = plan.compute_type.accumulator.itemsize
    bk = 4 if itemsize >= 16 else 16   # complex128: a deeper k step spills under ptxas 13
    stages = 3
    bm, bn = fit_tile(m, (32, 64)), fit_tile(n, (32, 64))
    if itemsize == 4:
        # 4-byte types (f32, i32): 128 rows or columns, 8 a thread, for more multiply-adds per shared-memory
        # read; both for large GEMMs with a long K, else on the longer side only. H100, f32 exact
        # (tile_sweep --dtype f32) against 64 x 64: 128 x 128 #20 9.86 -> 7.07 ms, #28 12.5 -> 8.66, #12
        # 9.56 -> 8.12; one side: #13 989 -> 720 us, #14 1289 -> 854 (split-K), #15 688 -> 622, #10 265 ->
        # 254, #6 604 -> 499 (128 x 64); 128 x 128 lost on those (#13 1065, #10 278). Wider types spill.
        if m >= 1024 and n >= 1024 and plan.k >= 256:
            bm, bn = 128, 128
        elif m >= n:
            bm = fit_tile(m, (32, 64, 128))
        else:
            bn = fit_tile(n, (32, 64, 128))
    cfg = KernelConfig("simt", bm, bn, bk, stages, tm=bm // 16, tn=bn // 16)
    return _memory_bound_simt_tile(plan, cfg) if plan.descriptors["A"].dtype.itemsize == 4 else cfg


def _memory_bound_simt_tile(plan, cfg: KernelConfig) -> KernelConfig:
    """SIMT tiles for the memory-bound shapes of the TCCG suite with 4-byte data, where a power-of-two tile
    wastes work or cuts D's runs. H100, f32 exact (benchmarks/tile_sweep.py --dtype f32, 2026-11-23), against
    the tile above:
    - N ≤ 32 and a long M: 384 rows (12 a thread) by N rounded up to 8 (3 a thread), 8 deep, 4 stages
      (boxes of 16 x 16 in M): #6 487 -> 284 us (302 with 256 x 32), #7 561 -> 362 (380), #8 457 -> 281
      (300), #5 93 -> 76 (84), #1 (K = 312) 85.3 -> 74.8 (83.8 with 128 x 24 x 32). 576 rows (_tall_tile)
      where M's box in 384 rows has a side under 16 and 576 make it 24 x 24: none of TCCG's since SIMT boxes
      square strictly (gett.tiling, session 27): #3/#4's 384 rows hold 24 x 8 boxes (A's runs whole vectors)
      and took 79.7 / 78.0 us against 576 rows' 83.1 / 82.4 (runner). A K-major A with a long K (#2: 312) keeps 128
      rows, 32 deep: 83.0 -> 67.1 us (75.3 with 384 x 24 x 8).
    - M (or N) of 65 to 96 against a long other side: one tile row of M rounded up to 8, 8 rows a
      thread, instead of 64 + a few rows in a second tile: #9 199 -> 146 us, #10 180 -> 133, #11 177 -> 131.
      Where B is K-major (8-deep tiles read 32-byte runs of it, waiting on each) and K ≤ 96, all of K in
      one stage with 4 columns a thread (256 threads, 128 registers): #9 ``abcd-ea-ebcd`` 144.4 -> 134.9
      us (session 22; 8 columns a thread 150.1; #10/#11, B N-major, slower that way: 124.8 -> 128.9,
      121.1 -> 128.6). Where C is not read (beta hint 0) and D's stride-1 mode leads M, instead a producer
      over several tiles, 24 deep, 3 stages, a warp's lanes along M (session 28): #9 135.3 -> 124.4 us
      (143.7 with lanes along N; 4 stages 130.5, all of K in 2 stages 127.6; #10/#11 even or slower).
    - K ≤ 32 with D's stride-1 extent like 24 or 384 (not a power of two; dividing 192 or divided by
      it), for a plan that never reads C (beta hint 0: with C read, runner --beta 1, these tiles took
      1.4-1.6x the 192-wide ones' time, #31 203.4 -> 334.5 us, #33 177.9 -> 281.7, #42 229.5 -> 353.2),
      where both operands copy asynchronously (and have no op): 128 x 128, 8 x 8 a thread, all of K
      in one stage, a producer warpgroup over several tiles (ws, persistent) with 4 stages, which loads
      the next tiles while a tile is computed and stored. H100, f32 (tile_sweep, session 24), against
      the 192-wide tiles below: #33 89.5 -> 79.3 us, #36 91.0 -> 79.9, #39 89.6 -> 79.2, #40 94.2 -> 84.3,
      #43 93.8 -> 84.8, #46 92.0 -> 84.7 (3 stages 80.3-85.8; 128 x 128 without the producer 89.2-113.8).
    - The same with an operand staged through registers, where D's run divides 192: the producer stages
      it, over several tiles with 3 stages. Against the 192-wide tiles: 128 x 128 in 2 stages alone
      gave #32 102.6 -> 94.4 us, #35 103.5 -> 93.5, #38 103.2 -> 93.7, #41 109.3 -> 94.0, #44 111.7 ->
      95.4, #47 108.3 -> 93.6, #34 106.2 -> 101.8, #45 109.1 -> 98.0, #42/#48 even (112.0/109.7 -> 110.8),
      #31/#37 slower (104.3 -> 108.3, 104.2 -> 107.8); the producer, against those 2-stage tiles: #31
      108.6 -> 101.4, #32 94.0 -> 87.9, #34 102.0 -> 97.3, #35 94.0 -> 89.0, #37 107.7 -> 101.6, #38 94.4 ->
      87.9, #42 110.5 -> 101.7, #48 110.9 -> 102.6, but #41 93.7 -> 97.2 (4 stages; 199 in one 3-stage
      sample), #44 95.1 -> 96.1, #45 97.7 -> 99.0, #47 94.1 -> 95.3. With an op on A or B, the 2-stage tile.
    - Else (session 19): 192 along N where A is K-major (else along M where B is, else along the
      longer side), 12 a thread, 64 the other way: whole runs of D in a tile. All of K in one stage (2
      stages), except across D's runs of 384 (8 deep there). #31-39 (B K-major, 192 x 64): #31 131.5 -> 111.1 us
      (120.3 8 deep), #32 114.3 -> 105.5 (110.1), #34 149.1 -> 113.2 (122.4), #33 110.8 -> 92.0 (99.1
      24 deep), #36 97.6 -> 91.9 (100.2); #40-48 (A K-major, 64 x 192; 192 x 64 8 deep: 120-164):
      #40 117 -> 100.3 (111.9 8 deep), #42 144.2 -> 112.8 (122.2), #45 140 -> 109.1 (115.5), #41, #44,
      #47 130-134 -> 112-114 (135 8 deep; 104-105 with 192 x 64 24 deep)."""
    m, n = plan.m, plan.n
    if n <= 32 and m >= 65536:
        bn = round_up(n, 8)
        if plan.k > 128 and not _layouts(plan, cfg)[0].row_contig:   # K-major A, long K
            return replace(cfg, bm=128, bn=bn, bk=32, tm=8, tn=bn // 8)
        return _tall_tile(plan, replace(cfg, bm=384, bn=bn, bk=8, stages=4, tm=12, tn=bn // 8))
    if 64 < m <= 96 and n >= 4096:
        bm = round_up(m, 8)
        tile = replace(cfg, bm=bm, bn=128, bk=8, tm=bm // 8, tn=8)
        if plan.k <= 96 and not _layouts(plan, tile)[1].row_contig:   # K-major B: all of K in one stage
            if plan.beta_hint is False and not loads_have_ops(plan) and _d_leads(plan, "M"):
                return replace(tile, bk=24, stages=3, tn=4, ws=True, persistent=True, lanes_m=True)
            return replace(tile, bk=round_up(plan.k, 8), stages=2, tn=4)
        return tile
    if 64 < n <= 96 and m >= 4096:
        bn = round_up(n, 8)
        return replace(cfg, bm=128, bn=bn, bk=8, tm=8, tn=bn // 8)
    # the extent of D's stride-1 mode where it leads the M or N table (0 elsewhere, e.g. in a batch mode)
    run = next((plan.tables[g].extents[0] for g in "MN" if _d_leads(plan, g)), 0)
    if plan.k <= 32 and min(m, n) >= 192 and run & (run - 1) and (192 % run == 0 or run % 192 == 0):
        whole_k = {"bk": round_up(plan.k, 8), "stages": 2}   # all of K in one stage (measured, see above)
        square = replace(cfg, bm=128, bn=128, tm=8, tn=8, **whole_k)   # measured, see above
        a, b = _layouts(plan, square)
        if plan.beta_hint is False and a.is_async and b.is_async and not loads_have_ops(plan):
            return _d_box_tile(plan, replace(square, stages=4, ws=True, persistent=True))
        if plan.beta_hint is False and 192 % run == 0:   # one operand staged by the producer (no ops)
            return square if loads_have_ops(plan) else _d_box_tile(plan, replace(square, stages=3, ws=True,
                                                                                 persistent=True))
        a, b = _layouts(plan, cfg)
        # not across a K-major operand: its 12 rows a thread are 12 strided shared-memory reads a K step
        if not a.row_contig or (b.row_contig and n > m):
            return replace(cfg, bm=64, bn=192, tm=4, tn=12, **whole_k)
        return replace(cfg, bm=192, bn=64, tm=12, tn=4, **(whole_k if 192 % run == 0 else {"bk": 8}))
    return cfg


def _d_leads(plan, group: str) -> bool:
    """Whether D's stride-1 mode is the first mode of ``group``'s table."""
    return plan.tables[group].strides_of("D")[:1] == (1,)


def _d_box_tile(plan, cfg: KernelConfig) -> KernelConfig:
    """A SIMT producer tile over several tiles (``cfg``: 128 x 128, 8 x 8 a thread) made to store D well:
    a warp's lanes along D's stride-1 side (``lanes_m`` where that is M), and 96 rows or columns where a
    side's first mode is 24 (a tile of 128 cuts it), when that makes D's tile one TMA box
    (gett.tma.store_box), with 4 stages. Threads: 16 along each side (6 a thread along 96, 8 along 128),
    except 32 along D's stride-1 side where that is 128 and the other 96 (4 x 12 a thread).
    H100, f32 TCCG (tile_sweep, session 28), µs, against the tiles run before (128 x 128, or the database's
    96 x 128 / 128 x 96 with 12 x 4 / 4 x 12 a thread and lanes along N):
    - the same 128 x 128 box, lanes along M: #40 84.4 -> 67.3, #46 84.4 -> 66.3;
    - 96 x 128 t6x8, lanes along M: #41 95.4 -> 81.2, #47 95.4 -> 80.7, #31 87.6 -> 83.3, #34 86.8 -> 83.1
      (t12x4: #41 99.0, 44 B of spills under NVRTC 13.0), #44 96.0 -> 83.5 (D's six modes in five);
    - 128 x 96 t8x6: #32 88.1 -> 79.8, #38 87.8 -> 80.0, #42 94.5 -> 84.8, #45 99.0 -> 84.5, #35 89.2 -> 83.3;
    - fast side 128, the other 96: #36 79.6 -> 71.9 (96 x 128 t12x4; t6x8 76.0), #43 84.6 -> 71.3 (128 x 96
      t4x12, lanes along M; t8x6 77.0).
    Lanes along M where D's stride-1 mode is in N: #36 79.6 -> 107.9."""
    from .tiling import tile_plan
    from .tma import store_box
    lanes_m = _d_leads(plan, "M")
    cfg = replace(cfg, lanes_m=lanes_m)
    bm, bn = (96 if plan.tables[g].extents[0] == 24 else 128 for g in "MN")
    fast, slow = (bm, bn) if lanes_m else (bn, bm)
    along_fast, along_slow = (4, 12) if (fast, slow) == (128, 96) else (fast // 16, slow // 16)
    tm, tn = (along_fast, along_slow) if lanes_m else (along_slow, along_fast)
    boxed = replace(cfg, bm=bm, bn=bn, tm=tm, tn=tn, stages=4)
    if boxed != cfg and store_box(tile_plan(plan, boxed), boxed) is not None:
        return boxed
    return cfg
