// The GETT kernel: one CTA computes a BM x BN tile of D for one batch index, reading A and B through
// their index tables (no transposition, no padding) with a STAGES-deep pipeline, then writes
// D = op_out(alpha * acc + beta * op_c(C)) through shared memory so stores run along D's
// stride-1 mode.
//
// A generated translation unit (gett/codegen.py) defines a Problem (types, extents, index tables
// as gett::Table types), the loaders, the math policy and the ops, then instantiates run().
#pragma once
#include "barrier.cuh"
#include "copy.cuh"
#include "grid_dependency.cuh"
#include "layout.cuh"
#include "loader.cuh"
#include "tma.cuh"
#include "types.cuh"

namespace gett {

// Problem must provide: TA TB TC TD Acc Offset; M N K L K_RUN M_RUN (long long; K_RUN > 0: TMA loads over K's
// two modes, K tiles in runs of the first, see produce_tma; M_RUN > 0: over A's rows' two modes, row tiles in
// runs of the first, see m_of); tables AM AK AL BN BK BL CM CN CL DM DN DL; index
// types IndexM IndexN IndexL. Tile: BM BN BK STAGES THREADS GROUP_M; D_M_FAST says whether D's stride-1 mode
// lies in M (then the epilogue walks m fastest); inside that dimension the walk follows a box of EPI_TX x
// EPI_TY (EPI_TY along D's stride-1 mode; 1 x BM for a plain walk). With SPLIT > 1 the K tiles are shared out
// over SPLIT CTAs per output tile, each writing its partial sums to a workspace [SPLIT][L][N][M] (D's
// stride-1 mode in M) or [SPLIT][L][M][N] that reduce_splits() adds up in a fixed order (deterministic
// results). EPI_V > 1: each thread moves EPI_V consecutive walk positions, which the planner has checked are
// contiguous and aligned in both C and D (along the box's second side in a box walk). EPI_CROSS > 1 (plain
// walks only): D's stride-1 mode is a short run of EPI_RUN along the fast dimension, continued contiguously
// by the slow dimension's first mode; the walk takes EPI_CROSS slow steps after each run (see WalkCursor).
// WS: THREADS math threads plus a producer warpgroup that does all the loading (see produce()); with TMA one
// of its threads does it, a box per operand tile, through the tensor maps of A and B (tma.cuh). PERSIST: a
// grid of a few CTAs per SM, each running tiles blockIdx.x, blockIdx.x + gridDim.x, ... through one pipeline
// (run_tiles; with WS, run_tiles_ws), so the next tiles' loads are in flight while a tile's epilogue runs.
// RESIDENT 'A' or 'B' (PERSIST with WS): a CTA's tiles share one row (column) of tiles, whose A (B) tile, all
// of K, its first tile loads into shared memory to stay; later tiles load only the other operand's K tiles.
// PINGPONG (PERSIST with WS, wgmma, two math warpgroups): each math warpgroup takes whole tiles, the CTA's
// even and odd ones, so one stores a tile while the other multiplies the next.
template <class P, class LoadA, class LoadB, class Math, class OpC, class OpOut, int BM, int BN, int BK,
          int STAGES, int THREADS, int GROUP_M, bool D_M_FAST, int EPI_TX, int EPI_TY, int SPLIT, int EPI_V = 1,
          int EPI_RUN = (D_M_FAST ? BM : BN), int EPI_CROSS = 1, bool WS = false, bool TMA = false,
          bool PERSIST = false, class StoreD = NoTmaStore, char RESIDENT = 0, bool PINGPONG = false>
struct Gett {
  static_assert((D_M_FAST ? BM : BN) % (EPI_TX * EPI_TY) == 0, "the epilogue box must tile the CTA tile");
  static_assert(EPI_CROSS == 1 || (EPI_TX == 1 && (D_M_FAST ? BM : BN) % EPI_RUN == 0 &&
                                   (D_M_FAST ? BN : BM) % EPI_CROSS == 0 && EPI_RUN % EPI_V == 0),
                "a crossing walk tiles the CTA tile in runs of whole vectors");
  using Acc = typename P::Acc;
  using Offset = typename P::Offset;
  static constexpr int A_STAGE_BYTES = LoadA::STAGE_ELEMS * int(sizeof(typename P::TA));
  static constexpr int B_STAGE_BYTES = LoadB::STAGE_ELEMS * int(sizeof(typename P::TB));
  // Stages that can ever hold a tile: a CTA runs at most k_tiles_per_split K tiles (K = 24 fills one),
  // unless it runs several tiles (PERSIST).
  // K tiles: with TMA loads over K's two modes (P::K_RUN > 0), each run of the first mode padded to
  // whole tiles (gett/tma.py, k_run)
  static constexpr int RUN_TILES = P::K_RUN > 0 ? int((P::K_RUN + BK - 1) / BK) : 0;
  static constexpr int K_TILES = P::K_RUN > 0 ? RUN_TILES * int(P::K / P::K_RUN) : int((P::K + BK - 1) / BK);
  static_assert(P::K_RUN == 0 || TMA, "K tiles over two modes are TMA loads");
  static constexpr int K_TILES_PER_SPLIT = (K_TILES + SPLIT - 1) / SPLIT;
  // Rows: with TMA loads of A's rows over M's two modes (P::M_RUN > 0, gett/tma.py m_run), each run of M's
  // first mode is padded with zeros to RUN_ROWS, a multiple of 64, and tiles take BM consecutive rows of the
  // padded M (RUN_ROWS x RUNS rows; see m_of), so each of a tile's 64-row boxes lies inside one run: the
  // TMA loads it as a box of one index of M's second mode. The padding's rows lie outside D.
  static constexpr long long M_RUN = P::M_RUN;
  static constexpr long long RUN_ROWS = M_RUN > 0 ? (M_RUN + 63) / 64 * 64 : 0, RUNS = M_RUN > 0 ? P::M / M_RUN : 1;
  static constexpr long long ROWS = M_RUN > 0 ? RUN_ROWS * RUNS : P::M;   // rows the tiles cover
  static_assert(M_RUN == 0 || (TMA && LoadA::kRowContig && BM % 64 == 0 && SPLIT == 1 && P::K_RUN == 0 &&
                               P::M % M_RUN == 0 && !StoreD::kTma),
                "rows in runs: A MN-major through the TMA, whole 64-row boxes, no split K, K one mode");
  static constexpr int USED_STAGES = PERSIST ? STAGES
                                   : K_TILES_PER_SPLIT < 1 ? 1 : K_TILES_PER_SPLIT < STAGES ? K_TILES_PER_SPLIT : STAGES;
  static constexpr bool RESIDENT_A = RESIDENT == 'A', RESIDENT_B = RESIDENT == 'B';
  static constexpr int A_SLOTS = RESIDENT_A ? K_TILES : USED_STAGES;   // A's tiles in shared memory
  // A CTA over several tiles without a producer (run_tiles) has one column of tiles, so every tile takes
  // the same K tiles of B: it copies them once, and they stay. (Copied again for every tile, the 132
  // CTAs' requests for the same few lines of B queue at one L2 slice: H100, TCCG #6's loop without its
  // epilogue 84 -> 61 us without B's copies.)
  static constexpr bool B_STAYS = RESIDENT_B || (PERSIST && !WS);
  static constexpr int B_SLOTS = B_STAYS ? K_TILES : USED_STAGES;   // B's
  static constexpr int PIPE_BYTES = A_SLOTS * A_STAGE_BYTES + B_SLOTS * B_STAGE_BYTES;
  // The epilogue tile holds C, then D, as they are stored (half the bytes of f32 accumulators for 16-bit
  // data); the planner gives C and D one type.
  using TE = typename P::TD;
  static_assert(SameType<typename P::TC, typename P::TD>::value, "C and D have one type");
  // Pitch of the epilogue tile: odd for plain scalar walks (column walks hit all banks); for vector and
  // box walks 16 bytes of pad, so rows stay 16-byte aligned for vector reads while the fragment stores
  // of neighbouring rows or columns still fall in different banks. A crossing walk whose run is an odd
  // number of 16-byte chunks (24 16-bit elements) gets a pitch of one run modulo 128 bytes instead:
  // the eight vectors of a wavefront (a run, then the run one row on) then fill a line in order, not
  // three rows' first chunks, and the fragment stores still see an odd number of chunks a row.
  static constexpr int FAST = D_M_FAST ? BM : BN;   // the tile's extent along the walked dimension
  static constexpr int SLOW = D_M_FAST ? BN : BM;
  static constexpr int EPI_LINE = 128 / int(sizeof(TE));
  static constexpr bool kRunPitch = EPI_CROSS > 1 && EPI_V > 1 && EPI_RUN * int(sizeof(TE)) % 32 == 16;
  static constexpr int EPI_PAD = kRunPitch ? ((EPI_RUN - FAST) % EPI_LINE + EPI_LINE) % EPI_LINE
                               : EPI_V > 1 || EPI_TX > 1 ? 16 / int(sizeof(TE)) : 1;
  static constexpr int EPI_LD = FAST + EPI_PAD;
  static constexpr int EPI_TILE_BYTES = SLOW * EPI_LD * int(sizeof(TE));
  static constexpr int EPI_TILE_ALIGNED = (EPI_TILE_BYTES + 15) / 16 * 16;
  static constexpr int EPI_BYTES = EPI_TILE_ALIGNED + 2 * (BM + BN) * int(sizeof(Offset));
  // The epilogue reuses the stages, except in a CTA over several tiles, whose stages then hold the
  // next tiles' loads.
  static constexpr int EPI_ALIGN = StoreD::kTma ? 128 : 16;   // the TMA stores from 128-byte aligned tiles
  static constexpr int EPI_OFFSET = PERSIST ? (PIPE_BYTES + EPI_ALIGN - 1) / EPI_ALIGN * EPI_ALIGN : 0;
  static constexpr int TILE_BYTES = PERSIST ? EPI_OFFSET + EPI_BYTES : PIPE_BYTES > EPI_BYTES ? PIPE_BYTES : EPI_BYTES;
  // Warp-specialised kernels keep two mbarriers per stage after the tiles, kernels whose A tile is a
  // TMA box one (the stage's bytes landed).
  static constexpr int BARRIER_OFFSET = (TILE_BYTES + 7) / 8 * 8;
  static constexpr int SMEM_BYTES = WS ? BARRIER_OFFSET + 2 * STAGES * 8
                                  : LoadA::kTma ? BARRIER_OFFSET + STAGES * 8 : TILE_BYTES;
  static constexpr int PRODUCER_THREADS = 128;   // the producer warpgroup (WS)
  static constexpr int BLOCK_THREADS = THREADS + (WS ? PRODUCER_THREADS : 0);
  // The threads that compute and store one tile: all math threads, or with PINGPONG one warpgroup.
  static constexpr int TILE_THREADS = PINGPONG ? 128 : THREADS;
  static_assert(!PINGPONG || (PERSIST && WS && Math::kAsyncMath && THREADS == 256 && !StoreD::kTma),
                "warpgroups in turn: a wgmma producer kernel over several tiles, two math warpgroups");
  // Three wgmma warpgroups (192 rows) and the producer launch with 128 registers a thread, two with
  // more than 128 accumulators a thread with 168; the producer hands most of its own to the math
  // warpgroups for their accumulators: a TMA producer (one thread loads) keeps 40, a cp.async one 104
  // for its row offsets and addresses.
  static constexpr bool kShareRegisters = WS && Math::kAsyncMath && (THREADS == 384 || BM * BN / TILE_THREADS > 128);
  static constexpr int PRODUCER_REGISTERS = TMA ? 40 : 104;
  static_assert(!kShareRegisters || TMA || (PINGPONG && THREADS == 256),
                "a cp.async producer shares its registers with two math warpgroups taking tiles in turn");
  // setmaxnreg.inc waits for registers the CTA's warps released: the pool is what the launch gave it
  static constexpr int LAUNCH_REGISTERS = 65536 / BLOCK_THREADS / 8 * 8;
  static constexpr int MATH_REGISTERS =
      (LAUNCH_REGISTERS * BLOCK_THREADS - PRODUCER_THREADS * PRODUCER_REGISTERS) / THREADS / 8 * 8;
  // Split-K partials run along D's stride-1 mode where that is M's first mode (a plain walk of M), so
  // reduce_splits reads and writes D in whole sectors.
  static constexpr bool PARTIALS_M_FAST = D_M_FAST && EPI_TX == 1;
  static_assert(!TMA || (WS && LoadA::kSwizzle128 && LoadB::kSwizzle128 && !LoadA::kTransposes && !LoadB::kTransposes),
                "TMA loads plain swizzled tiles in the producer warpgroup (no transpositions)");
  // TMA tiles with an op: the math threads apply it to each landed stage (a resident tile has none).
  static constexpr bool kOpsOnLanded = TMA && (LoadA::kHasOp || LoadB::kHasOp);
  static_assert(!LoadA::kTma || (!WS && !TMA && !LoadB::kTma), "a TMA box tile is A's, in a kernel without a producer");
  static_assert(!PERSIST || WS || ((LoadA::kTma || (LoadA::kAsync && !LoadA::kTransposes && !LoadA::kHasOp)) &&
                                   LoadB::kAsync && !LoadB::kTransposes && !Math::kAsyncMath && SPLIT == 1 && P::L == 1 &&
                                   P::N <= BN),
                "a CTA over several tiles: A a TMA box tile or copied asynchronously without an op (its loader holds a "
                "later tile's rows by then), B copied asynchronously, one column of tiles, one batch");
  static_assert(!PERSIST || !WS || SPLIT == 1, "a producer over several tiles: no split K");
  static_assert(RESIDENT == 0 || ((RESIDENT_A || RESIDENT_B) && PERSIST && WS && SPLIT == 1 && P::L == 1 &&
                                   !(RESIDENT_A ? LoadA::kHasOp || LoadA::kTransposes : LoadB::kHasOp || LoadB::kTransposes)),
                "a resident A or B tile: a producer over several tiles, one batch, the operand copied as it is");
  static_assert(!StoreD::kTma || (PERSIST && WS && SPLIT == 1 && P::L == 1),
                "D stored through the TMA by a producer kernel over several tiles, one batch");

