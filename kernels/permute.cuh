// Operand staging (gett/staging.py): copy a tensor into a dense layout of the same shape with its modes
// in another order, so that the contraction kernel reads long aligned runs of it. The destination is
// dense in its mode order, its runs padded to whole 16-byte vectors; where an element comes from is an
// index table (layout.cuh) evaluated on the destination's linear index. The contraction reads the copy
// right after, so the copy's stores ask the L2 to keep their lines (store_global_kept).
#pragma once
#include "copy.cuh"
#include "grid_dependency.cuh"
#include "layout.cuh"
#include "types.cuh"

namespace gett {

// A dense destination: element i lies at offset i.
struct DenseOffsets {
  template <class I>
  __device__ __forceinline__ static I offset(I i) { return i; }
};

// The destination's innermost mode is the source's stride-1 mode: thread after thread moves V-element
// vectors, UNROLL of them loaded before any is stored so their latencies overlap. SrcTable maps a
// destination element index to its source offset, DstTable to its destination offset (runs padded to
// whole vectors; V divides the run). Op (computed in Acc) is the operand's elementwise op, applied here
// once per element so that the contraction reads the copy without one.
template <class T, class Acc, class Op, class Index, class SrcTable, int V, int UNROLL, class DstTable = DenseOffsets>
__device__ __forceinline__ void copy_runs(const T* __restrict__ src, T* __restrict__ dst, Index vectors) {
  using Vector = Vec<T, V>;
  const Index stride = Index(gridDim.x) * Index(blockDim.x) * Index(UNROLL);
  for (Index first = Index(blockIdx.x) * Index(blockDim.x) * Index(UNROLL) + Index(threadIdx.x); first < vectors;
       first += stride) {
    Vector v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const Index i = first + Index(u) * Index(blockDim.x);
      if (i < vectors) v[u] = load_global(reinterpret_cast<const Vector*>(src + SrcTable::offset(i * Index(V))));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const Index i = first + Index(u) * Index(blockDim.x);
      if (i < vectors)
        store_global_kept(reinterpret_cast<Vector*>(dst + DstTable::offset(i * Index(V))),
                          apply_op<Acc, Op>(v[u], true));
    }
  }
}

// The destination's innermost mode Q is not the source's stride-1 mode P: a CTA of THREADS threads moves
// a TQ x TP block of (Q, P) through shared memory, reading V-element vectors along P and writing them
// along Q (V up to 16 bytes: 2-byte accesses had held 16-bit copies to 1.2 TB/s on an H100, and 16-byte
// ones took #14's copy from 56.1 to 51.7 us against 8-byte ones, ncu). The other
// modes form one "rest" index, walked by blockIdx.y; SrcRest and DstRest give its offsets. SQ: Q's source
// stride; DP: P's destination stride; Op as in copy_runs. The planner has checked that V divides the
// block's sides, the extents, SQ, DP and every rest offset. A block may span a whole short extent (e.g. 72).
template <class T, class Acc, class Op, class Index, class Offset, int TQ, int TP, int V, int THREADS,
          long long EQ, long long EP, long long SQ, long long DP, class SrcRest, class DstRest>
__device__ __forceinline__ void transpose_tiles(const T* __restrict__ src, T* __restrict__ dst, Index rests) {
  static_assert(TQ % V == 0 && TP % V == 0 && EQ % V == 0 && EP % V == 0, "whole vectors");
  __shared__ T tile[TQ][TP + 1];   // +1: a column of the block spreads over the banks
  using Vector = Vec<T, V>;
  constexpr long long NQ = (EQ + TQ - 1) / TQ;
  const long long q0 = (blockIdx.x % NQ) * TQ, p0 = (blockIdx.x / NQ) * TP;
  for (Index rest = blockIdx.y; rest < rests; rest += gridDim.y) {
    const Offset from = SrcRest::offset(rest), to = DstRest::offset(rest);
#pragma unroll 4
    for (int e = threadIdx.x; e < TQ * (TP / V); e += THREADS) {   // vectors along P, row after row of Q
      const int r = e / (TP / V), c = e % (TP / V) * V;
      const long long q = q0 + r, p = p0 + c;
      if (q < EQ && p < EP) {
        const Offset at = from + Offset(q) * Offset(SQ) + Offset(p);
        const Vector x = load_global(reinterpret_cast<const Vector*>(src + at));
#pragma unroll
        for (int j = 0; j < V; ++j) tile[r][c + j] = x.v[j];
      }
    }
    __syncthreads();
#pragma unroll 4
    for (int e = threadIdx.x; e < TP * (TQ / V); e += THREADS) {   // vectors along Q, row after row of P
      const int r = e / (TQ / V), c = e % (TQ / V) * V;
      const long long p = p0 + r, q = q0 + c;
      if (q < EQ && p < EP) {
        Vector x;
#pragma unroll
        for (int j = 0; j < V; ++j) x.v[j] = tile[c + j][r];
        store_global_kept(reinterpret_cast<Vector*>(dst + (to + Offset(p) * Offset(DP) + Offset(q))),
                          apply_op<Acc, Op>(x, true));
      }
    }
    __syncthreads();
  }
}

}  // namespace gett
