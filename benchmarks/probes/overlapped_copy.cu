// #14 (ab-cad-dcb, f16) as data movement only: can its staging copy (A (c, a, d) -> A' (d, c, a), B's K order)
// and the contraction's loads run at once, the contraction reading each chunk of A' from L2 while the copy
// writes the next? No MMAs: "readers" load the K tiles of A' and B that a split-K producer of 128 x 160 (or
// 128 x 296) tiles would, by cp.async into 2-4 shared stages, and drop them. Arms:
//   copy alone, readers alone, sequential (the copy, then the readers: today's plan without the math);
//   overlapped: the readers, then the copiers beside them on another stream; a chunk's readers wait on a flag
//     for it, the copy stays at most two chunks ahead of the readers;
//   + evict_last on the copy's stores; + discard: a reader drops each A' line from L2 once it has landed (one
//     reader a line: 128 x 296 tiles), so that A' need not be written back.
// Two chunkings: c-chunks (c-blocks of 64 in K order; the copy reads A in 128-byte pieces of its c-runs) and
// d-chunks (d-block j of every c: the copy reads whole c-runs, A' gets c's stride padded to 320).
// Session 45 (benchmarks/NOTES.md, results/overlapped_copy_session45.txt).
//   nvcc -O3 -arch=sm_90a -std=c++17 -o overlapped_copy benchmarks/probes/overlapped_copy.cu && ./overlapped_copy
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));              \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

constexpr int E = 312, NB = 296;                 // a, c, d extents; b extent
constexpr long long K = (long long)E * E;         // 97344, contiguous in A' and B
constexpr int KT = 64;                            // K tile (elements): 128 bytes a row
constexpr int CB = 64, DB = 64;                   // copy tile: 64 c x 64 d for one a
constexpr int CHUNKS = (E + CB - 1) / CB;         // c-blocks: 5
constexpr int D_BLOCKS = (E + DB - 1) / DB;       // 5
constexpr int TILES_PER_CHUNK = E * D_BLOCKS;     // copy tiles a chunk: 1560
constexpr int THREADS = 256;

struct Args {
  const uint4* A; uint4* Ap; const uint4* B;      // A, A' and B as 16-byte vectors
  int* ready; int* done; int* sink;               // per chunk: copy tiles written, readers finished
  int copiers, readers, mt, nt, splits, bm, bn;   // grid roles and the readers' tiling
  int overlapped, keep, discard;
};

constexpr int P = 320;                            // d-chunk layout: A' (d, c, a) with c's stride padded to 5 lines
constexpr int KPV = E * P / 8;                    // a padded A' row in 16-byte vectors
constexpr int KV = int(K / 8);                    // a row of B (or dense A') in 16-byte vectors


__device__ __forceinline__ void wait_at_least(const int* flag, int value) {   // the whole CTA waits
  if (threadIdx.x == 0) {
    int v;
    do { asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(flag)); } while (v < value);
  }
  __syncthreads();
}

__device__ __forceinline__ int chunk_k_tiles(int j) { return (min(E, (j + 1) * CB) - j * CB) * E / KT; }

__device__ __forceinline__ void store(uint4* p, uint4 v, bool keep, unsigned long long policy) {
  if (keep) asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;"
                         ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy) : "memory");
  else *p = v;
}

