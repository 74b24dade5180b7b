// Could #14's staging copy and its contraction run at once, the contraction reading A' from L2 right after
// the copy wrote it (and dropping it from L2 once every reader has it)? Data movement only, TCCG #14
// ab-cad-dcb (f16, a = b' = c = d = 312, b = 296): A[c, a, d] (c stride-1) is copied to A'[a, d, c] (a
// stride-1; K = (d, c), d first), as gett's staging does; the "contraction" reads A' and B[d, c, b] in the
// contraction's K tiles (64 d at one c), 3 x 2 output tiles of 128 x 160 and 21 splits over c, and throws
// the data away. Modes:
//   0  copy, then the reader (one stream): what gett does now
//   1  both at once (two streams): the copy walks d in blocks of 64 (all c), counting finished units per
//      block; a reader waits for its d block before reading it
//   2  as 1, and the last of a K tile's six readers drops its A' lines from L2 (discard.global.L2)
//   3  as 0, the reader dropping A' as in 2
//   4, 5  the copy alone, the reader alone
// argv[1]: copy CTAs (default: one an SM).
// Session 41 (benchmarks/NOTES.md).
//   nvcc -O3 -arch=sm_90a -std=c++17 -o staged_overlap benchmarks/probes/staged_overlap.cu && ./staged_overlap
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int E = 312, NB = 296, DT = 64, CB = 64;
constexpr int D_BLOCKS = (E + DT - 1) / DT, C_BLOCKS = (E + CB - 1) / CB;   // 5, 5
constexpr int UNITS = E * C_BLOCKS;                                         // (d, c block) copy units
constexpr int SPLITS = 21, M_TILES = 3, N_TILES = 2, BM = 128, BN = 160, READERS = M_TILES * N_TILES;