  // Tiles: batches outermost; inside a batch GROUP_M row tiles sweep the columns together, so
  // neighbouring CTAs share A and B tiles in L2.
  static constexpr long long TILES_M = (ROWS + BM - 1) / BM, TILES_N = (P::N + BN - 1) / BN;
  static constexpr long long TILES = TILES_M * TILES_N * P::L;
  // M's index of row p of the rows the tiles cover (with M_RUN, a row short of its run's padding).
  __device__ __forceinline__ static long long m_of(long long p) {
    if constexpr (M_RUN > 0) return p % RUN_ROWS + p / RUN_ROWS * M_RUN;
    return p;
  }
  struct Origin {
    long long l, m0, n0;   // batch index, first row, first column
  };
  __device__ __forceinline__ static Origin origin(long long tile) {
    if constexpr (RESIDENT_A) return {0, tile % TILES_M * BM, tile / TILES_M * BN};   // rows fastest
    if constexpr (RESIDENT_B) return {0, tile / TILES_N * BM, tile % TILES_N * BN};   // columns fastest
    const long long t = tile % (TILES_M * TILES_N);
    const long long first_m = t / (GROUP_M * TILES_N) * GROUP_M;
    const long long group_rows = (TILES_M - first_m) < GROUP_M ? (TILES_M - first_m) : GROUP_M;
    const long long in_group = t % (GROUP_M * TILES_N);
    return {tile / (TILES_M * TILES_N), (first_m + in_group % group_rows) * BM, in_group / group_rows * BN};
  }

  __device__ __forceinline__ static void run(const typename P::TA* __restrict__ A,
                                             const typename P::TB* __restrict__ B,
                                             const typename P::TC* __restrict__ C,
                                             typename P::TD* __restrict__ D, Acc* __restrict__ partials,
                                             Acc alpha, Acc beta, const TensorMap* map_a = nullptr,
                                             const TensorMap* map_b = nullptr, const TensorMap* map_d = nullptr) {
    const int tid = threadIdx.x;
    if constexpr (PERSIST && WS) {
      run_tiles_ws(A, B, C, D, alpha, beta, tid, map_a, map_b, map_d);
      return;
    } else if constexpr (PERSIST) {
      run_tiles(A, B, C, D, alpha, beta, tid, map_a);
      return;
    }

    const long long cta = (long long)blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (cta >= TILES * SPLIT) return;
    const int split = int(cta / TILES);
    const Origin at = origin(cta % TILES);
    const long long l = at.l, m0 = at.m0, n0 = at.n0;

    const typename P::IndexL li = typename P::IndexL(l);
    A += P::AL::offset(li);
    B += P::BL::offset(li);
    C += P::CL::offset(li);
    D += P::DL::offset(li);

    constexpr int k_tiles_per_split = (K_TILES + SPLIT - 1) / SPLIT;
    const int k_first = split * k_tiles_per_split;   // this CTA's K tiles: [k_first, k_first + k_tiles)
    const int k_rest = K_TILES - k_first;
    const int k_tiles = k_rest < k_tiles_per_split ? (k_rest > 0 ? k_rest : 0) : k_tiles_per_split;

    Math math;
    if constexpr (WS) {
      // TMA: one arrival, then the bytes; the last CTA-wide barrier: the producer leaves after its loads
      unsigned long long* full = stage_barriers(tid, TMA ? 1 : PRODUCER_THREADS, TILE_THREADS / 32);
      unsigned long long* empty = full + STAGES;
      if (tid >= THREADS) {
        if constexpr (kShareRegisters) warpgroup_registers_dec<PRODUCER_REGISTERS>();
        produce_tile(A, B, C, m0, n0, k_first, k_tiles, 0, SPLIT == 1 && !(beta == zero<Acc>()), tid, full, empty,
                     map_a, map_b);
        return;
      }
      if constexpr (kShareRegisters) warpgroup_registers_inc<MATH_REGISTERS>();
      math.init(tid);
      consume(math, 0, k_first, k_tiles, full, empty);
    } else {
      math.init(tid);
      mainloop(math, A, B, m0, n0, k_first, k_tiles, tid, map_a);
    }
    if constexpr (SPLIT == 1) {
      epilogue(math, C, D, m0, n0, alpha, beta, tid);
    } else {   // partial sums, [split][l][n][m] or [split][l][m][n] (PARTIALS_M_FAST, see reduce_splits)
      Acc* out = partials + ((long long)split * P::L + l) * P::M * P::N;
      math.for_each([&](int r, int c, Acc v) {
        if (m0 + r < P::M && n0 + c < P::N)
          out[PARTIALS_M_FAST ? (n0 + c) * P::M + m0 + r : (m0 + r) * P::N + n0 + c] = v;
      });
    }
  }

