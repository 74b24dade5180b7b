// Global -> shared tile loader for one operand (A: rows are M, B: rows are N), driven by index tables.
//
// The shared tile is stored along the operand's contiguous global direction: ROW_CONTIG tiles are
// [BK][BR + PAD] (rows contiguous), others [BR][BK + PAD] (K contiguous), so each thread moves V
// consecutive elements as one access and neighbouring threads cover neighbouring memory. PAD keeps
// 16-byte alignment and spreads ldmatrix rows over all banks. ASYNC loaders use cp.async (4/8/16-byte
// copies, zero-filled out of range) and apply an elementwise op in place once their copies landed
// (transform); the others stage through registers, for 2-byte scalars, applying the op on the way.
// VSTEP > 1: a vector's elements, consecutive in memory, lie VSTEP positions apart in the tile — the
// operand's stride-1 mode is the second mode of a box (gett/tiling.py); staged through registers,
// except in swizzled tiles (below).
// PARTIAL: the operand's end may fall inside a vector (an odd extent of a tensor whose strides keep
// vectors aligned); the copy of that vector reads only the elements before the end, zero-filling the rest.
// SWIZZLE128: no padding; the tile is the 128-byte-swizzled layout Hopper's wgmma reads (see
// swizzled_index), with 16-byte accesses still landing in whole chunks. There, strided vectors of
// 8 16-bit elements with VSTEP 8 (one 8 x 8 block per 64 positions) are copied asynchronously as
// whole chunks and put in place afterwards by transposing each block in shared memory (transpose()).
#pragma once
#include "copy.cuh"
#include "types.cuh"

namespace gett {

template <class T, class Acc, class Offset, class RowIndex, class KIndex, class RowTable, class KTable,
          class Op, int BR, int BK, int THREADS, bool ROW_CONTIG, int V, bool ASYNC, int VSTEP = 1,
          bool SWIZZLE128 = false, bool PARTIAL = false>
struct TileLoader {
  using Element = T;
  static constexpr bool kRowContig = ROW_CONTIG;
  static constexpr bool kAsync = ASYNC;
  static constexpr bool kSwizzle128 = SWIZZLE128;
  static constexpr bool kHasOp = !Op::is_identity;
  static constexpr bool kTma = false;   // see TmaBoxLoader (tma.cuh)
  static constexpr int PAD = SWIZZLE128 ? 0 : (16 / int(sizeof(T))) > 0 ? 16 / int(sizeof(T)) : 1;
  static constexpr int LINE_ELEMS = 128 / int(sizeof(T));          // elements per 128-byte line (swizzled)
  // elements between shared rows; a swizzled MN-major tile takes whole atoms of LINE_ELEMS rows (the
  // last one partly, wgmma reading its first BR % LINE_ELEMS)
  static constexpr int LD = ROW_CONTIG ? (SWIZZLE128 ? (BR + LINE_ELEMS - 1) / LINE_ELEMS * LINE_ELEMS : BR + PAD)
                                       : BK + PAD;
  // rows a swizzled K-major tile takes: over 256 (one TMA box), a multiple of 16, for two boxes of
  // whole 8-line atoms
  static constexpr int ROWS = SWIZZLE128 && !ROW_CONTIG && BR > 256 ? (BR + 15) / 16 * 16 : BR;
  static constexpr int STAGE_ELEMS = ROW_CONTIG ? BK * LD : ROWS * LD;
  static constexpr int LINE = ROW_CONTIG ? BR : BK;                  // contiguous extent of the tile
  static constexpr int VPL = LINE / V;                               // vectors per contiguous line
  static constexpr int NVEC = BR * BK / V;
  static constexpr int ITERS = (NVEC + THREADS - 1) / THREADS;
  static constexpr bool kFixedLinePos = THREADS % VPL == 0;          // a thread's position in a line never moves
  static_assert(LINE % V == 0, "tile extent must be a multiple of the vector width");
  static_assert(ASYNC ? sizeof(T) * V >= 4 : true, "cp.async moves at least 4 bytes");
  static_assert(!PARTIAL || (ASYNC && VSTEP == 1 && Op::is_identity), "clipped vectors: plain asynchronous copies");
  // Async strided vectors land as whole chunks, then each 8 x 8 block of the line is transposed.
  static constexpr bool kTransposes = ASYNC && VSTEP > 1;
  static_assert(VSTEP == 1 || LINE % (VSTEP * V) == 0, "strided vectors tile the line");
  static_assert(!kTransposes || (SWIZZLE128 && VSTEP == 8 && V == 8 && sizeof(T) == 2),
                "asynchronous strided vectors: 8 x 8 blocks of 16-bit elements in swizzled tiles (stmatrix)");
  static constexpr int CHUNK_ELEMS = 16 / int(sizeof(T));
  static_assert(!SWIZZLE128 || (ROW_CONTIG ? BR % 8 == 0 && BK % 8 == 0 : BK == LINE_ELEMS),
                "swizzled tiles: K-major ones one line deep, MN-major ones in 8 x 8 core matrices");
  using Vector = Vec<T, V>;

