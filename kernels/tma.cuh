// The Tensor Memory Accelerator (sm_90): one thread copies a whole box of a tensor of up to five
// dimensions from global to shared memory, and the copy's bytes complete an mbarrier's phase: wgmma
// tiles of 2-D operands (3-D where K is two modes) in the 128-byte-swizzled layout (tma_load_tile), and
// mma.sync A tiles that are one box of A (TmaBoxLoader). The tensor map (shape, strides, box, swizzle) is
// encoded on the host (gett/tensor_map.py) and passed as a __grid_constant__ kernel parameter.
#pragma once
#include "barrier.cuh"
#include "copy.cuh"
#include "types.cuh"

namespace gett {

// A CUtensorMap: 128 opaque bytes, 64-byte aligned (cuda.h's type, which NVRTC does not see).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// The arrival that opens a phase of `bar` expecting `bytes` more from bulk copies (init count 1).
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// The box of `map` whose first element has coordinates c (innermost dimension first) into `smem`
// (1024-byte aligned for the 128-byte swizzle); out-of-range elements land as zeros, and count toward
// the bytes like the rest.
template <int RANK>
__device__ __forceinline__ void tma_load(void* smem, const TensorMap* map, const int (&c)[RANK], unsigned long long* bar) {
  static_assert(RANK >= 1 && RANK <= 5, "tensor maps have 1 to 5 dimensions");
  const unsigned dst = smem_address(smem), b = smem_address(bar);
  const unsigned long long m = reinterpret_cast<unsigned long long>(map);
#define GETT_TMA_LOAD(N, COORDS, ...)                                                                               \
  asm volatile("cp.async.bulk.tensor." #N "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, " \
               COORDS "], [%2];\n" ::"r"(dst), "l"(m), "r"(b), __VA_ARGS__ : "memory")
  if constexpr (RANK == 1) GETT_TMA_LOAD(1, "{%3}", "r"(c[0]));
  if constexpr (RANK == 2) GETT_TMA_LOAD(2, "{%3, %4}", "r"(c[0]), "r"(c[1]));
  if constexpr (RANK == 3) GETT_TMA_LOAD(3, "{%3, %4, %5}", "r"(c[0]), "r"(c[1]), "r"(c[2]));
  if constexpr (RANK == 4) GETT_TMA_LOAD(4, "{%3, %4, %5, %6}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  if constexpr (RANK == 5)
    GETT_TMA_LOAD(5, "{%3, %4, %5, %6, %7}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]));
#undef GETT_TMA_LOAD
}

// The box of `map` whose first element has coordinates c from `smem` (128-byte aligned), as a bulk
// group of this thread's (bulk_commit; bulk_wait_read before `smem` is written again).
template <int RANK>
__device__ __forceinline__ void tma_store(const TensorMap* map, const void* smem, const int (&c)[RANK]) {
  static_assert(RANK >= 1 && RANK <= 5, "tensor maps have 1 to 5 dimensions");
  const unsigned src = smem_address(smem);
  const unsigned long long m = reinterpret_cast<unsigned long long>(map);
#define GETT_TMA_STORE(N, COORDS, ...)                                                                          \
  asm volatile("cp.async.bulk.tensor." #N "d.global.shared::cta.bulk_group [%0, " COORDS "], [%1];\n" ::"l"(m), \
               "r"(src), __VA_ARGS__ : "memory")
  if constexpr (RANK == 1) GETT_TMA_STORE(1, "{%2}", "r"(c[0]));
  if constexpr (RANK == 2) GETT_TMA_STORE(2, "{%2, %3}", "r"(c[0]), "r"(c[1]));
  if constexpr (RANK == 3) GETT_TMA_STORE(3, "{%2, %3, %4}", "r"(c[0]), "r"(c[1]), "r"(c[2]));
  if constexpr (RANK == 4) GETT_TMA_STORE(4, "{%2, %3, %4, %5}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  if constexpr (RANK == 5)
    GETT_TMA_STORE(5, "{%2, %3, %4, %5, %6}", "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]));
#undef GETT_TMA_STORE
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most PENDING of this thread's bulk groups still read shared memory (READ) or still run.
template <int PENDING, bool READ>
__device__ __forceinline__ void bulk_wait() {
  if constexpr (READ) asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
  else asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// How the epilogue stores D: through its walk of the tile (NoTmaStore), or as one TMA box of D
// (gett/tma.py, TmaStoreBox): accumulator (r, c) sits at PositionM(r) + PositionN(c) of the box's
// layout, and the tile's coordinates are index tables of its first row and column. ROW_RUN: the
// extent of the box's innermost dimension where that is M's first mode (a thread's runs of rows
// dividing it are neighbours in the box), else 1.
struct NoTmaStore {
  static constexpr bool kTma = false;
  template <int RUN>
  static constexpr bool kRowRuns = false;
};
template <class PositionM, class PositionN, class CoordsM, class CoordsN, int ROW_RUN>
struct TmaStore {
  static_assert(CoordsM::RANK == CoordsN::RANK, "one coordinate table per dimension of the map");
  static constexpr bool kTma = true;
  static constexpr int RANK = CoordsM::RANK;
  template <int RUN>
  static constexpr bool kRowRuns = RUN > 1 && ROW_RUN % RUN == 0;
  __device__ __forceinline__ static int position(int r, int c) { return PositionM::offset(r) + PositionN::offset(c); }
  template <class IndexM, class IndexN>
  __device__ __forceinline__ static void store(const TensorMap* map, const void* tile, IndexM m0, IndexN n0) {
    int c[RANK];
#pragma unroll
    for (int d = 0; d < RANK; ++d) c[d] = 0;
    CoordsM::add(m0, c);
    CoordsN::add(n0, c);
    tma_store<RANK>(map, tile, c);
    bulk_commit();
  }
};

// One stage of an operand tile of ROWS x BK 16-bit elements: K-major tiles are one box of BK x ROWS (K
// innermost, one 128-byte line a row), two of half the rows past 256 (the TMA's longest box side); MN-major
// tiles are ROWS / 64 boxes of 64 rows x BK, each BK lines of 128 bytes (the layout of loader.cuh's swizzled
// tiles).
// The map's third dimension: K's second mode at z (K_SPLIT; gett/tma.py, k_run), k0 then counting along K's
// first; or, for MN-major tiles of rows in runs (RUN_ROWS > 0; gett/tma.py, m_run), the rows' second mode:
// row0 counts rows of the first mode padded to RUN_ROWS a run, so each 64-row box lies inside one run.
template <class T, int ROWS, int BK, bool ROW_CONTIG, bool K_SPLIT = false, int RUN_ROWS = 0>
__device__ __forceinline__ void tma_load_tile(T* stage, const TensorMap* map, int row0, int k0, int z,
                                              unsigned long long* bar) {
  static_assert(sizeof(T) == 2 && BK == 64, "TMA tiles: 16-bit elements, K tiles of one 128-byte line");
  static_assert(RUN_ROWS == 0 || (ROW_CONTIG && !K_SPLIT && RUN_ROWS % 64 == 0), "rows in runs: MN-major, K one mode");
  // one box at (inner, outer[, third]) coordinates x, y[, w]
  const auto box = [&](T* to, int x, int y, int w) {
    if constexpr (K_SPLIT || RUN_ROWS > 0) tma_load<3>(to, map, {x, y, w}, bar);
    else tma_load<2>(to, map, {x, y}, bar);
  };
  if constexpr (ROW_CONTIG) {
#pragma unroll
    for (int j = 0; j < (ROWS + 63) / 64; ++j) {
      const int row = row0 + 64 * j;
      if constexpr (RUN_ROWS > 0) box(stage + j * 64 * BK, row % RUN_ROWS, k0, row / RUN_ROWS);
      else box(stage + j * 64 * BK, row, k0, z);
    }
  } else if constexpr (ROWS <= 256) {
    box(stage, k0, row0, z);
  } else {   // two boxes of half the rows, rounded up to whole 8-line atoms (TileLoader::ROWS)
    constexpr int HALF = (ROWS + 15) / 16 * 8;
    box(stage, k0, row0, z);
    box(stage + HALF * BK, k0, row0 + HALF, z);
  }
}

// The coordinates of a linear index (a tile's first row, or its first K position) in each dimension
// of a tensor map: one index table per dimension, whose strides count that dimension's elements.
template <class... Dims>
struct Coordinates {
  static constexpr int RANK = sizeof...(Dims);
  template <class Index>
  __device__ __forceinline__ static void add(Index i, int (&c)[RANK]) {
    int d = 0;
    ((c[d++] += int(Dims::offset(i))), ...);
  }
};

// An operand tile that is one box of its tensor (gett/tma.py, TmaBox): one thread asks the TMA for the
// whole stage, the stage's mbarrier counts its bytes, and every thread waits on that barrier before
// the stage's barrier of the main loop. The box lands innermost dimension first: BOX0 rows (the
// tensor's stride-1 mode), then the K tile, then the tile's other row modes, so row r at depth k sits
// at r % BOX0 + BOX0 * (k + BK * (r / BOX0)); a box row of 32, 64 or 128 bytes has its 16-byte chunks
// swizzled (XOR with the bits of the 128-byte line), so ldmatrix's eight rows hit different banks.
// An op (Op, computed in Acc) is applied in place once the stage has landed, 16 bytes a thread at a time
// over the THREADS threads, K past its end kept 0 (the TMA's fill; op(0) need not be 0).
template <class T, class Acc, class Op, class IndexRow, class IndexK, class RowCoords, class KCoords, int BR, int BK,
          int BOX0, int STAGES, int THREADS, long long K_EXTENT>
struct TmaBoxLoader {
  static_assert(RowCoords::RANK == KCoords::RANK, "one coordinate table per dimension of the map");
  static_assert(BR % BOX0 == 0 && BOX0 * int(sizeof(T)) % 16 == 0, "box rows of whole 16-byte chunks tile the tile");
  using Element = T;
  static constexpr bool kRowContig = true, kAsync = true, kSwizzle128 = false, kTransposes = false;
  static constexpr bool kHasOp = !Op::is_identity;
  static constexpr bool kTma = true;
  static constexpr int STAGE_ELEMS = BR * BK;
  static constexpr int RANK = RowCoords::RANK;
  static constexpr int ROW_BYTES = BOX0 * int(sizeof(T));
  static constexpr int SWIZZLE_BYTES = ROW_BYTES == 32 || ROW_BYTES == 64 || ROW_BYTES == 128 ? ROW_BYTES : 0;

  const TensorMap* map;
  unsigned long long* full;   // STAGES barriers: the CTA's t-th K tile completes a phase of full[t % STAGES]
  long long row0;             // the tile's first row
  int k_first;                // the CTA's first K tile (split K)
  int tid;

  __device__ __forceinline__ void init(const TensorMap* map_, unsigned long long* full_, long long row0_, int k_first_,
                                       int tid_) {
    map = map_;
    full = full_;
    row0 = row0_;
    k_first = k_first_;
    tid = tid_;
  }

  // CU_TENSOR_MAP_SWIZZLE_32B/64B/128B: chunk bits 4.. of the byte offset XOR the line bits 7.. .
  __device__ __forceinline__ static int smem_index(int r, int k) {
    int b = (r % BOX0 + BOX0 * (k + BK * (r / BOX0))) * int(sizeof(T));
    if constexpr (SWIZZLE_BYTES > 0) b ^= (b >> 3) & (SWIZZLE_BYTES - 16);
    return b / int(sizeof(T));
  }

  // Start loading K tile kt of the tile into `stage` (the leader only; the others wait for it in wait()).
  __device__ __forceinline__ void issue(T* stage, int kt) { issue_tile(stage, row0, kt, kt - k_first); }
  // ... of the tile whose first row is `first_row`, as the CTA's t-th load (a CTA over several tiles).
  __device__ __forceinline__ void issue_tile(T* stage, long long first_row, int kt, int t) {
    if (tid != 0) return;
    if constexpr (kHasOp) fence_proxy_async();   // the op's writes to the stage, ordered before the TMA's
    int c[RANK];
#pragma unroll
    for (int d = 0; d < RANK; ++d) c[d] = 0;
    RowCoords::add(IndexRow(first_row), c);
    KCoords::add(IndexK(kt) * IndexK(BK), c);
    unsigned long long* bar = &full[t % STAGES];
    mbarrier_arrive_expect_bytes(bar, STAGE_ELEMS * int(sizeof(T)));
    tma_load<RANK>(stage, map, c, bar);
  }
  // Until the CTA's t-th K tile has landed in its stage.
  __device__ __forceinline__ void wait(int t) const { mbarrier_wait(&full[t % STAGES], (t / STAGES) & 1); }

  // After K tile kt has landed (every thread has waited for it): the op on this thread's 16-byte chunks of
  // the stage. A chunk lies in one box row, so at one depth k: the swizzle (an involution) gives it back.
  static constexpr int CHUNK = 16 / int(sizeof(T)), CHUNKS = STAGE_ELEMS / CHUNK;
  template <int BATCH>
  __device__ __forceinline__ void transform(T* stage, int kt) {
    if constexpr (kHasOp) {
      using Chunk = Vec<T, CHUNK>;
      const long long k0 = (long long)kt * BK;
#pragma unroll 1   // one batch at a time: fused #6's 256-row tile took 101 registers unrolled, 92 so
      for (int first = 0; first < (CHUNKS + THREADS - 1) / THREADS; first += BATCH) {
        Chunk v[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
          const int c = tid + (first + b) * THREADS;
          if (c < CHUNKS) v[b] = reinterpret_cast<const Chunk*>(stage)[c];
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
          const int c = tid + (first + b) * THREADS;
          int bytes = c * 16;
          if constexpr (SWIZZLE_BYTES > 0) bytes ^= (bytes >> 3) & (SWIZZLE_BYTES - 16);
          const int k = bytes / int(sizeof(T)) / BOX0 % BK;
          if (c < CHUNKS) reinterpret_cast<Chunk*>(stage)[c] = apply_op<Acc, Op>(v[b], k0 + k < K_EXTENT);
        }
      }
    }
  }
  // Nothing to do after the math: the TMA writes the stage as the math reads it.
  __device__ __forceinline__ void store(T*) {}
};

}  // namespace gett
