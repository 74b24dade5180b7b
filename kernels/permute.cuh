// Operand staging (gett/staging.py): copy a tensor into a dense layout of the same shape with its modes
// in another order, so that the contraction kernel reads long aligned runs of it. The destination is
// dense in its mode order; where an element comes from is an index table (layout.cuh) evaluated on the
// destination's linear index.
#pragma once
#include "layout.cuh"
#include "types.cuh"

namespace gett {

// The destination's innermost mode is the source's stride-1 mode: thread after thread moves V-element
// vectors, UNROLL of them loaded before any is stored so their latencies overlap. SrcTable maps a
// destination element index to its source offset. Op (computed in Acc) is the operand's elementwise op,
// applied here once per element so that the contraction reads the copy without one.
template <class T, class Acc, class Op, class Index, class SrcTable, int V, int UNROLL>
__device__ __forceinline__ void copy_runs(const T* __restrict__ src, T* __restrict__ dst, Index vectors) {
  using Vector = Vec<T, V>;
  const Index stride = Index(gridDim.x) * Index(blockDim.x) * Index(UNROLL);
  for (Index first = Index(blockIdx.x) * Index(blockDim.x) * Index(UNROLL) + Index(threadIdx.x); first < vectors;
       first += stride) {
    Vector v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const Index i = first + Index(u) * Index(blockDim.x);
      if (i < vectors) v[u] = *reinterpret_cast<const Vector*>(src + SrcTable::offset(i * Index(V)));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const Index i = first + Index(u) * Index(blockDim.x);
      if (i < vectors) *reinterpret_cast<Vector*>(dst + i * Index(V)) = apply_op<Acc, Op>(v[u], true);
    }
  }
}

// The destination's innermost mode Q is not the source's stride-1 mode P: a CTA of 32 x ROWS threads
// moves a TQ x TP block of (Q, P) through shared memory, reading along P and writing along Q. The
// other modes form one "rest" index, walked by blockIdx.y; SrcRest and DstRest give its offsets.
// SQ: Q's source stride; DP: P's destination stride; Op as in copy_runs. A block may span a whole short extent (e.g. 72).
template <class T, class Acc, class Op, class Index, class Offset, int TQ, int TP, int ROWS, long long EQ,
          long long EP, long long SQ, long long DP, class SrcRest, class DstRest>
__device__ __forceinline__ void transpose_tiles(const T* __restrict__ src, T* __restrict__ dst, Index rests) {
  __shared__ T tile[TQ][TP + 1];   // +1: a column of the block spreads over the banks
  constexpr long long NQ = (EQ + TQ - 1) / TQ;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long q0 = (blockIdx.x % NQ) * TQ, p0 = (blockIdx.x / NQ) * TP;
  for (Index rest = blockIdx.y; rest < rests; rest += gridDim.y) {
    const Offset from = SrcRest::offset(rest), to = DstRest::offset(rest);
#pragma unroll 4
    for (int r = ty; r < TQ; r += ROWS)
#pragma unroll
      for (int c = tx; c < TP; c += 32) {
        const long long q = q0 + r, p = p0 + c;
        if (q < EQ && p < EP) tile[r][c] = src[from + Offset(q) * Offset(SQ) + Offset(p)];
      }
    __syncthreads();
#pragma unroll 4
    for (int r = ty; r < TP; r += ROWS)
#pragma unroll
      for (int c = tx; c < TQ; c += 32) {
        const long long p = p0 + r, q = q0 + c;
        if (q < EQ && p < EP)
          dst[to + Offset(p) * Offset(DP) + Offset(q)] = apply_op<Acc, Op>(Vec<T, 1>{tile[c][r]}, true).v[0];
      }
    __syncthreads();
  }
}

}  // namespace gett