  const T* base;
  KIndex k_extent;   // K positions are KIndex arithmetic (32-bit where K + BK fits, see gett/codegen.py)
  int tid;
  Offset row_off[ITERS];
  bool row_ok[ITERS];
  int row_left[PARTIAL && ROW_CONTIG ? ITERS : 1];   // rows from the vector's first to the operand's end
  Vector staged[ASYNC ? 1 : ITERS];
  bool staged_ok[ASYNC ? 1 : ITERS];

  // Coordinates of this thread's i-th vector inside the tile: (row r, depth kk).
  __device__ __forceinline__ void coords(int i, int& r, int& kk) const {
    const int v = tid + i * THREADS;
    const int line = kFixedLinePos ? tid / VPL + i * (THREADS / VPL) : v / VPL;
    const int j = kFixedLinePos ? tid % VPL : v % VPL;   // vector index inside the line
    // VSTEP groups: vector j starts at j % VSTEP inside a block of VSTEP * V positions
    const int pos = VSTEP == 1 ? j * V : j % VSTEP + (j / VSTEP) * (VSTEP * V);
    if constexpr (ROW_CONTIG) { r = pos; kk = line; } else { r = line; kk = pos; }
  }

  __device__ __forceinline__ bool in_tile(int i) const {
    return NVEC % THREADS == 0 || tid + i * THREADS < NVEC;
  }

  __device__ __forceinline__ void init(const T* base_, long long row0, long long row_extent,
                                       long long k_extent_, int tid_) {
    base = base_;
    k_extent = KIndex(k_extent_);
    tid = tid_;
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      int r, kk;
      coords(i, r, kk);
      const long long row = row0 + r;
      row_ok[i] = in_tile(i) && row < row_extent;
      row_off[i] = row_ok[i] ? RowTable::offset(RowIndex(row)) : Offset(0);
      if constexpr (PARTIAL && ROW_CONTIG) row_left[i] = row_extent - row < V ? int(row_extent - row) : V;
    }
  }

  __device__ __forceinline__ static int smem_index(int r, int kk) {
    if constexpr (SWIZZLE128) return ROW_CONTIG ? swizzled_index((r / LINE_ELEMS) * BK + kk, r % LINE_ELEMS)
                                                : swizzled_index(r, kk);
    return ROW_CONTIG ? kk * LD + r : r * LD + kk;
  }

  // Where an asynchronous copy of the vector starting at (r, kk) lands: its own place, or for strided
  // vectors (before transpose()) chunk (position % 8) of its 64-position block.
  __device__ __forceinline__ static int landing_index(int r, int kk) {
    if constexpr (kTransposes)
      return ROW_CONTIG ? smem_index(r - r % 64 + 8 * (r % 8), kk) : smem_index(r, kk - kk % 64 + 8 * (kk % 8));
    return smem_index(r, kk);
  }

  // After every thread's copies landed (a barrier): chunk j of each 64-position block holds element
  // positions j, j + 8, ..., j + 56; transpose each block in place (ldmatrix.trans, then stmatrix),
  // so chunk e holds positions 8e ... 8e + 7. A warp moves four blocks at a time.
  template <int WARPS>
  __device__ __forceinline__ static void transpose(T* stage, int warp, int lane) {
    if constexpr (kTransposes) {
      constexpr int PER_LINE = LINE / 64, ALL = (ROW_CONTIG ? BK : BR) * PER_LINE;
      static_assert(ALL % 4 == 0, "blocks go four to a warp");
      for (int first = warp * 4; first < ALL; first += WARPS * 4) {
        const int block = first + lane / 8, line = block / PER_LINE, at = (block % PER_LINE) * 64 + 8 * (lane % 8);
        T* row = stage + (ROW_CONTIG ? smem_index(at, line) : smem_index(line, at));
        unsigned v[4];
        ldmatrix_x4<true>(v, row);
        stmatrix_x4(row, v);
      }
    }
  }

  // Element `col` of 128-byte line `line`: 16-byte chunk c of line y is stored at chunk c ^ (y % 8),
  // so the 8 lines of a 1024-byte atom spread any chunk column over all banks.
  __device__ __forceinline__ static int swizzled_index(int line, int col) {
    return line * LINE_ELEMS + ((col / CHUNK_ELEMS) ^ (line % 8)) * CHUNK_ELEMS + col % CHUNK_ELEMS;
  }