template <int TPI>   // copy tiles (consecutive a) a copier CTA moves at once
__device__ void copier(const Args& g, int q) {
  __shared__ uint16_t s[TPI][DB][CB + 1];   // +1: a column spreads over the banks
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.A);
  uint16_t* Ap = reinterpret_cast<uint16_t*>(g.Ap);
  for (int j = 0; j < CHUNKS; ++j) {
    if (g.overlapped && j >= 2) wait_at_least(g.done + j - 2, g.readers);   // at most two chunks unread
    const int c0 = j * CB, cw = min(E - c0, CB), cv = cw / 8;
    for (int t0 = q * TPI; t0 < TILES_PER_CHUNK; t0 += g.copiers * TPI) {   // TPI tiles of consecutive a
      const int d0 = (t0 / E) * DB, dw = min(E - d0, DB), tiles = min(TPI, E - t0 % E);
      uint4 r[TPI * DB * CB / 8 / THREADS];
#pragma unroll
      for (int i = 0; i < TPI * DB * CB / 8 / THREADS; ++i) {   // rows d of cw contiguous c, for each a
        const int v = threadIdx.x + i * THREADS, u = v / (DB * CB / 8), w = v % (DB * CB / 8);
        const int dd = w / cv, cc = (w % cv) * 8;
        if (u < tiles && dd < dw)
          asm volatile("ld.global.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r[i].x), "=r"(r[i].y), "=r"(r[i].z), "=r"(r[i].w)
                       : "l"(A + c0 + cc + (long long)E * (t0 % E + u + (long long)E * (d0 + dd))));
      }
#pragma unroll
      for (int i = 0; i < TPI * DB * CB / 8 / THREADS; ++i) {
        const int v = threadIdx.x + i * THREADS, u = v / (DB * CB / 8), w = v % (DB * CB / 8);
        const int dd = w / cv, cc = (w % cv) * 8;
        if (u < tiles && dd < dw) {
          union { uint4 v; uint16_t e[8]; } x{r[i]};
          for (int k = 0; k < 8; ++k) s[u][dd][cc + k] = x.e[k];
        }
      }
      __syncthreads();
      const int dv = dw / 8;
      for (int v = threadIdx.x; v < tiles * cw * dv; v += THREADS) {   // rows c of dw contiguous d, for each a
        const int u = v / (cw * dv), cc = (v / dv) % cw, dd = (v % dv) * 8;
        union { uint4 v; uint16_t e[8]; } w;
        for (int i = 0; i < 8; ++i) w.e[i] = s[u][dd + i][cc];
        store(reinterpret_cast<uint4*>(Ap + d0 + dd + (long long)E * (c0 + cc + (long long)E * (t0 % E + u))), w.v,
              g.keep, policy);
      }
      __syncthreads();
      if (threadIdx.x == 0 && g.overlapped) { __threadfence(); atomicAdd(g.ready + j, tiles); }
    }
  }
}

__device__ __forceinline__ const uint4* row_of(const Args& g, int rr, int rows_m, int m0, int n0) {
  return rr < rows_m ? g.Ap + (m0 + rr) * KV : g.B + (n0 + rr - rows_m) * KV;
}

// A reader CTA loads its K tiles by cp.async into `stages` shared buffers, as a producer with that many
// stages in flight would, and drops each A' line from L2 once its stage has landed (discard).
template <int STAGES>
__device__ void reader(const Args& g, int r, uint4* smem) {
  const int s = r % g.splits, n = (r / g.splits) % g.nt, m = r / (g.splits * g.nt);
  const int m0 = m * g.bm, rows_m = min(E - m0, g.bm), n0 = n * g.bn, rows_n = min(NB - n0, g.bn);
  const int rows = rows_m + rows_n, part = threadIdx.x % 8;
  const uint4* a_end = g.Ap + E * int(K / 8);
  for (int j = 0; j < CHUNKS; ++j) {
    if (g.overlapped) wait_at_least(g.ready + j, TILES_PER_CHUNK);
    const int tiles = chunk_k_tiles(j), base = j * (CB * E / KT);
    const int kt0 = base + tiles * s / g.splits, kt1 = base + tiles * (s + 1) / g.splits;
    for (int kt = kt0; kt < kt1 + STAGES - 1; ++kt) {
      if (kt < kt1) {
        uint4* stage = smem + (kt % STAGES) * rows * 8;
        for (int v = threadIdx.x; v < rows * 8; v += THREADS) {
          const uint4* src = row_of(g, v / 8, rows_m, m0, n0) + kt * (KT / 8) + part;
          const unsigned dst = unsigned(__cvta_generic_to_shared(stage + v));
          asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
        }
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
      asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");   // tile kt - (STAGES - 1) landed
      const int landed = kt - (STAGES - 1);
      if (g.discard && landed >= kt0) {   // a line's 8 vectors came through this warp's 8 consecutive lanes
        __syncwarp();
        for (int v = threadIdx.x; v < rows_m * 8; v += THREADS)
          if (part == 0) {
            const uint4* line = row_of(g, v / 8, rows_m, m0, n0) + landed * (KT / 8);
            if (line < a_end) asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
          }
      }
    }
    if (g.overlapped) {
      __syncthreads();
      if (threadIdx.x == 0) atomicAdd(g.done + j, 1);
    }
  }
}

// The d-chunk variant: chunk j is d-block j of every c (K tiles of 64 d at one c, as a TMA view of K's two
// modes loads them), so the copy reads A's whole 624-byte c-runs (its planes of one d are contiguous) and
// writes A' with c's stride padded to 320, each piece one whole 128-byte line.
__device__ void copier_d(const Args& g, int q) {
  __shared__ uint16_t s[DB][E + 1];   // +1: a column spreads over the banks
  constexpr int CV = E / 8, LOADS = (DB * CV + THREADS - 1) / THREADS;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.A);
  uint16_t* Ap = reinterpret_cast<uint16_t*>(g.Ap);
  for (int j = 0; j < D_BLOCKS; ++j) {
    if (g.overlapped && j >= 2) wait_at_least(g.done + j - 2, g.readers);   // at most two chunks unread
    const int d0 = j * DB, dw = min(E - d0, DB), dv = dw / 8;
    for (int a = q; a < E; a += g.copiers) {
      uint4 r[LOADS];
#pragma unroll
      for (int i = 0; i < LOADS; ++i) {   // rows d of all 312 c
        const int v = threadIdx.x + i * THREADS, dd = v / CV, cc = v % CV * 8;
        if (dd < dw)
          asm volatile("ld.global.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r[i].x), "=r"(r[i].y), "=r"(r[i].z), "=r"(r[i].w)
                       : "l"(A + cc + (long long)E * (a + (long long)E * (d0 + dd))));
      }
#pragma unroll
      for (int i = 0; i < LOADS; ++i) {
        const int v = threadIdx.x + i * THREADS, dd = v / CV, cc = v % CV * 8;
        if (dd < dw) {
          union { uint4 v; uint16_t e[8]; } x{r[i]};
          for (int k = 0; k < 8; ++k) s[dd][cc + k] = x.e[k];
        }
      }
      __syncthreads();
      for (int v = threadIdx.x; v < E * dv; v += THREADS) {   // rows c of dw contiguous d
        const int cc = v / dv, dd = v % dv * 8;
        union { uint4 v; uint16_t e[8]; } w;
        for (int i = 0; i < 8; ++i) w.e[i] = s[dd + i][cc];
        store(reinterpret_cast<uint4*>(Ap + d0 + dd + (long long)P * (cc + (long long)E * a)), w.v, g.keep, policy);
      }
      __syncthreads();
      if (threadIdx.x == 0 && g.overlapped) { __threadfence(); atomicAdd(g.ready + j, 1); }
    }
  }
}

