// Tensor-core math with mma.sync (sm_80+). Warps tile the CTA tile as (BM/WM) x (BN/WN); each warp
// owns WM x WN accumulators in the fragment layout of the instruction:
//   - Mma16Math: f16/bf16 m16n8k16 with f32 accumulation, fragments through ldmatrix (.trans when the
//     shared tile is stored the other way round);
//   - Tf32Math: f32 data, m16n8k8 on tf32 (optionally 3xtf32: big*big + big*small + small*big);
//   - F64Math: DMMA m8n8k4.
#pragma once
#include "copy.cuh"
#include "types.cuh"

namespace gett {

template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Position of accumulator element i (0..3) of an m16n8 fragment: (row, column) inside the fragment.
__device__ __forceinline__ int frag_row(int lane, int i) { return lane / 4 + (i / 2) * 8; }
__device__ __forceinline__ int frag_col(int lane, int i) { return (lane % 4) * 2 + (i % 2); }

// One warp's WM x WN accumulators as FRAG_M x 8 fragments of E elements per lane (the C layout of
// mma.sync: m16n8 with 4 floats, m8n8 with 2 doubles), warps laid out (BM/WM) x (BN/WN) over the tile.
// MT_STRIDE: rows from one of a warp's fragments to the next; FRAG_M keeps a warp's WM rows together,
// more interleaves the warps (wgmma over several 64-row slabs: a warp's 16 rows of each, warps 16 apart).
template <class T, int FRAG_M, int E, int BN, int WM, int WN, int MT_STRIDE = FRAG_M>
struct WarpFragments {
  static constexpr int WARPS_N = BN / WN, MT = WM / FRAG_M, NT = WN / 8;
  static constexpr bool kAsyncMath = false;   // compute() returns with the tile's products done
  T acc[MT][NT][E];
  int wm0, wn0, lane;

  __device__ __forceinline__ void init(int tid) {
    const int warp = tid / 32;
    lane = tid % 32;
    wm0 = (warp / WARPS_N) * (MT_STRIDE == FRAG_M ? WM : FRAG_M);
    wn0 = (warp % WARPS_N) * WN;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < E; ++e) acc[i][j][e] = T(0);
  }

  static constexpr int kRowRun = 1;   // no for_each_row_run: a lane's rows are 8 apart
  // ... but runs of rows STRIDE apart (for_each_strided_run), in m16n8 fragments.
  static constexpr int kWarpRows = FRAG_M == 16 && E == 4 && MT_STRIDE == FRAG_M ? WM : 0;

  // Every accumulator, f(r, c, v) with its place in the CTA tile, a pair at a time: f(r, c, v0, v1)
  // with v1 at (r, c + 1), as every fragment holds them.
  static constexpr bool kColumnPairs = true;
  template <class F>
  __device__ __forceinline__ void for_each_pair(F&& f) const {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < E; e += 2)
          f(wm0 + mt * MT_STRIDE + frag_row(lane, e), wn0 + nt * 8 + frag_col(lane, e), acc[mt][nt][e],
            acc[mt][nt][e + 1]);
  }
  // Every accumulator in runs of WM / STRIDE rows STRIDE apart: f(r, c, v) with v[k] at (r + k * STRIDE, c).
  // A lane's rows are wm0 + 8 j + lane / 4, row 8 j in acc[j / 2][.][(j % 2) * 2 + column].
  template <int STRIDE, class F>
  __device__ __forceinline__ void for_each_strided_run(F&& f) const {
    static_assert(kWarpRows > 0 && STRIDE % 8 == 0 && WM % STRIDE == 0, "runs of m16n8 fragments' rows");
    constexpr int R = WM / STRIDE;
#pragma unroll
    for (int o = 0; o < STRIDE; o += 8)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          T v[R];
#pragma unroll
          for (int k = 0; k < R; ++k) {
            const int j = (o + k * STRIDE) / 8;
            v[k] = acc[j / 2][nt][(j % 2) * 2 + e];
          }
          f(wm0 + o + lane / 4, wn0 + nt * 8 + (lane % 4) * 2 + e, v);
        }
  }
  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    for_each_pair([&](int r, int c, T v0, T v1) {
      f(r, c, v0);
      f(r, c + 1, v1);
    });
  }
  // Every accumulator in a warp's 16 x 16 blocks of four 8 x 8 matrices (rows r0 | r0 + 8 by columns c0 |
  // c0 + 8, in that order: j = 2 * column half + row half): f(r0, c0, v) with v[2j], v[2j + 1] this lane's
  // neighbouring pair of matrix j, as stmatrix takes them. (Where a math path enables it: kBlockQuads.)
  static constexpr bool kBlockQuads = false;
  template <class F>
  __device__ __forceinline__ void for_each_block_quad(F&& f) const {
    static_assert(FRAG_M == 16 && E == 4 && NT % 2 == 0, "m16n8 fragments, 8-column blocks in pairs");
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        const T v[8] = {acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3],
                        acc[mt][nt + 1][0], acc[mt][nt + 1][1], acc[mt][nt + 1][2], acc[mt][nt + 1][3]};
        f(wm0 + mt * MT_STRIDE, wn0 + nt * 8, v);
      }
  }
};