  // Start loading K tile `kt` into `stage` (async copies, or loads into registers).
  __device__ __forceinline__ void issue(T* stage, int kt) {
    const KIndex k0 = KIndex(kt) * KIndex(BK);
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      int r, kk;
      coords(i, r, kk);
      const KIndex k = k0 + KIndex(kk);
      const bool ok = row_ok[i] && k < k_extent;
      const T* src = base + (ok ? Offset(row_off[i] + KTable::offset(k)) : Offset(0));   // one 64-bit add
      if constexpr (PARTIAL) {
        const int left = ROW_CONTIG ? row_left[i] : (k_extent - k < KIndex(V) ? int(k_extent - k) : V);
        const int bytes = ok ? left * int(sizeof(T)) : 0;
        if (in_tile(i)) cp_async_clipped<sizeof(Vector)>(stage + landing_index(r, kk), src, bytes);
      } else if constexpr (ASYNC) {
        if (in_tile(i)) cp_async<sizeof(Vector)>(stage + landing_index(r, kk), src, ok);
      } else {
        staged_ok[i] = ok;
        if (ok) staged[i] = *reinterpret_cast<const Vector*>(src);
      }
    }
  }

  // Asynchronous loaders with an op: once K tile `kt` has landed in `stage`, apply the op to the
  // elements this thread copied (its own copies are visible to it after cp.async.wait_group);
  // out-of-range elements go back to 0, since op(0) need not be 0. Call before the barrier. BATCH
  // vectors are read before any is written back, so their shared-memory latencies overlap (the
  // compiler cannot hoist a read above a store it cannot tell apart), at BATCH vectors of registers.
  template <int BATCH = 1>
  __device__ __forceinline__ void transform(T* stage, int kt) {
    if constexpr (ASYNC && !Op::is_identity) {
      const KIndex k0 = KIndex(kt) * KIndex(BK);
#pragma unroll
      for (int first = 0; first < ITERS; first += BATCH) {
        Vector v[BATCH];
        bool ok[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH && first + b < ITERS; ++b) {
          int r, kk;
          coords(first + b, r, kk);
          ok[b] = row_ok[first + b] && k0 + KIndex(kk) < k_extent;
          if (in_tile(first + b)) v[b] = *reinterpret_cast<const Vector*>(stage + landing_index(r, kk));
        }
#pragma unroll
        for (int b = 0; b < BATCH && first + b < ITERS; ++b) {
          int r, kk;
          coords(first + b, r, kk);
          if (in_tile(first + b))
            *reinterpret_cast<Vector*>(stage + landing_index(r, kk)) = apply_op<Acc, Op>(v[b], ok[b]);
        }
      }
    }
  }

  // A stage the TMA filled whole (zeros out of range): the op on each element, in 16-byte chunks shared
  // by THREADS_ threads (this one `tid`), four loads in flight. The host lets the TMA load an operand
  // with an op only where op(0) == 0 (gett.tma.tma_operand), so the zero fill stays zero.
  template <int THREADS_>
  __device__ __forceinline__ static void transform_landed(T* stage, int tid) {
    if constexpr (kHasOp) {
      using Chunk = Vec<T, CHUNK_ELEMS>;
      constexpr int CHUNKS = STAGE_ELEMS / CHUNK_ELEMS, BATCH = 4;
      Chunk* chunks = reinterpret_cast<Chunk*>(stage);
      for (int i = tid; i < CHUNKS; i += BATCH * THREADS_) {
        Chunk v[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b)
          if (i + b * THREADS_ < CHUNKS) v[b] = chunks[i + b * THREADS_];
#pragma unroll
        for (int b = 0; b < BATCH; ++b)
          if (i + b * THREADS_ < CHUNKS) chunks[i + b * THREADS_] = apply_op<Acc, Op>(v[b], true);
      }
    }
  }

  // Register-staged loaders write their tile now (after the math, so the loads had time to land):
  // the op is applied once per element, and out-of-range elements become 0.
  __device__ __forceinline__ void store(T* stage) {
    if constexpr (!ASYNC) {
#pragma unroll
      for (int i = 0; i < ITERS; ++i) {
        int r, kk;
        coords(i, r, kk);
        if (!in_tile(i)) continue;
        const Vector out = apply_op<Acc, Op>(staged[i], staged_ok[i]);
        if constexpr (VSTEP == 1) {
          *reinterpret_cast<Vector*>(stage + smem_index(r, kk)) = out;
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e)   // element e lies e * VSTEP further along the line
            stage[ROW_CONTIG ? smem_index(r + e * VSTEP, kk) : smem_index(r, kk + e * VSTEP)] = out.v[e];
        }
      }
    }
  }
};

}  // namespace gett