  __device__ __forceinline__ static unsigned char* smem_base() {
    extern __shared__ __align__(1024) unsigned char smem[];   // 1024: wgmma's swizzle atoms
    return smem;
  }
  // The stages' mbarriers, after the tiles, initialised and visible to the CTA: full[s] expecting
  // `full_count` arrivals, and where `empty_count` > 0, empty[s] = full[STAGES + s] expecting that many.
  __device__ __forceinline__ static unsigned long long* stage_barriers(int tid, unsigned full_count,
                                                                       unsigned empty_count = 0) {
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem_base() + BARRIER_OFFSET);
    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mbarrier_init(&full[s], full_count);
        if (empty_count > 0) mbarrier_init(&full[STAGES + s], empty_count);
      }
      fence_proxy_async();   // the barriers, initialised, seen by the TMA unit
    }
    __syncthreads();
    return full;
  }
  __device__ __forceinline__ static typename P::TA* stage_a(int s) {
    return reinterpret_cast<typename P::TA*>(smem_base()) + s * LoadA::STAGE_ELEMS;
  }
  __device__ __forceinline__ static typename P::TB* stage_b(int s) {
    return reinterpret_cast<typename P::TB*>(smem_base() + A_SLOTS * A_STAGE_BYTES) + s * LoadB::STAGE_ELEMS;
  }
  // A's (B's) tile for the CTA's t-th K tile, the kt-th of its output tile: stage t's, or the resident kt-th.
  __device__ __forceinline__ static typename P::TA* tile_a(int t, int kt) {
    return stage_a(RESIDENT_A ? kt : t % STAGES);
  }
  __device__ __forceinline__ static typename P::TB* tile_b(int t, int kt) {
    return stage_b(B_STAYS ? kt : t % STAGES);
  }
  // A barrier over the threads that compute and store the tile: all of them, the math warps (WS), or one
  // math warpgroup (PINGPONG).
  __device__ __forceinline__ static void sync_tile_threads() {
    if constexpr (PINGPONG) named_barrier_sync_at<128>(kOwnBarrier + int(threadIdx.x) / 128);
    else if constexpr (WS) named_barrier_sync<1, THREADS>();
    else __syncthreads();
  }
  // PINGPONG's named barriers, a pair of each kind (1 is the math threads', 2 the producer's): a math
  // warpgroup's own; the turn to take stages (after the other warpgroup's tile has its K tiles, so each
  // waits for a stage's fill only once the fill before it landed); the turn to use the epilogue tile.
  static constexpr int kOwnBarrier = 3, kMmaTurn = 5, kEpilogueTurn = 7;
  __device__ __forceinline__ static void wait_turn(int turn, int group) {
    named_barrier_sync_at<256>(turn + group);
  }
  __device__ __forceinline__ static void pass_turn(int turn, int group) {
    named_barrier_arrive_at<256>(turn + 1 - group);
  }

  // Vectors an op pass transforms at a time in the math threads: two overlap their shared-memory
  // latencies (fused #13 138 -> 133 us, #19 66 -> 64, H100); four took 145 registers (one CTA per SM).
  static constexpr int MATH_BATCH = 2;
  // Every thread loads and computes: a STAGES-deep cp.async (or register-staged) pipeline with one
  // barrier per K tile.
  // A TMA box tile (LoadA::kTma) is loaded by one thread through map_a; every thread waits for its
  // stage's barrier before the stage's __syncthreads.
  __device__ __forceinline__ static void mainloop(Math& math, const typename P::TA* __restrict__ A,
                                                  const typename P::TB* __restrict__ B, long long m0, long long n0,
                                                  int k_first, int k_tiles, int tid, const TensorMap* map_a) {
    LoadA load_a;
    LoadB load_b;
    if constexpr (LoadA::kTma) {
      load_a.init(map_a, stage_barriers(tid, 1), m0, k_first, tid);   // one arrival, then the bytes
    } else {
      load_a.init(A, m0, P::M, P::K, tid);
    }
    load_b.init(B, n0, P::N, P::K, tid);
    // Asynchronous math (wgmma) keeps one tile's MMAs in flight across the barrier, so a stage is
    // free again only two iterations after its MMAs began: cp.async loads one tile fewer ahead.
    // Issuing wgmma takes no time, so a register-staged tile waits a whole iteration in registers
    // before it is stored, or its load latency is exposed: it lands in shared memory LAG tiles after
    // its loads (that lag is the slack wgmma needs, where no operand is copied asynchronously).
    constexpr bool kAnyAsync = LoadA::kAsync || LoadB::kAsync;
    // With both operands copied asynchronously, a stage is refilled as soon as every warpgroup's MMAs
    // on it are done (a second barrier per tile), so the loads run one tile further ahead.
    constexpr bool kEarlyRefill = Math::kAsyncMath && LoadA::kAsync && LoadB::kAsync;
    constexpr int AHEAD = STAGES - 1 - (Math::kAsyncMath && kAnyAsync && !kEarlyRefill ? 1 : 0);
    static_assert(AHEAD >= 1, "the pipeline must load at least one tile ahead");
    constexpr int LAG = Math::kAsyncMath && !(LoadA::kAsync && LoadB::kAsync) && AHEAD >= 2 ? 1 : 0;
    static_assert(!Math::kAsyncMath || kAnyAsync || LAG, "wgmma with register-staged tiles needs 3 stages");
    auto store_tile = [&](int t) {
      load_a.store(stage_a(t % STAGES));
      load_b.store(stage_b(t % STAGES));
    };
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
      if (s < k_tiles) {
        load_a.issue(stage_a(s), k_first + s);
        load_b.issue(stage_b(s), k_first + s);
        if (s < AHEAD - LAG) store_tile(s);
      }
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int stage = kt % STAGES;
      cp_async_wait<AHEAD - 1>();
      if constexpr (LoadA::kTma) load_a.wait(kt);
      load_a.template transform<MATH_BATCH>(stage_a(stage), k_first + kt);
      load_b.template transform<MATH_BATCH>(stage_b(stage), k_first + kt);
      if constexpr (LoadA::kTransposes || LoadB::kTransposes) {
        __syncthreads();   // the blocks hold every thread's copies
        load_a.template transpose<THREADS / 32>(stage_a(stage), tid / 32, tid % 32);
        load_b.template transpose<THREADS / 32>(stage_b(stage), tid / 32, tid % 32);
      }
      if constexpr (Math::kAsyncMath) fence_proxy_async();   // wgmma reads shared memory through the async proxy
      __syncthreads();
      // Refill a stage every thread has finished with (all passed the barrier after their last use).
      const int next = kt + AHEAD;
      auto refill = [&] {
        if (next < k_tiles) {
          load_a.issue(stage_a(next % STAGES), k_first + next);
          load_b.issue(stage_b(next % STAGES), k_first + next);
        }
        cp_async_commit();
      };
      const long long k_left = P::K - (long long)(k_first + kt) * BK;
      // Synchronous math starts the loads first, so they are in flight during the MMAs; asynchronous
      // math starts its MMAs first, issues the loads while the tensor cores work, then waits for the
      // previous tile's MMAs only.
      if constexpr (!Math::kAsyncMath) refill();
      math.compute(stage_a(stage), stage_b(stage), k_left < BK ? int(k_left) : BK);
      if constexpr (kEarlyRefill) {
        math.template wait<1>();   // this warpgroup's MMAs of tile kt - 1 are done ...
        __syncthreads();           // ... and every warpgroup's: its stage, next % STAGES, is free
        refill();
      } else if constexpr (Math::kAsyncMath) {
        // The tile held in registers since the last iteration goes to its stage (whose MMAs were
        // waited for in an earlier iteration), before the registers take the next tile's loads.
        if (LAG && next - LAG < k_tiles) store_tile(next - LAG);
        refill();
        math.template wait<1>();
      }
      if (!LAG && next < k_tiles) store_tile(next);
    }
    if constexpr (Math::kAsyncMath) math.template wait<0>();
    cp_async_wait<0>();
    __syncthreads();
  }

  // PERSIST: this CTA's tiles (blockIdx.x, then every gridDim.x-th) and all their K tiles as one
  // sequence through the stages, A's boxes loaded by one thread (or A's tile copied by every thread, its
  // rows found again at each tile's first K tile); B's K tiles copied by every thread (cp.async) once,
  // before A's (B_STAYS); ops applied in place once a stage (B's tiles: the first time) has landed;
  // the epilogue has its own shared memory, so the loads of the next STAGES - 1 K tiles, the next
  // tiles' once K fits in one, are in flight while it runs. (The tiles are one column: N <= BN.)
  __device__ __forceinline__ static void run_tiles(const typename P::TA* __restrict__ A,
                                                   const typename P::TB* __restrict__ B,
                                                   const typename P::TC* __restrict__ C,
                                                   typename P::TD* __restrict__ D, Acc alpha, Acc beta, int tid,
                                                   const TensorMap* map_a) {
    constexpr int k_tiles = K_TILES;
    constexpr long long tiles = TILES;   // one column of tiles, one batch: the row tiles
    const long long first = blockIdx.x, step = gridDim.x;
    const int loads = first < tiles ? int((tiles - 1 - first) / step + 1) * k_tiles : 0;
    auto first_row = [&](int t) { return (first + t / k_tiles * step) * BM; };   // of the t-th load's tile
    LoadA load_a;
    LoadB load_b;
    if constexpr (LoadA::kTma) load_a.init(map_a, stage_barriers(tid, 1), 0, 0, tid);   // one arrival, then the bytes
    load_b.init(B, 0, P::N, P::K, tid);
    if (loads > 0) {
#pragma unroll
      for (int kt = 0; kt < k_tiles; ++kt) load_b.issue(tile_b(0, kt), kt);
    }
    cp_async_commit();   // the oldest group: landed once A's first K tile has
    auto issue = [&](int t) {
      if (t < loads) {
        if constexpr (LoadA::kTma) {
          load_a.issue_tile(stage_a(t % STAGES), first_row(t), t % k_tiles, t);
        } else {
          if (t % k_tiles == 0) load_a.init(A, first_row(t), P::M, P::K, tid);
          load_a.issue(stage_a(t % STAGES), t % k_tiles);
        }
      }
      cp_async_commit();
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) issue(t);
    Math math;
    for (int t = 0; t < loads; ++t) {
      const int kt = t % k_tiles;
      cp_async_wait<STAGES - 2>();
      if constexpr (LoadA::kTma) load_a.wait(t);
      load_a.template transform<MATH_BATCH>(stage_a(t % STAGES), kt);   // the ops, where A or B has one
      if (t < k_tiles) load_b.template transform<MATH_BATCH>(tile_b(t, kt), kt);
      __syncthreads();
      issue(t + STAGES - 1);   // into the stage every thread has finished with
      if (kt == 0) math.init(tid);
      const long long k_left = P::K - (long long)kt * BK;
      math.compute(stage_a(t % STAGES), tile_b(t, kt), k_left < BK ? int(k_left) : BK);
      if (kt == k_tiles - 1) epilogue(math, C, D, first_row(t), 0, alpha, beta, tid);
    }
  }

  // Warp specialisation (WS): a producer warpgroup fills the stages while the THREADS math threads
  // only wait for full stages and run their MMAs (wgmma) or multiply-adds (SIMT), so no CTA-wide
  // barrier stands between tiles and the loads' address arithmetic and the operand ops leave the math
  // warps' issue slots. Stage s has two mbarriers: full[s] (the producer's 128 threads arrive once
  // their copies of a tile landed, and any op or transposition is done) and empty[s] (each math warp
  // arrives once its products on it are done).
  // Loaders with work after the copies land (an op applied in place, or transposed blocks) wait for
  // their copies LANDING tiles after issuing them; more would deadlock: the stage the producer waits
  // to refill is released only once the math threads have the tile after it.
  static constexpr bool kWorkOnLanding = (LoadA::kAsync && LoadA::kHasOp) || (LoadB::kAsync && LoadB::kHasOp) ||
                                         LoadA::kTransposes || LoadB::kTransposes;
  // An operand the producer stages through its registers (SIMT math): it stores a tile once its loads
  // return, then arrives (release) for that and its copies, which it waits for too.
  static constexpr bool kStagedLoads = !LoadA::kAsync || !LoadB::kAsync;
  static constexpr int LANDING = STAGES - 2;
  static constexpr int LANDING_BATCH = 4;   // vectors transformed at a time (the producer has registers to spare)

  __device__ __forceinline__ static void produce(const typename P::TA* __restrict__ A,
                                                 const typename P::TB* __restrict__ B, long long m0, long long n0,
                                                 int k_first, int k_tiles, int t0, int ptid, unsigned long long* full,
                                                 unsigned long long* empty) {
    static_assert(!kWorkOnLanding || LANDING >= 1, "ops or transpositions in the producer need 3 stages");
    static_assert(!kStagedLoads || (!kWorkOnLanding && !Math::kAsyncMath),
                  "an operand staged through the producer's registers: SIMT math, no work on landing");
    LoadA load_a;
    LoadB load_b;
    load_a.init(A, m0, P::M, P::K, ptid);
    load_b.init(B, n0, P::N, P::K, ptid);
    const int last = k_tiles + (kWorkOnLanding ? LANDING : 0);
    for (int t = 0; t < last; ++t) {
      if (t < k_tiles) {
        const int s = (t0 + t) % STAGES;
        wait_empty(empty, t0 + t);
        if (!RESIDENT_A || t0 == 0) load_a.issue(tile_a(t0 + t, t), k_first + t);
        if (!RESIDENT_B || t0 == 0) load_b.issue(tile_b(t0 + t, t), k_first + t);
        if constexpr (kStagedLoads) {   // the staged tile waits for its loads; then one arrival for both
          cp_async_commit();
          load_a.store(stage_a(s));
          load_b.store(stage_b(s));
          cp_async_wait<0>();
          mbarrier_arrive(&full[s]);
        } else if constexpr (kWorkOnLanding) {
          cp_async_commit();
        } else {
          mbarrier_arrive_on_copies(&full[s]);
        }
      }
      if constexpr (kWorkOnLanding) {
        const int u = t - LANDING;
        if (u < 0) continue;
        if (t < k_tiles) cp_async_wait<LANDING>(); else cp_async_wait<0>();
        const int s = (t0 + u) % STAGES;
        load_a.template transform<LANDING_BATCH>(stage_a(s), k_first + u);
        load_b.template transform<LANDING_BATCH>(stage_b(s), k_first + u);
        if constexpr (LoadA::kTransposes || LoadB::kTransposes) {
          named_barrier_sync<2, PRODUCER_THREADS>();   // the blocks hold every producer thread's copies
          load_a.template transpose<PRODUCER_THREADS / 32>(stage_a(s), ptid / 32, ptid % 32);
          load_b.template transpose<PRODUCER_THREADS / 32>(stage_b(s), ptid / 32, ptid % 32);
        }
        mbarrier_arrive(&full[s]);
      }
    }
  }
  // Until the stage of the CTA's t-th K tile is free: the MMAs on the tile it held before are done.
  __device__ __forceinline__ static void wait_empty(unsigned long long* empty, int t) {
    if (t >= STAGES) mbarrier_wait(&empty[t % STAGES], ((t / STAGES) & 1) ^ 1);
  }

  // The producer warpgroup's part of one tile: the loads of its K tiles k_first, ..., the CTA's K tiles
  // t0, t0 + 1, ... through the stages; then, with `prefetch`, C's part of the tile asked into L2.
  __device__ __forceinline__ static void produce_tile(const typename P::TA* __restrict__ A,
                                                      const typename P::TB* __restrict__ B,
                                                      const typename P::TC* __restrict__ C, long long m0, long long n0,
                                                      int k_first, int k_tiles, int t0, bool prefetch, int tid,
                                                      unsigned long long* full, unsigned long long* empty,
                                                      const TensorMap* map_a, const TensorMap* map_b) {
    if constexpr (TMA) {
      if (tid == THREADS) produce_tma(map_a, map_b, int(m0), int(n0), k_first, k_tiles, t0, full, empty);
    } else {
      produce(A, B, m0, n0, k_first, k_tiles, t0, tid - THREADS, full, empty);
    }
    if (!prefetch) return;
    if constexpr (TMA) {   // the other producer warps wait for the loading thread's warp
      if (tid < THREADS + 32) {
        __syncwarp();   // bar counts whole warps
        named_barrier_arrive<2, PRODUCER_THREADS>();
      } else {
        named_barrier_sync<2, PRODUCER_THREADS>();
      }
    }
    prefetch_c(C, m0, n0, tid - THREADS);
  }

  // A CTA's tiles: blockIdx.x, then every tile_step()-th. With a resident B that step is the CTAs of whole
  // rows of TILES_N (the host launches a multiple of TILES_N; any beyond get none), so that, tiles running
  // along a row first (origin), a CTA's tiles keep one column; fewer CTAs than a row would leave D unwritten.
  // A resident A likewise, in columns of TILES_M.
  static constexpr long long kResidentTiles = RESIDENT_A ? TILES_M : RESIDENT_B ? TILES_N : 1;
  __device__ __forceinline__ static long long tile_step() {
    return (long long)gridDim.x / kResidentTiles * kResidentTiles;
  }
  __device__ __forceinline__ static long long first_tile() {
    if constexpr (RESIDENT != 0) {
      if (tile_step() == 0) __trap();
      return blockIdx.x < tile_step() ? (long long)blockIdx.x : TILES;
    }
    return blockIdx.x;
  }

  // PERSIST with a producer warpgroup: a grid of the CTAs the SMs hold at once, each running tiles
  // first_tile(), then every tile_step()-th; the producer's loads and the MMAs go through the stages as
  // one sequence of K tiles, and the epilogue has shared memory of its own, so the producer loads the
  // next tile's first K tiles while the math warpgroups store a tile. With PINGPONG the warpgroups take
  // tiles in turn: one multiplies while the other stores, through the one epilogue tile by turns.
  __device__ __forceinline__ static void run_tiles_ws(const typename P::TA* __restrict__ A,
                                                      const typename P::TB* __restrict__ B,
                                                      const typename P::TC* __restrict__ C,
                                                      typename P::TD* __restrict__ D, Acc alpha, Acc beta, int tid,
                                                      const TensorMap* map_a, const TensorMap* map_b,
                                                      const TensorMap* map_d) {
    unsigned long long* full = stage_barriers(tid, TMA ? 1 : PRODUCER_THREADS, TILE_THREADS / 32);
    unsigned long long* empty = full + STAGES;
    if (tid >= THREADS) {
      if constexpr (kShareRegisters) warpgroup_registers_dec<PRODUCER_REGISTERS>();
      const bool prefetch = !(beta == zero<Acc>());
      int t0 = 0;
      for (long long tile = first_tile(); tile < TILES; tile += tile_step(), t0 += K_TILES) {
        const Origin at = origin(tile);
        const typename P::IndexL l = typename P::IndexL(at.l);
        produce_tile(A + P::AL::offset(l), B + P::BL::offset(l), C + P::CL::offset(l), at.m0, at.n0, 0, K_TILES, t0,
                     prefetch, tid, full, empty, map_a, map_b);
      }
      return;
    }
    if constexpr (kShareRegisters) warpgroup_registers_inc<MATH_REGISTERS>();
    if constexpr (PINGPONG) static_assert(Math::kSlabs * 64 == BM, "a warpgroup holds all rows of its tiles");
    Math math;
    // PINGPONG: warpgroup `group` takes the CTA's tiles j = group, group + 2, ..., its thread `ttid`
    const int group = PINGPONG ? tid / 128 : 0, ttid = PINGPONG ? tid % 128 : tid;
    int t0 = 0, j = 0;
    for (long long tile = first_tile(); tile < TILES; tile += tile_step(), t0 += K_TILES, ++j) {
      if (PINGPONG && j % 2 != group) continue;
      const Origin at = origin(tile);
      const typename P::IndexL l = typename P::IndexL(at.l);
      const bool more = tile + tile_step() < TILES;   // the other warpgroup (PINGPONG) takes the next tile
      if (PINGPONG && j > 0) wait_turn(kMmaTurn, group);
      // Opaque to the compiler each tile (PINGPONG), so the epilogue's shared addresses (offsets from this
      // thread's place) are not all hoisted out of the loop: kept, they spilled 160 accumulators (NVRTC 13.0).
      int own = ttid;
      if constexpr (PINGPONG) asm volatile("" : "+r"(own));
      math.init(own);
      consume(math, t0, 0, K_TILES, full, empty);
      if constexpr (StoreD::kTma) {
        if (beta == zero<Acc>()) {
          epilogue_tma(math, at.m0, at.n0, alpha, tid, map_d);
          continue;
        }
      }
      if constexpr (PINGPONG) {
        if (more) pass_turn(kMmaTurn, group);
        if (j > 0) wait_turn(kEpilogueTurn, group);
      }
      epilogue(math, C + P::CL::offset(l), D + P::DL::offset(l), at.m0, at.n0, alpha, beta, own);
      if (PINGPONG && more) pass_turn(kEpilogueTurn, group);
    }
    if constexpr (StoreD::kTma) {
      if (tid == 0) bulk_wait<0, false>();   // the last store done before the CTA (and its tile) leaves
    }
  }

  // D's tile as one TMA box (StoreD, beta == 0): the accumulators go into the epilogue tile in the box's
  // layout, one thread asks the TMA to store it, and the math warps go on to the next tile while it drains;
  // the tile is written again only once that store has read it.
  static constexpr bool kBoxRowRuns = StoreD::kTma && StoreD::template kRowRuns<Math::kRowRun>;
  __device__ __forceinline__ static void epilogue_tma(const Math& math, long long m0, long long n0, Acc alpha,
                                                      int tid, const TensorMap* map_d) {
    TE* tile = reinterpret_cast<TE*>(smem_base() + EPI_OFFSET);
    if (tid == 0) bulk_wait<0, true>();
    sync_tile_threads();
    if constexpr (kBoxRowRuns) {
      math.for_each_row_run([&](int r, int c, const Acc (&v)[Math::kRowRun]) {
        combine_run<false>(tile, StoreD::position(r, c), v, alpha, zero<Acc>());
      });
    } else {
      math.for_each([&](int r, int c, Acc v) {
        const Acc one[1] = {v};
        combine_run<false>(tile, StoreD::position(r, c), one, alpha, zero<Acc>());
      });
    }
    fence_proxy_async();   // this thread's writes to the tile, seen by the TMA
    sync_tile_threads();
    if (tid == 0) StoreD::store(map_d, tile, typename P::IndexM(m0), typename P::IndexN(n0));
  }

  // With beta != 0, the producer warpgroup, done with its loads (STAGES - 1 tiles before the math
  // warps are done with theirs), asks L2 for C's part of the tile, so the epilogue's reads of C find it
  // there instead of waiting on DRAM a few vectors at a time: #12 ``ab-ac-cb`` with beta = 1 499 -> 478
  // us, #20-30 -4%; asking 4, 8 or 16 tiles earlier measured slower (482, 485, 495 us against 474 in one
  // run; H100). One request a vector of the epilogue's walk.
  __device__ __forceinline__ static void prefetch_c(const typename P::TC* __restrict__ C, long long m0, long long n0,
                                                    int ptid) {
    const long long fast0 = D_M_FAST ? m0 : n0, slow0 = D_M_FAST ? n0 : m0;
    for_each_vector<PRODUCER_THREADS>(fast_inside(fast0), slow_inside(slow0), ptid, [&](int w, int s, bool inside) {
      if (!inside) return;
      const long long f = fast0 + fast_coordinate(w), r = slow0 + s;
      const long long m = m_of(D_M_FAST ? f : r), n = D_M_FAST ? r : f;
      prefetch_l2(C + (P::CM::offset(typename P::IndexM(m)) + P::CN::offset(typename P::IndexN(n))));
    });
  }

  // TMA: one thread waits for a free stage, announces the stage's bytes on its full barrier and
  // starts the boxes of A and B; the barrier's phase completes when they have all landed.
  __device__ __forceinline__ static void produce_tma(const TensorMap* map_a, const TensorMap* map_b, int m0, int n0,
                                                     int k_first, int k_tiles, int t0, unsigned long long* full,
                                                     unsigned long long* empty) {
    for (int t = 0; t < k_tiles; ++t) {
      const int s = (t0 + t) % STAGES;
      wait_empty(empty, t0 + t);
      // a resident operand: the CTA's first tile loads it
      const bool load_a = !RESIDENT_A || t0 == 0, load_b = !RESIDENT_B || t0 == 0;
      mbarrier_arrive_expect_bytes(&full[s], (load_a ? A_STAGE_BYTES : 0) + (load_b ? B_STAGE_BYTES : 0));
      // (tile in the run, run) with K_RUN, else (tile, 0): a run's tiles in a row (K's second mode fastest
      // instead: TCCG #13 81 against 68 us, H100)
      const int kt = k_first + t;
      const int k0 = (RUN_TILES ? kt % RUN_TILES : kt) * BK, k1 = RUN_TILES ? kt / RUN_TILES : 0;
      constexpr bool runs = RUN_TILES > 0;
      if (load_a) tma_load_tile<typename P::TA, BM, BK, LoadA::kRowContig, runs, int(RUN_ROWS)>(tile_a(t0 + t, t), map_a,
                                                                                               m0, k0, k1, &full[s]);
      if (load_b) tma_load_tile<typename P::TB, BN, BK, LoadB::kRowContig, runs>(tile_b(t0 + t, t), map_b, n0, k0, k1, &full[s]);
    }
  }

  // The math warps' K tiles k_first, ..., the CTA's t0, t0 + 1, ... through the stages: each waits for
  // its stage, and each warp releases the stage once its products on it are done (wgmma: once its MMAs
  // on the next tile have started and those on this one are waited for).
  __device__ __forceinline__ static void consume(Math& math, int t0, int k_first, int k_tiles,
                                                 unsigned long long* full, unsigned long long* empty) {
    const bool releases = threadIdx.x % 32 == 0;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int t = t0 + kt;
      mbarrier_wait(&full[t % STAGES], (t / STAGES) & 1);
      if constexpr (kOpsOnLanded) {   // the op by the math threads: one producer thread loads by TMA
        const int ttid = PINGPONG ? int(threadIdx.x) % 128 : int(threadIdx.x);
        LoadA::template transform_landed<TILE_THREADS>(tile_a(t, kt), ttid);
        LoadB::template transform_landed<TILE_THREADS>(tile_b(t, kt), ttid);
        fence_proxy_async();   // this thread's writes, seen by wgmma's async proxy
        sync_tile_threads();
      }
      const long long k_left = P::K - (long long)(k_first + kt) * BK;
      const int k_valid = k_left < BK ? int(k_left) : BK;
      if constexpr (Math::kAsyncMath) {
        if constexpr (!TMA) fence_proxy_async();   // the stage's generic-proxy writes, seen by wgmma's async proxy
        math.compute(tile_a(t, kt), tile_b(t, kt), k_valid);
        math.template wait<1>();   // this warp's MMAs of tile t - 1 are done: release its stage
        if (kt > 0 && releases) mbarrier_arrive(&empty[(t - 1) % STAGES]);
      } else {
        math.compute(tile_a(t, kt), tile_b(t, kt), k_valid);
        __syncwarp();   // every lane's reads of the stage are done
        if (releases) mbarrier_arrive(&empty[t % STAGES]);
      }
    }
    if constexpr (Math::kAsyncMath) {
      math.template wait<0>();
      if (k_tiles > 0 && releases) mbarrier_arrive(&empty[(t0 + k_tiles - 1) % STAGES]);   // the next tile's loads
    }
    sync_tile_threads();   // every warp's products are done before the epilogue (the stages, or its own tile)
  }

  static constexpr bool kBox = EPI_TX > 1;

  // Tile coordinate along the fast dimension of walk position w: plain walks go straight along it,
  // box walks take EPI_TY consecutive positions of D's stride-1 mode (the box's second side, EPI_TX
  // coordinates apart), then the next of the first side, box after box.
  __device__ __forceinline__ static int fast_coordinate(int w) {
    if constexpr (!kBox) return w;
    return w % EPI_TY * EPI_TX + w / EPI_TY % EPI_TX + w / (EPI_TX * EPI_TY) * (EPI_TX * EPI_TY);
  }
  // ... and back: the walk position of fast coordinate f.
  __device__ __forceinline__ static int walk_of(int f) {
    if constexpr (!kBox) return f;
    return f / EPI_TX % EPI_TY + f % EPI_TX * EPI_TY + f / (EPI_TX * EPI_TY) * (EPI_TX * EPI_TY);
  }
  // Box walks whose first side is EPI_TX long, over mma.sync fragments: a lane's rows EPI_TX apart
  // (Math::for_each_strided_run) are neighbours in the walk, runs of kBoxRun whole inside one box
  // (warps start at multiples of kWarpRows, which EPI_TX * EPI_TY is), stored at once where that makes
  // 8 bytes or more. Their stores then spread over the banks without tile_index's XOR (a bank-conflict
  // count of the 576-row tile: 576 wavefronts without, 896 with). H100, f16 (runner A/B, two rounds):
  // #3 (8 x 72 boxes, warps of 32 rows: 4 elements a store) 49.5 -> 46.5 us, #4 52.8 -> 49.5, with C
  // read 72 -> 59; in #6-8's 16 x 48 boxes warps of 32 rows make 4-byte runs, which gained nothing (#6
  // 133.5 -> 134.4, #7 173.2 -> 179.8), warps of 64 rows 8-byte ones (#7/#8's entries, tile_sweep: #7
  // 173.5 -> 161.5, #8 122.9 -> 118.0; #6 even).
  static constexpr int kStridedRun = Math::kWarpRows > 0 && EPI_TX % 8 == 0 && Math::kWarpRows % EPI_TX == 0
                                     ? Math::kWarpRows / EPI_TX : 1;
  static constexpr int kBoxRun = kBox && D_M_FAST && EPI_TY % kStridedRun == 0 &&
                                 kStridedRun * int(sizeof(TE)) >= 8 ? kStridedRun : 1;

  // Where walk position w of slow row s sits in the accumulator tile. Rows hold the fast dimension in
  // walk order, so a warp's walk reads consecutive words and vectors read whole 16-byte chunks. Box
  // walks of single stores (kBoxRun 1) also XOR a position's chunk (bits above the 16-byte chunk, below
  // 128 bytes) with the next three bits: the fragment stores, whose lanes hold fast coordinates EPI_TY
  // walk positions apart, then spread over eight chunks instead of two (a bijection: the XOR reads bits
  // it does not change).
  static constexpr int EPI_CHUNK = 16 / int(sizeof(TE)) > 0 ? 16 / int(sizeof(TE)) : 1;
  __device__ __forceinline__ static int tile_index(int s, int w) {
    if constexpr (kBox && kBoxRun == 1 && FAST % (8 * EPI_CHUNK) == 0) w ^= (w / (8 * EPI_CHUNK) % 8) * EPI_CHUNK;
    return s * EPI_LD + w;
  }

  // D = op_out(alpha * acc + beta * op_c(C)) through the tile, in three passes: C comes in along the
  // walk (coalesced, only when beta != 0), the accumulators are combined with it where the fragments
  // hold them, and D goes out along the walk.
  __device__ __forceinline__ static void epilogue(const Math& math, const typename P::TC* __restrict__ C,
                                                  typename P::TD* __restrict__ D, long long m0, long long n0,
                                                  Acc alpha, Acc beta, int tid) {
    unsigned char* smem = smem_base() + EPI_OFFSET;
    TE* tile = reinterpret_cast<TE*>(smem);
    // Offsets of C and D along the fast dimension, in walk order, and along the slow one.
    // C's offsets are D's where C and D have one layout (the default: D is C), and unused with beta == 0.
    constexpr bool kOneLayout = SameType<typename P::CM, typename P::DM>::value &&
                                SameType<typename P::CN, typename P::DN>::value;
    Offset* fast_d = reinterpret_cast<Offset*>(smem + EPI_TILE_ALIGNED);
    Offset* slow_d = fast_d + FAST;
    Offset* fast_c = kOneLayout ? fast_d : slow_d + SLOW;
    Offset* slow_c = kOneLayout ? slow_d : fast_c + FAST;
    const bool read_c = !(beta == zero<Acc>());   // beta == 0 never reads C (it may hold NaN)
    const long long fast0 = D_M_FAST ? m0 : n0, slow0 = D_M_FAST ? n0 : m0;
    const long long fast_extent = D_M_FAST ? ROWS : P::N, slow_extent = D_M_FAST ? P::N : ROWS;
    auto offsets = [&](bool m, long long i, Offset& c, Offset& d) {   // i: a row of ROWS, or a column
      if (m) {
        d = P::DM::offset(typename P::IndexM(m_of(i)));
        if (!kOneLayout && read_c) c = P::CM::offset(typename P::IndexM(m_of(i)));
      } else {
        d = P::DN::offset(typename P::IndexN(i));
        if (!kOneLayout && read_c) c = P::CN::offset(typename P::IndexN(i));
      }
    };
    for (int w = tid; w < FAST; w += TILE_THREADS) {
      const long long i = fast0 + fast_coordinate(w);
      if (i < fast_extent) offsets(D_M_FAST, i, fast_c[w], fast_d[w]); else fast_d[w] = 0;   // read, unused
    }
    for (int s = tid; s < SLOW; s += TILE_THREADS) {
      const long long i = slow0 + s;
      if (i < slow_extent) offsets(!D_M_FAST, i, slow_c[s], slow_d[s]); else slow_d[s] = 0;
    }
    // Box walks: a box lies wholly inside or outside the tile's rows (the planner's boxes tile M and N).
    const auto fast_in = fast_inside(fast0);
    const auto slow_in = slow_inside(slow0);
    if (read_c) {
      sync_tile_threads();   // the offsets are in place
      for_each_vector(fast_in, slow_in, tid, [&](int w, int s, bool inside) {
        if (inside) write_tile(tile, s, w, tid, *reinterpret_cast<const Vector*>(C + (fast_c[w] + slow_c[s])));
      });
      sync_tile_threads();
    }
    if (read_c) combine<true>(math, tile, alpha, beta); else combine<false>(math, tile, alpha, beta);
    sync_tile_threads();
    for_each_vector(fast_in, slow_in, tid, [&](int w, int s, bool inside) {
      const Vector x = read_tile(tile, s, w, tid);
      const Offset d = fast_d[w] + slow_d[s];
      if (inside) *reinterpret_cast<Vector*>(D + d) = x;
    });
  }

  // Where accumulator (r, c) of the tile sits in the epilogue tile.
  __device__ __forceinline__ static int tile_position(int r, int c) {
    return D_M_FAST ? tile_index(c, walk_of(r)) : tile_index(r, walk_of(c));
  }
  // With N the fast dimension of a plain walk, a fragment's two neighbouring columns are neighbours in
  // the tile: one store per pair. (With M fast, movmatrix could make them neighbouring rows, but that
  // measured slower than single 16-bit stores: #40 51 vs 42 us, H100.)
  static constexpr bool kPairs = Math::kColumnPairs && !kBox && !D_M_FAST && EPI_LD % 2 == 0;
  // With M fast, a thread's runs of consecutive rows (SIMT, swapped wgmma) are neighbours in the tile:
  // one store per run. Single stores there put a warp's lanes on one word of each 16-byte chunk, four to
  // a bank (ncu, f32 #31 abcdef-dega-gfbc: 3.4 wavefronts a store, H100).
  static constexpr bool kRowRuns = Math::kRowRun > 1 && !kBox && D_M_FAST && EPI_LD % Math::kRowRun == 0;

  // D's value of every accumulator, alpha * acc + beta * op_c(C) through op_out (C read from the tile),
  // written over its place in the tile.
  // (Two instances: a per-element test of beta would be predicated, its instructions issued anyway.)
  template <bool READ_C>
  __device__ __forceinline__ static void combine(const Math& math, TE* tile, Acc alpha, Acc beta) {
    if constexpr (kMatrixStores && !READ_C) {
      combine_blocks(math, tile, alpha);
    } else if constexpr (kPairs) {
      math.for_each_pair([&](int r, int c, Acc v0, Acc v1) {
        const Acc v[2] = {v0, v1};
        combine_run<READ_C>(tile, tile_position(r, c), v, alpha, beta);
      });
    } else if constexpr (kRowRuns) {
      math.for_each_row_run([&](int r, int c, const Acc (&v)[Math::kRowRun]) {
        combine_run<READ_C>(tile, tile_position(r, c), v, alpha, beta);
      });
    } else if constexpr (kBoxRun > 1) {
      math.template for_each_strided_run<EPI_TX>([&](int r, int c, const Acc (&v)[kBoxRun]) {
        combine_run<READ_C>(tile, tile_position(r, c), v, alpha, beta);
      });
    } else {
      math.for_each([&](int r, int c, Acc v) {
        const Acc one[1] = {v};
        combine_run<READ_C>(tile, tile_position(r, c), one, alpha, beta);
      });
    }
  }
  // Where M is a plain walk's fast side in a 16-bit tile of 16-byte aligned rows, the tensor cores'
  // accumulators (wgmma, mma.sync) go to the tile as transposed 8 x 8 blocks, four a stmatrix (a row of the
  // tile: 8 consecutive m of one n), instead of one 16-bit store each. Where N is, the warpgroups that take
  // tiles in turn store theirs as they are (a row: 8 consecutive n of one m), not a column pair at a time:
  // H100, #16's exchanged plan 55.0 -> 53.9 us (in turn with column pairs: even). Elsewhere the pairs stay
  // (mma.sync: #33 31.4 -> 31.9 us; wgmma not in turn: even to 2% slower on small row-major GEMMs).
  static constexpr bool kMatrixStores = Math::kBlockQuads && sizeof(TE) == 2 && (D_M_FAST || PINGPONG) && !kBox &&
                                        EPI_LD % 8 == 0;
  __device__ __forceinline__ static void combine_blocks(const Math& math, TE* tile, Acc alpha) {
    const int lane = threadIdx.x % 32, j = lane / 8;
    // 32-bit shared addresses: generic ones, hoisted out of a loop over tiles, took two registers each
    const unsigned base = smem_address(tile);
    math.for_each_block_quad([&](int r0, int c0, const Acc (&v)[8]) {
      unsigned x[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        Vec<TE, 2> pair;
        pair.v[0] = convert<TE>(OpOut{}(alpha * v[2 * i]));
        pair.v[1] = convert<TE>(OpOut{}(alpha * v[2 * i + 1]));
        x[i] = *reinterpret_cast<const unsigned*>(&pair);
      }
      // lane's row of the tile: column (M fast) or row lane % 8 of matrix j, from its first element on
      const int r = r0 + j % 2 * 8 + (D_M_FAST ? 0 : lane % 8), c = c0 + j / 2 * 8 + (D_M_FAST ? lane % 8 : 0);
      stmatrix_x4<D_M_FAST>(base + unsigned(sizeof(TE) * tile_position(r, c)), x);
    });
  }

  // R accumulators that are neighbours in the tile, at p, ..., p + R - 1: one store.
  template <bool READ_C, int R>
  __device__ __forceinline__ static void combine_run(TE* tile, int p, const Acc (&v)[R], Acc alpha, Acc beta) {
    Vec<TE, R> x;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      Acc y = alpha * v[k];
      if constexpr (READ_C) y = y + beta * OpC{}(convert<Acc>(tile[p + k]));
      x.v[k] = convert<TE>(OpOut{}(y));
    }
    *reinterpret_cast<Vec<TE, R>*>(&tile[p]) = x;
  }

  // A position of the walk through the tile: along the fast dimension (D's stride-1 side) first, or with
  // EPI_CROSS > 1, EPI_RUN fast positions, EPI_CROSS slow ones, then the rest of each. It is kept as
  // mixed-radix digits (within a run, across, runs along the fast dimension, rows of runs) that a fixed
  // step advances with carries, so a thread divides once, not for every vector: the divisions by 24 of
  // a crossing walk were two thirds of its store loop's instructions (ncu, #31 abcdef-dega-gfbc, H100).
  struct WalkCursor {
    static constexpr unsigned R0 = EPI_CROSS == 1 ? FAST : EPI_RUN, R1 = EPI_CROSS, R2 = FAST / R0;
    unsigned d0, d1, d2, d3;
    __device__ __forceinline__ explicit WalkCursor(unsigned e) {
      d0 = e % R0;
      e /= R0;
      d1 = e % R1;
      e /= R1;
      d2 = e % R2;
      d3 = e / R2;
    }
    __device__ __forceinline__ int fast() const { return int(d0 + d2 * R0); }
    __device__ __forceinline__ int slow() const { return int(d1 + d3 * R1); }
    template <unsigned STEP>
    __device__ __forceinline__ void advance() {
      constexpr unsigned s0 = STEP % R0, s1 = STEP / R0 % R1, s2 = STEP / R0 / R1 % R2, s3 = STEP / R0 / R1 / R2;
      constexpr bool carry0 = s0 != 0, carry1 = carry0 || s1 != 0, carry2 = carry1 || s2 != 0;
      d0 += s0;
      d1 += s1;
      d2 += s2;
      d3 += s3;
      if constexpr (carry0) if (d0 >= R0) { d0 -= R0; ++d1; }
      if constexpr (carry1 && R1 > 1) if (d1 >= R1) { d1 -= R1; ++d2; }
      if constexpr (carry2 && R2 > 1) if (d2 >= R2) { d2 -= R2; ++d3; }
    }
  };

  // How much of the tile, from its first fast (slow) coordinate on, lies inside D (coordinate r does where
  // r < inside); along M with runs, which of its rows: those short of ROWS and outside the one run's padding
  // a tile can hold (RunRows).
  struct RunRows {
    int rows, gap;   // rows gap .. gap + RUN_ROWS - M_RUN - 1 are padding
    // One unsigned range test, no short-circuit: with branches there, the stores of a row walk (#16, D N-fast)
    // went out one at a time (H200: 46.8 -> 59.2 us against 45.0-45.4 without the test).
    __device__ __forceinline__ friend bool operator<(int r, const RunRows& inside) {
      return (r < inside.rows) & (unsigned(r - inside.gap) >= unsigned(RUN_ROWS - M_RUN));
    }
  };
  static_assert(M_RUN == 0 || BM <= RUN_ROWS, "a tile holds at most one run's padding");
  __device__ __forceinline__ static RunRows run_rows(long long m0) {
    const long long left = ROWS - m0;
    return {int(left < BM ? left : BM), int(M_RUN - m0 % RUN_ROWS)};   // m0 % RUN_ROWS: the tile's place in its run
  }
  __device__ __forceinline__ static auto fast_inside(long long fast0) {
    if constexpr (D_M_FAST && M_RUN > 0) {
      return run_rows(fast0);
    } else {
      const long long left = (D_M_FAST ? P::M : P::N) - fast0;
      return int(left < FAST ? left : FAST);
    }
  }
  __device__ __forceinline__ static auto slow_inside(long long slow0) {
    if constexpr (!D_M_FAST && M_RUN > 0) {
      return run_rows(slow0);
    } else {
      const long long left = (D_M_FAST ? P::N : P::M) - slow0;
      return int(left < SLOW ? left : SLOW);
    }
  }

  // The walk in vectors of EPI_V consecutive walk positions, which are consecutive elements of C and D
  // (one offset lookup, one access each), along the fast dimension or, in a box walk, along its second
  // side. The tile's extents (and a box's second side) are multiples of EPI_V, so a vector is wholly
  // inside or wholly outside: f(w, s, inside) runs for each of this thread's vectors, inside saying
  // whether it lies in D. Every (w, s) is a place in the tile, so f may read the tile and the offset
  // tables unguarded and guard only the global access: the reads of a thread's vectors then overlap
  // (a branch a vector kept each store waiting on its own offsets' shared-memory latency, ncu #31).
  // The vectors need not split evenly over the threads (72 x 128 tiles of 8-element vectors over 256).
  using Vector = Vec<TE, EPI_V>;   // EPI_V elements of C or D
  // (COUNT threads share the walk: the tile's math threads, or the producer warpgroup prefetching C.)
  template <int COUNT = TILE_THREADS, class FastInside, class SlowInside, class F>
  __device__ __forceinline__ static void for_each_vector(FastInside fast_in, SlowInside slow_in, int tid, F&& f) {
    static_assert(FAST % EPI_V == 0 && EPI_TY % EPI_V == 0, "vectors tile the walk");
    constexpr int VECTORS = BM * BN / EPI_V, PER_THREAD = (VECTORS + COUNT - 1) / COUNT;
    // A warpgroup in turn over plain rows whose vectors do not divide its threads (#16's 20 a row): the
    // threads of whole rows keep one place along the row and step over rows, so that place's offset and test
    // stay out of the loop (the cursor's place moved every vector).
    constexpr int ROW_VECTORS = FAST / EPI_V, ROW_THREADS = COUNT / ROW_VECTORS * ROW_VECTORS;
    if constexpr (PINGPONG && !kBox && EPI_CROSS == 1 && COUNT % ROW_VECTORS != 0 && ROW_THREADS > 0) {
      if (tid >= ROW_THREADS) return;
      const int w = tid % ROW_VECTORS * EPI_V;
      const bool fast_ok = w < fast_in;
#pragma unroll 4
      for (int s = tid / ROW_VECTORS; s < SLOW; s += ROW_THREADS / ROW_VECTORS) f(w, s, fast_ok && s < slow_in);
    } else {
      WalkCursor at(unsigned(tid) * EPI_V);
#pragma unroll 4
      for (int u = 0; u < PER_THREAD; ++u) {
        if (VECTORS % COUNT != 0 && tid + u * COUNT >= VECTORS) break;
        const int w = at.fast(), s = at.slow();
        f(w, s, fast_coordinate(w) < fast_in && s < slow_in);
        at.template advance<unsigned(COUNT * EPI_V)>();
      }
    }
  }

  // A vector's EPI_V tile elements, moved 16 bytes at a time where they fill such chunks (rows are
  // 16-byte aligned, EPI_PAD). With two chunks each, lanes 4-7 of every eight take their second chunk
  // first, so the eight lanes that share a wavefront cover all 32 banks once (in order, they would hit
  // half of them twice; box walks get the same from tile_index's XOR).
  static constexpr int VCHUNK = EPI_V % EPI_CHUNK == 0 ? EPI_CHUNK : 1;
  static constexpr bool kSwapChunks = !kBox && EPI_V == 2 * VCHUNK && VCHUNK == EPI_CHUNK;
  using Chunk = Vec<TE, VCHUNK>;
  __device__ __forceinline__ static Vector read_tile(const TE* tile, int s, int w, int tid) {
    Vector x;
    if constexpr (kSwapChunks) {
      const bool swap = tid / 4 % 2;
      const Chunk first = *reinterpret_cast<const Chunk*>(&tile[tile_index(s, w + (swap ? VCHUNK : 0))]);
      const Chunk second = *reinterpret_cast<const Chunk*>(&tile[tile_index(s, w + (swap ? 0 : VCHUNK))]);
      *reinterpret_cast<Chunk*>(&x.v[0]) = swap ? second : first;
      *reinterpret_cast<Chunk*>(&x.v[VCHUNK]) = swap ? first : second;
    } else {
#pragma unroll
      for (int i = 0; i < EPI_V; i += VCHUNK)
        *reinterpret_cast<Chunk*>(&x.v[i]) = *reinterpret_cast<const Chunk*>(&tile[tile_index(s, w + i)]);
    }
    return x;
  }
  __device__ __forceinline__ static void write_tile(TE* tile, int s, int w, int tid, const Vector& x) {
    if constexpr (kSwapChunks) {
      const bool swap = tid / 4 % 2;
      const Chunk lo = *reinterpret_cast<const Chunk*>(&x.v[0]), hi = *reinterpret_cast<const Chunk*>(&x.v[VCHUNK]);
      *reinterpret_cast<Chunk*>(&tile[tile_index(s, w + (swap ? VCHUNK : 0))]) = swap ? hi : lo;
      *reinterpret_cast<Chunk*>(&tile[tile_index(s, w + (swap ? 0 : VCHUNK))]) = swap ? lo : hi;
    } else {
#pragma unroll
      for (int i = 0; i < EPI_V; i += VCHUNK)
        *reinterpret_cast<Chunk*>(&tile[tile_index(s, w + i)]) = *reinterpret_cast<const Chunk*>(&x.v[i]);
    }
  }
};