template <class T, class LoadA, class LoadB, int BM, int BN, int BK, int WM, int WN>
struct Mma16Math : WarpFragments<float, 16, 4, BN, WM, WN> {
  using Base = WarpFragments<float, 16, 4, BN, WM, WN>;
  using Base::acc, Base::lane, Base::wm0, Base::wn0, Base::MT, Base::NT;
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "m16n8k16 tiling");
  static constexpr bool kBlockQuads = true;   // (WN % 16 == 0: 8-column blocks in pairs)

  __device__ __forceinline__ void compute(const T* sA, const T* sB, int) {
    const int j = lane / 8, r = lane % 8;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[MT][4], b[NT / 2][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int m0 = wm0 + mt * 16;
        if constexpr (LoadA::kRowContig)   // M-major: matrices (m0|m0+8) x (k|k+8), transposed
          ldmatrix_x4<true>(a[mt], sA + LoadA::smem_index(m0 + (j & 1) * 8, kk + r + (j >> 1) * 8));
        else
          ldmatrix_x4<false>(a[mt], sA + (m0 + lane % 16) * LoadA::LD + kk + (lane / 16) * 8);
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        const int n0 = wn0 + np * 16;   // two n8 tiles: regs {b0, b1} of tile 2np, then of 2np+1
        if constexpr (LoadB::kRowContig)   // N-major
          ldmatrix_x4<true>(b[np], sB + LoadB::smem_index(n0 + (j >> 1) * 8, kk + r + (j & 1) * 8));
        else
          ldmatrix_x4<false>(b[np], sB + (n0 + r + (j >> 1) * 8) * LoadB::LD + kk + (j & 1) * 8);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma_16816<T>(acc[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
    }
  }

};

__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <class LoadA, class LoadB, int BM, int BN, int BK, int WM, int WN, bool SPLIT3>
struct Tf32Math : WarpFragments<float, 16, 4, BN, WM, WN> {
  using Base = WarpFragments<float, 16, 4, BN, WM, WN>;
  using Base::acc, Base::lane, Base::wm0, Base::wn0, Base::MT, Base::NT;
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 8 == 0, "m16n8k8 tiling");

  __device__ __forceinline__ static float at_a(const float* s, int m, int k) {
    return s[LoadA::kRowContig ? k * LoadA::LD + m : m * LoadA::LD + k];
  }
  __device__ __forceinline__ static float at_b(const float* s, int n, int k) {
    return s[LoadB::kRowContig ? k * LoadB::LD + n : n * LoadB::LD + k];
  }

  __device__ __forceinline__ void compute(const float* sA, const float* sB, int) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      float fa[MT][4], fb[NT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int m = wm0 + mt * 16 + g;
        fa[mt][0] = at_a(sA, m, kk + t);
        fa[mt][1] = at_a(sA, m + 8, kk + t);
        fa[mt][2] = at_a(sA, m, kk + t + 4);
        fa[mt][3] = at_a(sA, m + 8, kk + t + 4);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int n = wn0 + nt * 8 + g;
        fb[nt][0] = at_b(sB, n, kk + t);
        fb[nt][1] = at_b(sB, n, kk + t + 4);
      }
      unsigned big_a[MT][4], big_b[NT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) big_a[mt][e] = to_tf32(fa[mt][e]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) big_b[nt][e] = to_tf32(fb[nt][e]);
      if constexpr (SPLIT3) {   // the rounding errors, themselves in tf32, recover ~f32 accuracy
        unsigned small_a[MT][4], small_b[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int e = 0; e < 4; ++e) small_a[mt][e] = to_tf32(fa[mt][e] - __uint_as_float(big_a[mt][e]));
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) small_b[nt][e] = to_tf32(fb[nt][e] - __uint_as_float(big_b[nt][e]));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            mma_1688_tf32(acc[mt][nt], small_a[mt], big_b[nt]);
            mma_1688_tf32(acc[mt][nt], big_a[mt], small_b[nt]);
          }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_1688_tf32(acc[mt][nt], big_a[mt], big_b[nt]);
    }
  }

};

__device__ __forceinline__ void mma_884_f64(double (&d)[2], double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(d[0]), "+d"(d[1]) : "d"(a), "d"(b));
}

template <class LoadA, class LoadB, int BM, int BN, int BK, int WM, int WN>
struct F64Math : WarpFragments<double, 8, 2, BN, WM, WN> {
  using Base = WarpFragments<double, 8, 2, BN, WM, WN>;
  using Base::acc, Base::lane, Base::wm0, Base::wn0, Base::MT, Base::NT;
  static_assert(WM % 8 == 0 && WN % 8 == 0 && BK % 4 == 0, "m8n8k4 tiling");

  __device__ __forceinline__ void compute(const double* sA, const double* sB, int) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 4) {
      double a[MT], b[NT];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int m = wm0 + mt * 8 + g, k = kk + t;
        a[mt] = sA[LoadA::kRowContig ? k * LoadA::LD + m : m * LoadA::LD + k];
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int n = wn0 + nt * 8 + g, k = kk + t;
        b[nt] = sB[LoadB::kRowContig ? k * LoadB::LD + n : n * LoadB::LD + k];
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_884_f64(acc[mt][nt], a[mt], b[nt]);
    }
  }
};

}  // namespace gett
