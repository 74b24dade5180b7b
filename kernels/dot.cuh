// The dot kernel: a few outputs over a long K (dot products, row-wise dots, M·N of at most 16 per batch index).
// A GEMM tile would load one valid row of 32 and wait on every few bytes; here TILE_THREADS threads share out
// a BM x BN tile's K instead, and a CTA of THREADS takes THREADS / TILE_THREADS consecutive tiles (one thread a
// tile where the batch, not K, is the operands' stride-1 mode: a warp's loads then lie side by side). Each thread
// reads one V-vector of A's and of B's K run per step, UNROLL steps at a time, and adds its products into all
// BM x BN sums; each tile's threads then add their sums in a fixed order (warp shuffles, then shared memory),
// so results are the same on every run. With SPLIT CTAs per group of tiles, each takes one range of K and
// writes its partial sums where reduce_splits (gett.cuh) reads them.
//
// Problem as for gett.cuh. V > 1 only where the planner checked that K's first mode is stride-1 in A and B
// and V divides its extent, every other stride and both pointers' alignment (gett/codegen.py, dot_vector).
#pragma once
#include "layout.cuh"
#include "types.cuh"

namespace gett {

// v from lane ^ mask, for any type of whole 4-byte words (complex numbers, doubles).
template <class T>
__device__ __forceinline__ T shuffle_xor(T v, int mask) {
  static_assert(sizeof(T) % 4 == 0, "shuffles move 4-byte words");
  int w[sizeof(T) / 4];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < int(sizeof(T) / 4); ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask);
  memcpy(&v, w, sizeof(T));
  return v;
}

// x's elements in Acc, the op applied: 16-bit floats into float a pair at a time (half the conversions).
template <class Acc, class Op, class T, int V>
__device__ __forceinline__ void widen(const Vec<T, V>& x, Acc (&out)[V]) {
  constexpr bool kHalfPairs = SameType<T, __half>::value && SameType<Acc, float>::value && V % 2 == 0;
  constexpr bool kBf16Pairs = SameType<T, __nv_bfloat16>::value && SameType<Acc, float>::value && V % 2 == 0;
#pragma unroll
  for (int e = 0; e < V; e += (kHalfPairs || kBf16Pairs) ? 2 : 1) {
    if constexpr (kHalfPairs || kBf16Pairs) {
      const float2 f = kHalfPairs ? __half22float2(*reinterpret_cast<const __half2*>(&x.v[e]))
                                  : __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x.v[e]));
      out[e] = Op{}(f.x);
      out[e + 1] = Op{}(f.y);
    } else {
      out[e] = Op{}(convert<Acc>(x.v[e]));
    }
  }
}

template <class P, class OpA, class OpB, class OpC, class OpOut, class Semiring, int BM, int BN, int THREADS,
          int TILE_THREADS, int V, int UNROLL, int SPLIT, bool M_FAST>
struct Dot {
  using Acc = typename P::Acc;
  using Offset = typename P::Offset;
  static_assert((TILE_THREADS == 1 || TILE_THREADS % 32 == 0) && THREADS % TILE_THREADS == 0 && THREADS <= 1024,
                "a thread or whole warps a tile");
  static constexpr int TILES_PER_CTA = THREADS / TILE_THREADS, TILE_WARPS = TILE_THREADS / 32;
  static_assert(P::K % V == 0, "whole vectors along K");
  static constexpr bool PARTIALS_M_FAST = M_FAST;   // the partials' layout reduce_splits reads
  static constexpr long long TILES_M = (P::M + BM - 1) / BM, TILES_N = (P::N + BN - 1) / BN;
  static constexpr long long TILES = TILES_M * TILES_N * P::L;
  static constexpr long long GROUPS = (TILES + TILES_PER_CTA - 1) / TILES_PER_CTA;   // CTAs a split
  static constexpr long long STEPS = P::K / V;   // vectors along K
  static constexpr long long STEPS_PER_SPLIT = (STEPS + SPLIT - 1) / SPLIT;