struct Counters {
  unsigned work;               // copy units handed out
  unsigned done[D_BLOCKS];     // copy units finished, per d block
  unsigned reads[D_BLOCKS * E];   // readers finished with K tile (d block, c)
};

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ int4 load_cg(const void* p) {
  int4 v;
  asm volatile("ld.global.cg.v4.s32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__host__ __device__ constexpr int imin(int x, int y) { return x < y ? x : y; }
__host__ __device__ constexpr int units_in(int db) { return (db < D_BLOCKS - 1 ? DT : E - DT * (D_BLOCKS - 1)) * C_BLOCKS; }

// A persistent copy: units (d, c block) in d-block order, taken from a counter; each through shared memory,
// read in 128-byte runs along c and written in 624-byte runs along a.
__global__ void __launch_bounds__(256) copy_units(const __half* __restrict__ A, __half* __restrict__ At, Counters* k) {
  __shared__ __half tile[E][CB + 2];
  __shared__ unsigned unit;
  for (;;) {
    if (threadIdx.x == 0) unit = atomicAdd(&k->work, 1);
    __syncthreads();
    const unsigned u = unit;
    if (u >= UNITS) return;
    const int d = u / C_BLOCKS, c0 = u % C_BLOCKS * CB, cn = imin(CB, E - c0);
    for (int e = threadIdx.x; e < E * (CB / 8); e += blockDim.x) {   // 8-element vectors along c
      const int a = e / (CB / 8), c = e % (CB / 8) * 8;
      if (c < cn) {
        const int4 v = *reinterpret_cast<const int4*>(A + (c0 + c) + (size_t)E * a + (size_t)E * E * d);
        const __half* h = reinterpret_cast<const __half*>(&v);
        for (int j = 0; j < 8; ++j) tile[a][c + j] = h[j];
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < cn * (E / 8); e += blockDim.x) {   // 8-element vectors along a
      const int c = e / (E / 8), a = e % (E / 8) * 8;
      __half h[8];
      for (int j = 0; j < 8; ++j) h[j] = tile[a + j][c];
      *reinterpret_cast<int4*>(At + a + (size_t)E * (d + (size_t)E * (c0 + c))) = *reinterpret_cast<int4*>(h);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(&k->done[d / DT], 1);
    }
  }
}

// The contraction's reads: CTA (m, n, s) reads, d block after d block, the K tiles (64 d, one c) of its c range:
// A' rows of 128 a (256 bytes each) and B rows of 160 b (128 bytes of d each).
constexpr int READ_THREADS = 1024, C_STEP = 4, LOADS = 9;   // 4 x (64 x 16 + 160 x 8) vectors / 1024
__global__ void __launch_bounds__(READ_THREADS) read_tiles(const __half* __restrict__ At, const __half* __restrict__ B,
                                                   Counters* k, int wait, int drop, int* sink) {
  const int m = blockIdx.x % M_TILES, n = blockIdx.x / M_TILES % N_TILES, s = blockIdx.x / READERS;
  const int a0 = m * BM, rows = imin(BM, E - a0), b0 = n * BN, cols = imin(BN, NB - b0);
  const int c_first = s * E / SPLITS, c_last = (s + 1) * E / SPLITS;
  int acc = 0;
  for (int db = 0; db < D_BLOCKS; ++db) {
    const int d0 = db * DT, dn = imin(DT, E - d0);
    if (wait) {
      if (threadIdx.x == 0)
        while (load_acquire(&k->done[db]) < (unsigned)units_in(db)) __nanosleep(200);
      __syncthreads();
    }
    // C_STEP K tiles at a time, 16 bytes a load, all loads of them issued before any is used: as many bytes
    // in flight as a contraction's 4 stages
    const int a_vec = rows / 8, b_vec = dn / 8, per_c = dn * a_vec + cols * b_vec;
    for (int c1 = c_first; c1 < c_last; c1 += C_STEP) {
      const int cs = imin(C_STEP, c_last - c1), total = cs * per_c;
      int4 v[LOADS];
#pragma unroll
      for (int i = 0; i < LOADS; ++i) {
        const int e = threadIdx.x + i * READ_THREADS, c = c1 + e / per_c, f = e % per_c;
        if (e >= total) {
          v[i] = make_int4(0, 0, 0, 0);
        } else if (f < dn * a_vec) {
          const int d = f / a_vec, a = f % a_vec * 8;
          v[i] = load_cg(At + a0 + a + (size_t)E * (d0 + d + (size_t)E * c));
        } else {
          const int g = f - dn * a_vec, b = g / b_vec, d = g % b_vec * 8;
          v[i] = load_cg(B + d0 + d + (size_t)E * c + (size_t)E * E * (b0 + b));
        }
      }
#pragma unroll
      for (int i = 0; i < LOADS; ++i) acc ^= v[i].x ^ v[i].w;
      if (drop) {   // each K tile's A' region (dn rows of all E a) once its six readers have it
        __shared__ unsigned last[C_STEP];
        __syncthreads();
        if (threadIdx.x < cs) last[threadIdx.x] = atomicAdd(&k->reads[db * E + c1 + threadIdx.x], 1) == READERS - 1;
        __syncthreads();
        for (int j = 0; j < cs; ++j)
          if (last[j]) {
            const char* region = reinterpret_cast<const char*>(At + (size_t)E * (d0 + (size_t)E * (c1 + j)));
            for (int i = threadIdx.x; i < dn * E * 2 / 128; i += READ_THREADS)
              asm volatile("discard.global.L2 [%0], 128;" ::"l"(region + (size_t)i * 128) : "memory");
          }
      }
    }
  }
  if (acc == 0x12345678) sink[0] = acc;
}

int main(int argc, char** argv) {
  const size_t n_a = (size_t)E * E * E, n_b = (size_t)E * E * NB;
  __half *A, *At, *B;
  Counters* k;
  int* sink;
  CK(cudaMalloc(&A, n_a * 2));
  CK(cudaMalloc(&At, n_a * 2));
  CK(cudaMalloc(&B, n_b * 2));
  CK(cudaMalloc(&k, sizeof(Counters)));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(A, 0x3c, n_a * 2));
  CK(cudaMemset(B, 0x3c, n_b * 2));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int copy_ctas = argc > 1 ? atoi(argv[1]) : sms;
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t t0, t1, read;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  CK(cudaEventCreateWithFlags(&read, cudaEventDisableTiming));
  const char* names[] = {"copy, then read", "at once", "at once, A' dropped", "copy, then read, A' dropped",
                         "copy alone", "read alone"};
  printf("#14 data movement: A %.1f MB -> A', B %.1f MB; copy CTAs %d, readers %d\n", n_a * 2e-6, n_b * 2e-6,
         copy_ctas, READERS * SPLITS);
  for (int round = 0; round < 2; ++round)
    for (int mode = 0; mode < 6; ++mode) {
      std::vector<float> us;
      for (int run = 0; run < 30; ++run) {
        CK(cudaMemsetAsync(k, 0, sizeof(Counters), s1));
        CK(cudaEventRecord(t0, s1));
        if (mode != 5) copy_units<<<copy_ctas, 256, 0, s1>>>(A, At, k);
        if (mode == 4) {
        } else if (mode == 1 || mode == 2) {
          CK(cudaStreamWaitEvent(s2, t0, 0));
          read_tiles<<<READERS * SPLITS, READ_THREADS, 0, s2>>>(At, B, k, 1, mode == 2, sink);
          CK(cudaEventRecord(read, s2));
          CK(cudaStreamWaitEvent(s1, read, 0));
        } else {
          read_tiles<<<READERS * SPLITS, READ_THREADS, 0, s1>>>(At, B, k, 0, mode == 3, sink);
        }
        CK(cudaEventRecord(t1, s1));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        if (run >= 5) us.push_back(ms * 1e3f);
      }
      std::sort(us.begin(), us.end());
      printf("round %d mode %d %-28s median %6.1f us  min %6.1f\n", round, mode, names[mode], us[us.size() / 2], us[0]);
    }
  return 0;
}