template <int STAGES>
__device__ void reader_d(const Args& g, int r, uint4* smem) {
  const int s = r % g.splits, n = (r / g.splits) % g.nt, m = r / (g.splits * g.nt);
  const int m0 = m * g.bm, rows_m = min(E - m0, g.bm), n0 = n * g.bn, rows_n = min(NB - n0, g.bn);
  const int rows = rows_m + rows_n, part = threadIdx.x % 8;
  const int c0 = E * s / g.splits, c1 = E * (s + 1) / g.splits;   // this split's K tiles: (c, d-block j)
  for (int j = 0; j < D_BLOCKS; ++j) {
    if (g.overlapped) wait_at_least(g.ready + j, E);
    const int parts = j * DB + DB <= E ? 8 : (E - j * DB) / 8;   // the last d-block's 56: 7 vectors (B unpadded)
    for (int c = c0; c < c1 + STAGES - 1; ++c) {
      if (c < c1) {
        uint4* stage = smem + ((c - c0) % STAGES) * rows * 8;
        for (int v = threadIdx.x; v < rows * 8; v += THREADS) {
          const int rr = v / 8;
          if (part >= parts) continue;
          const uint4* src = rr < rows_m ? g.Ap + (m0 + rr) * KPV + (P * c + DB * j) / 8 + part
                                         : g.B + (n0 + rr - rows_m) * KV + (E * c + DB * j) / 8 + part;
          const unsigned dst = unsigned(__cvta_generic_to_shared(stage + v));
          asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
        }
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
      asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");   // K tile c - (STAGES - 1) landed
      const int landed = c - (STAGES - 1);
      if (g.discard && landed >= c0) {   // a line's vectors came through this warp's 8 consecutive lanes
        __syncwarp();
        for (int v = threadIdx.x; v < rows_m * 8; v += THREADS)
          if (part == 0)
            asm volatile("discard.global.L2 [%0], 128;" ::"l"(g.Ap + (m0 + v / 8) * KPV + (P * landed + DB * j) / 8)
                         : "memory");
      }
    }
    if (g.overlapped) {
      __syncthreads();
      if (threadIdx.x == 0) atomicAdd(g.done + j, 1);
    }
  }
}

// At most 85 registers: two copier CTAs and a reader CTA must fit one SM's registers together (else a deadlock).
__global__ void __launch_bounds__(THREADS, 3) copy_d_kernel(Args g) { copier_d(g, blockIdx.x); }

template <int STAGES>
__global__ void __launch_bounds__(THREADS) read_d_kernel(Args g) {
  extern __shared__ uint4 smem[];
  reader_d<STAGES>(g, blockIdx.x, smem);
}

template <int TPI>
__global__ void __launch_bounds__(THREADS) copy_kernel(Args g) { copier<TPI>(g, blockIdx.x); }

template <int STAGES>
__global__ void __launch_bounds__(THREADS) read_kernel(Args g) {
  extern __shared__ uint4 smem[];
  reader<STAGES>(g, blockIdx.x, smem);
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  const size_t a_bytes = (size_t)E * K * 2, b_bytes = (size_t)NB * K * 2, flush_bytes = 256u << 20;
  const size_t ap_bytes = (size_t)E * E * P * 2;   // room for the padded layout
  uint4 *A, *Ap, *B; char* flush; int *flags, *sink;
  CK(cudaMalloc(&A, a_bytes)); CK(cudaMalloc(&Ap, ap_bytes)); CK(cudaMalloc(&B, b_bytes));
  CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMalloc(&flags, 2 * CHUNKS * sizeof(int))); CK(cudaMalloc(&sink, 4));
  {
    std::vector<uint16_t> h(a_bytes / 2);
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i * 2654435761u >> 7);
    CK(cudaMemcpy(A, h.data(), a_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, h.data(), b_bytes, cudaMemcpyHostToDevice));
  }
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  size_t set_aside = 0; cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize);
  printf("%s, %d SMs, L2 %d MiB, %.1f MiB set aside for persisting accesses\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize >> 20, set_aside / 1048576.0);
  // One shared-memory carveout for both kernels: an SM runs CTAs of kernels that ask for different ones only
  // after draining, which left the copiers waiting for SMs the waiting readers held (a deadlock).
  CK(cudaFuncSetAttribute(copy_kernel<2>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(copy_kernel<4>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(copy_d_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_d_kernel<2>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_d_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  CK(cudaFuncSetAttribute(read_d_kernel<3>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_d_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  CK(cudaFuncSetAttribute(read_d_kernel<4>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_d_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  CK(cudaFuncSetAttribute(read_kernel<2>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  CK(cudaFuncSetAttribute(read_kernel<3>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_kernel<4>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CK(cudaFuncSetAttribute(read_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  CK(cudaFuncSetAttribute(read_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, e2; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1)); CK(cudaEventCreate(&e2));

  // only: 1 the copy alone, 2 the readers alone; copiers: CTAs an SM
  struct Arm { const char* name; int overlapped, keep, discard, nt, bn, splits, stages, copiers, only, tpi, d; };
  const int sms = prop.multiProcessorCount;
  // d: the d-chunk variant (copy_d_kernel, read_d_kernel, A' padded)
  const Arm arms[] = {
      {"c-chunks: copy alone + evict_last", 0, 1, 0, 2, 160, 21, 4, 2, 1, 2, 0},
      {"c-chunks: readers alone, 128 x 160 k21 s4", 0, 0, 0, 2, 160, 21, 4, 2, 2, 2, 0},
      {"c-chunks: sequential + evict_last, 128 x 160 k21 s4", 0, 1, 0, 2, 160, 21, 4, 2, 0, 2, 0},
      {"c-chunks: overlapped + evict_last + discard, 128 x 296 k44 s3", 1, 1, 1, 1, 296, 44, 3, 2, 0, 2, 0},
      {"d-chunks: copy alone + evict_last", 0, 1, 0, 2, 160, 21, 4, 1, 1, 0, 1},
      {"d-chunks: copy alone + evict_last, 2 CTAs an SM", 0, 1, 0, 2, 160, 21, 4, 2, 1, 0, 1},
      {"d-chunks: copy alone + evict_last, 4 CTAs an SM", 0, 1, 0, 2, 160, 21, 4, 4, 1, 0, 1},
      {"d-chunks: readers alone, 128 x 160 k21 s3", 0, 0, 0, 2, 160, 21, 3, 1, 2, 0, 1},
      {"d-chunks: readers alone, 128 x 296 k44 s2", 0, 0, 0, 1, 296, 44, 2, 1, 2, 0, 1},
      {"d-chunks: sequential + evict_last, 2 copy CTAs, 128 x 160 k21 s3", 0, 1, 0, 2, 160, 21, 3, 2, 0, 0, 1},
      {"d-chunks: overlapped + evict_last, 2 copy CTAs, 128 x 160 k21 s3", 1, 1, 0, 2, 160, 21, 3, 2, 0, 0, 1},
      {"d-chunks: overlapped + evict_last + discard, 2 copiers, 128 x 296 k44 s2", 1, 1, 1, 1, 296, 44, 2, 2, 0, 0, 1},
      {"d-chunks: overlapped + evict_last + discard, 128 x 296 k44 s3", 1, 1, 1, 1, 296, 44, 3, 1, 0, 0, 1},
  };
  for (const Arm& arm : arms) {
    Args g{A, Ap, B, flags, flags + CHUNKS, sink, arm.copiers * sms, 3 * arm.nt * arm.splits, 3, arm.nt, arm.splits,
           128, arm.bn, arm.overlapped, arm.keep, arm.discard};
    const size_t smem = size_t(arm.stages) * (128 + arm.bn) * KT * 2;
    std::vector<float> ms;
    for (int rep = 0; rep < 12; ++rep) {
      CK(cudaMemsetAsync(flags, 0, 2 * CHUNKS * sizeof(int), s1));
      if (arm.only == 2) CK(cudaMemsetAsync(Ap, 0x5a, ap_bytes, s1));   // readers alone: A' as if copied
      else CK(cudaMemsetAsync(Ap, 0xff, ap_bytes, s1));                 // poisoned: the copy must write every element
      CK(cudaMemsetAsync(flush, rep, flush_bytes, s1));                 // evicts A' and the last run's lines
      CK(cudaEventRecord(e0, s1));
      CK(cudaStreamWaitEvent(s2, e0));
      // Overlapped: the readers first, one an SM (their shared memory), then the copiers beside them on another
      // stream; copiers and readers wait on each other, so all must be resident (copiers first could fill SMs).
      auto copy = [&](cudaStream_t st) {
        if (arm.d) copy_d_kernel<<<g.copiers, THREADS, 0, st>>>(g);
        else if (arm.tpi == 4) copy_kernel<4><<<g.copiers, THREADS, 0, st>>>(g);
        else copy_kernel<2><<<g.copiers, THREADS, 0, st>>>(g);
      };
      if (arm.only != 2 && !arm.overlapped) copy(s1);
      if (arm.only != 1) {
        if (arm.d && arm.stages == 2) read_d_kernel<2><<<g.readers, THREADS, smem, s1>>>(g);
        else if (arm.d && arm.stages == 3) read_d_kernel<3><<<g.readers, THREADS, smem, s1>>>(g);
        else if (arm.d) read_d_kernel<4><<<g.readers, THREADS, smem, s1>>>(g);
        else if (arm.stages == 2) read_kernel<2><<<g.readers, THREADS, smem, s1>>>(g);
        else if (arm.stages == 3) read_kernel<3><<<g.readers, THREADS, smem, s1>>>(g);
        else read_kernel<4><<<g.readers, THREADS, smem, s1>>>(g);
      }
      if (arm.overlapped) copy(s2);
      CK(cudaEventRecord(e2, s2));
      CK(cudaStreamWaitEvent(s1, e2));
      CK(cudaEventRecord(e1, s1));
      CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
      float t; CK(cudaEventElapsedTime(&t, e0, e1));
      if (rep >= 2) ms.push_back(t * 1000);
    }
    if (!arm.discard && arm.only != 2) {   // the copy's result, checked on a sample (discarded lines read back stale)
      std::vector<uint16_t> ha(a_bytes / 2), hp(ap_bytes / 2);
      CK(cudaMemcpy(ha.data(), A, a_bytes, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hp.data(), Ap, ap_bytes, cudaMemcpyDeviceToHost));
      long long bad = 0;
      const long long pitch = arm.d ? P : E;   // A' c stride
      for (long long i = 0; i < (long long)ha.size(); i += 97) {
        const long long c = i % E, a = (i / E) % E, d = i / K;
        bad += hp[d + pitch * (c + E * a)] != ha[i];
      }
      if (bad) { printf("%s: copy wrong at %lld samples\n", arm.name, bad); return 1; }
    }
    std::sort(ms.begin(), ms.end());
    printf("%-64s median %7.1f us  (min %7.1f, max %7.1f)\n", arm.name, ms[ms.size() / 2], ms.front(), ms.back());
  }
  return 0;
}