// Adds the SPLIT partial sums of every output element in a fixed order, then applies the epilogue
// D = op_out(alpha * sum + beta * op_c(C)). A thread takes V neighbouring elements along the partials'
// fast dimension (M_FAST: m, as the kernel laid them out where D's stride-1 mode is M's first mode; else
// n), one V-vector load a split (H100, session 37: f16 #19 ~4 us faster than an element a thread). Along
// that dimension D's writes are whole sectors too (#19 ``abc-adec-ebd`` 11.9 -> 5.9 us, ncu). The host
// (gett.codegen.reduce_vector) has checked that V divides the fast extent. Afterwards the partials are
// indeterminate: their lines are dropped from L2 unwritten (DISCARD below).
template <class P, class OpC, class OpOut, class Semiring, int SPLIT, bool M_FAST, int V = 1>
__device__ __forceinline__ void reduce_splits(const typename P::Acc* __restrict__ partials,
                                              const typename P::TC* __restrict__ C,
                                              typename P::TD* __restrict__ D, typename P::Acc alpha,
                                              typename P::Acc beta) {
  using Acc = typename P::Acc;
  using Vector = Vec<Acc, V>;
  constexpr long long fast = M_FAST ? P::M : P::N, slow = M_FAST ? P::N : P::M, total = P::M * P::N * P::L;
  static_assert(fast % V == 0, "whole vectors along the fast dimension");
  const Vector* parts = reinterpret_cast<const Vector*>(partials);
  const bool read_c = !(beta == zero<Acc>());
  // each split's partials start on a line (where the allocator's block does), and a warp's vectors (threads
  // in warps, grid-stride rounds of whole warps) fill whole lines
  constexpr bool DISCARD = total * sizeof(Acc) % 128 == 0 && 32 * sizeof(Vector) % 128 == 0;
  const bool lines = reinterpret_cast<unsigned long long>(partials) % 128 == 0;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total / V;
       e += (long long)gridDim.x * blockDim.x) {
    // up to 32 loads in flight at once (a chain of 4 at a time was latency-bound), added in split order
    constexpr int BATCH = SPLIT - 1 < 32 ? SPLIT - 1 : 32;
    Vector v = parts[e];
    for (int s0 = 1; s0 < SPLIT; s0 += BATCH) {
      Vector part[BATCH];
#pragma unroll
      for (int j = 0; j < BATCH; ++j) part[j] = s0 + j < SPLIT ? parts[(s0 + j) * (total / V) + e] : v;
#pragma unroll
      for (int j = 0; j < BATCH; ++j)
        if (s0 + j < SPLIT) {
#pragma unroll
          for (int i = 0; i < V; ++i) v.v[i] = Semiring::add(v.v[i], part[j].v[i]);
        }
    }
    // Partials read for the last time leave L2 without their write-back (H100: see benchmarks/NOTES.md,
    // session 41); the warp's 32 vectors of each split make whole lines where DISCARD holds.
    if constexpr (DISCARD) {
      const long long e0 = e - (threadIdx.x & 31);
      if (lines && e0 + 32 <= total / V) {   // every lane of the warp took part in this round
        __syncwarp();
        constexpr int LINES = 32 * (int)sizeof(Vector) / 128;
        const char* first = reinterpret_cast<const char*>(parts + e0);
        for (int j = threadIdx.x & 31; j < SPLIT * LINES; j += 32)
          discard_l2_line(first + (long long)(j / LINES) * total * (long long)sizeof(Acc) + (j % LINES) * 128);
      }
    }
    // V divides the fast extent: the vector's elements share their slow and batch coordinates
    const long long f0 = e * V % fast, s = e * V / fast % slow, l = e * V / (P::N * P::M);
    const auto il = typename P::IndexL(l);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const auto im = typename P::IndexM(M_FAST ? f0 + i : s);
      const auto in = typename P::IndexN(M_FAST ? s : f0 + i);
      Acc out = alpha * v.v[i];
      if (read_c) out = out + beta * OpC{}(convert<Acc>(C[P::CM::offset(im) + P::CN::offset(in) + P::CL::offset(il)]));
      D[P::DM::offset(im) + P::DN::offset(in) + P::DL::offset(il)] = convert<typename P::TD>(OpOut{}(out));
    }
  }
}

}  // namespace gett
