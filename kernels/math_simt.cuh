// SIMT math: every thread owns TM x TN accumulators of the tile, rows ty + i*TY and columns
// tx + j*TX, so a warp's shared-memory reads are broadcasts or consecutive. Works for every type
// and every semiring (custom multiply and add).
#pragma once
#include "types.cuh"

namespace gett {

template <class Acc, class Semiring, class LoadA, class LoadB, int BM, int BN, int BK, int THREADS, int TM, int TN>
struct SimtMath {
  static constexpr int TX = BN / TN, TY = BM / TM;
  static_assert(TX * TY == THREADS, "thread tile must cover the CTA tile");
  static constexpr bool kAsyncMath = false;   // compute() returns with the tile's products done
  static constexpr bool kColumnPairs = false;   // no for_each_pair: a thread's columns are TX apart
  Acc acc[TM][TN];
  int tx, ty;

  __device__ __forceinline__ void init(int tid) {
    tx = tid % TX;
    ty = tid / TX;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = Semiring::template identity<Acc>();
  }

  template <class TA, class TB>
  __device__ __forceinline__ void compute(const TA* sA, const TB* sB, int k_valid) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (Semiring::mask_k && k >= k_valid) break;   // padding must not enter a custom reduction
      Acc a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int m = ty + i * TY;
        a[i] = convert<Acc>(sA[LoadA::kRowContig ? k * LoadA::LD + m : m * LoadA::LD + k]);
      }
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int n = tx + j * TX;
        b[j] = convert<Acc>(sB[LoadB::kRowContig ? k * LoadB::LD + n : n * LoadB::LD + k]);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = Semiring::add(acc[i][j], Semiring::mul(a[i], b[j]));
    }
  }

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) f(ty + i * TY, tx + j * TX, acc[i][j]);
  }
};

}  // namespace gett
