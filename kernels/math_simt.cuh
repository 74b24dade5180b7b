// SIMT math: every thread owns TM x TN accumulators of the tile. Its rows come in runs of RUN
// consecutive ones, runs TY * RUN apart (run r of thread ty starts at (r * TY + ty) * RUN), and its
// columns likewise, so a warp's shared-memory reads are broadcasts or consecutive. Works for every
// type and every semiring (custom multiply and add).
#pragma once
#include "types.cuh"

namespace gett {

// How one operand's TR fragment values are read from its shared tile (LD elements between lines):
// up to 16 bytes (4 elements) per read, along the rows of a row-contiguous tile (then a thread's rows
// come in runs of RUN, where RUNS allows) or along K for a K-contiguous one (then KSTEP K steps are
// read at once).
// Scalar reads put 16 of them against 64 multiply-adds of an 8 x 8 thread tile: shared memory, not the
// FMA pipe, was the limit.
template <class T, class Load, int TR, int BK, bool RUNS = true>
struct SimtFragment {
  static constexpr int W = 16 / int(sizeof(T)) < 4 ? 16 / int(sizeof(T)) : 4;
  static constexpr int RUN = RUNS && Load::kRowContig && TR % W == 0 && Load::LD % W == 0 ? W : 1;
  static constexpr int KSTEP = !Load::kRowContig && BK % W == 0 && Load::LD % W == 0 ? W : 1;

  // Tile row (or column) of this thread's i-th value; t is its index among the T threads along it.
  template <int T_THREADS>
  __device__ __forceinline__ static int row(int i, int t) {
    return (i / RUN * T_THREADS + t) * RUN + i % RUN;
  }

  // v[kk][i] = the i-th value at K step k0 + kk, for KS steps (KS a multiple of KSTEP).
  template <class Acc, int T_THREADS, int KS>
  __device__ __forceinline__ static void load(const T* s, int k0, int t, Acc (&v)[KS][TR]) {
    static_assert(KS % KSTEP == 0, "K steps are read KSTEP at a time");
    if constexpr (Load::kRowContig) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int g = 0; g < TR / RUN; ++g) {
          const Vec<T, RUN> x = *reinterpret_cast<const Vec<T, RUN>*>(s + (k0 + kk) * Load::LD + row<T_THREADS>(g * RUN, t));
#pragma unroll
          for (int r = 0; r < RUN; ++r) v[kk][g * RUN + r] = convert<Acc>(x.v[r]);
        }
    } else {
#pragma unroll
      for (int i = 0; i < TR; ++i)
#pragma unroll
        for (int kq = 0; kq < KS; kq += KSTEP) {
          const Vec<T, KSTEP> x = *reinterpret_cast<const Vec<T, KSTEP>*>(s + row<T_THREADS>(i, t) * Load::LD + k0 + kq);
#pragma unroll
          for (int e = 0; e < KSTEP; ++e) v[kq + e][i] = convert<Acc>(x.v[e]);
        }
    }
  }
};

// COLUMN_RUNS: whether a thread's columns may come in runs (the planner's choice: gett/codegen.py,
// simt_column_runs). M_LANES: a warp's lanes run along M (ty fastest) instead of N, so that where D's
// stride-1 mode is in M their epilogue stores fall on consecutive banks rather than on one.
template <class Acc, class Semiring, class LoadA, class LoadB, int BM, int BN, int BK, int THREADS, int TM, int TN,
          bool COLUMN_RUNS, bool M_LANES = false>
struct SimtMath {
  static constexpr int TX = BN / TN, TY = BM / TM;
  static_assert(TX * TY == THREADS, "thread tile must cover the CTA tile");
  static constexpr bool kAsyncMath = false;   // compute() returns with the tile's products done
  static constexpr bool kColumnPairs = false;   // no for_each_pair: column runs need not be pairs
  using FragA = SimtFragment<typename LoadA::Element, LoadA, TM, BK>;
  using FragB = SimtFragment<typename LoadB::Element, LoadB, TN, BK, COLUMN_RUNS>;
  Acc acc[TM][TN];
  int tx, ty;

  __device__ __forceinline__ void init(int tid) {
    tx = M_LANES ? tid / TY : tid % TX;
    ty = M_LANES ? tid % TY : tid / TX;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = Semiring::template identity<Acc>();
  }

  __device__ __forceinline__ void compute(const typename LoadA::Element* sA, const typename LoadB::Element* sB,
                                         int k_valid) {
    // K steps per round: the deeper of the two operands' K reads
    constexpr int KS = FragA::KSTEP > FragB::KSTEP ? FragA::KSTEP : FragB::KSTEP;
#pragma unroll
    for (int k0 = 0; k0 < BK; k0 += KS) {
      Acc a[KS][TM], b[KS][TN];
      FragA::template load<Acc, TY, KS>(sA, k0, ty, a);
      FragB::template load<Acc, TX, KS>(sB, k0, tx, b);
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        if (Semiring::mask_k && k0 + kk >= k_valid) return;   // padding must not enter a custom reduction
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = Semiring::add(acc[i][j], Semiring::mul(a[kk][i], b[kk][j]));
      }
    }
  }

  // A thread's rows in runs of consecutive ones (FragA::RUN; 1 where A is read along K):
  // f(r, c, v) with v[k] at (r + k, c).
  static constexpr int kRowRun = FragA::RUN;
  static constexpr int kWarpRows = 0;   // no for_each_strided_run
  static constexpr bool kBlockQuads = false;   // no for_each_block_quad
  template <class F>
  __device__ __forceinline__ void for_each_row_run(F&& f) const {
#pragma unroll
    for (int g = 0; g < TM / kRowRun; ++g)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        Acc v[kRowRun];
#pragma unroll
        for (int k = 0; k < kRowRun; ++k) v[k] = acc[g * kRowRun + k][j];
        f(FragA::template row<TY>(g * kRowRun, ty), FragB::template row<TX>(j, tx), v);
      }
  }

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j)
        f(FragA::template row<TY>(i, ty), FragB::template row<TX>(j, tx), acc[i][j]);
  }
};

}  // namespace gett