  __device__ __forceinline__ static void run(const typename P::TA* __restrict__ A, const typename P::TB* __restrict__ B,
                                             const typename P::TC* __restrict__ C, typename P::TD* __restrict__ D,
                                             Acc* __restrict__ partials, Acc alpha, Acc beta) {
    const long long cta = (long long)blockIdx.x + (long long)blockIdx.y * gridDim.x;
    if (cta >= GROUPS * SPLIT) return;
    const int split = int(cta / GROUPS), local = threadIdx.x / TILE_THREADS, lane_in_tile = threadIdx.x % TILE_THREADS;
    // a tile past the last reads tile 0 and stores nothing (its threads still meet the CTA's barrier)
    const long long mine = cta % GROUPS * TILES_PER_CTA + local, tile = mine < TILES ? mine : 0;
    const long long m0 = tile % TILES_M * BM, n0 = tile / TILES_M % TILES_N * BN, l = tile / (TILES_M * TILES_N);
    const auto il = typename P::IndexL(l);
    A += P::AL::offset(il);
    B += P::BL::offset(il);

    // rows past M (columns past N) read row 0 (column 0), a valid address; their sums are never stored
    Offset a_row[BM], b_col[BN];
#pragma unroll
    for (int i = 0; i < BM; ++i) a_row[i] = m0 + i < P::M ? P::AM::offset(typename P::IndexM(m0 + i)) : Offset(0);
#pragma unroll
    for (int j = 0; j < BN; ++j) b_col[j] = n0 + j < P::N ? P::BN::offset(typename P::IndexN(n0 + j)) : Offset(0);

    Acc acc[BM][BN];
#pragma unroll
    for (int i = 0; i < BM; ++i)
#pragma unroll
      for (int j = 0; j < BN; ++j) acc[i][j] = Semiring::template identity<Acc>();

    using VA = Vec<typename P::TA, V>;
    using VB = Vec<typename P::TB, V>;
    const long long first = split * STEPS_PER_SPLIT;
    const long long last = first + STEPS_PER_SPLIT < STEPS ? first + STEPS_PER_SPLIT : STEPS;
    for (long long s0 = first + lane_in_tile; s0 < last; s0 += (long long)TILE_THREADS * UNROLL) {
      // all UNROLL steps' loads first: that many vectors of each operand in flight a thread
      VA a[UNROLL][BM];
      VB b[UNROLL][BN];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const long long s = s0 + (long long)u * TILE_THREADS;
        if (s < last) {
          const auto k = typename P::IndexK(s * V);
          const Offset ka = P::AK::offset(k), kb = P::BK::offset(k);
#pragma unroll
          for (int i = 0; i < BM; ++i) a[u][i] = *reinterpret_cast<const VA*>(A + a_row[i] + ka);
#pragma unroll
          for (int j = 0; j < BN; ++j) b[u][j] = *reinterpret_cast<const VB*>(B + b_col[j] + kb);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (s0 + (long long)u * TILE_THREADS >= last) break;
        Acc x[BM][V], y[BN][V];
#pragma unroll
        for (int i = 0; i < BM; ++i) widen<Acc, OpA>(a[u][i], x[i]);
#pragma unroll
        for (int j = 0; j < BN; ++j) widen<Acc, OpB>(b[u][j], y[j]);
#pragma unroll
        for (int e = 0; e < V; ++e)
#pragma unroll
          for (int i = 0; i < BM; ++i)
#pragma unroll
            for (int j = 0; j < BN; ++j) acc[i][j] = Semiring::add(acc[i][j], Semiring::mul(x[i][e], y[j][e]));
      }
    }

    if constexpr (TILE_THREADS == 1) {   // a thread's sums are its tile's
      if (mine < TILES)
#pragma unroll
        for (int t = 0; t < BM * BN; ++t) store(t, acc[t / BN][t % BN], m0, n0, l, split, C, D, partials, alpha, beta);
    } else {
      // each tile's sums: across each warp (a fixed butterfly), then across the tile's warps in order
      __shared__ Acc warp_sums[THREADS / 32][BM * BN];
      const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
      for (int i = 0; i < BM; ++i)
#pragma unroll
        for (int j = 0; j < BN; ++j) {
#pragma unroll
          for (int mask = 16; mask > 0; mask /= 2) acc[i][j] = Semiring::add(acc[i][j], shuffle_xor(acc[i][j], mask));
          if (lane == 0) warp_sums[warp][i * BN + j] = acc[i][j];
        }
      __syncthreads();
      for (int t = lane_in_tile; t < BM * BN && mine < TILES; t += TILE_THREADS) {
        Acc sum = warp_sums[local * TILE_WARPS][t];
        for (int w = 1; w < TILE_WARPS; ++w) sum = Semiring::add(sum, warp_sums[local * TILE_WARPS + w][t]);
        store(t, sum, m0, n0, l, split, C, D, partials, alpha, beta);
      }
    }
  }

  // Output t of the tile at (m0, n0, l): its partial sum for split ``split``, or D = op_out(alpha sum + beta op_c(C)).
  __device__ __forceinline__ static void store(int t, Acc sum, long long m0, long long n0, long long l, int split,
                                               const typename P::TC* __restrict__ C, typename P::TD* __restrict__ D,
                                               Acc* __restrict__ partials, Acc alpha, Acc beta) {
    const long long m = m0 + t / BN, n = n0 + t % BN;
    if (m < P::M && n < P::N) {
      if constexpr (SPLIT > 1) {
        const long long e = M_FAST ? (l * P::N + n) * P::M + m : (l * P::M + m) * P::N + n;
        partials[split * (P::M * P::N * P::L) + e] = sum;
      } else {
        const auto im = typename P::IndexM(m);
        const auto in = typename P::IndexN(n);
        const auto il = typename P::IndexL(l);
        Acc out = alpha * sum;
        if (!(beta == zero<Acc>()))
          out = out + beta * OpC{}(convert<Acc>(C[P::CM::offset(im) + P::CN::offset(in) + P::CL::offset(il)]));
        D[P::DM::offset(im) + P::DN::offset(in) + P::DL::offset(il)] = convert<typename P::TD>(OpOut{}(out));
      }
    }
  }
};

}  // namespace gett
