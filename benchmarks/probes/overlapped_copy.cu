// #14 (ab-cad-dcb, f16) as data movement only: can its staging copy (A (c, a, d) -> A' (d, c, a), B's K order)
// and the contraction's loads run at once, the contraction reading each chunk of A' from L2 while the copy
// writes the next? No MMAs: "readers" load the K tiles of A' and B that a split-K producer of 128 x 160 (or
// 128 x 296) tiles would, by cp.async into 2-4 shared stages, and drop them. Arms:
//   copy alone, readers alone, sequential (the copy, then the readers: today's plan without the math);
//   overlapped: the readers, then the copiers beside them on another stream; a chunk's readers wait on a flag
//     for it, the copy stays at most two chunks ahead of the readers;
//   + evict_last on the copy's stores; + discard: a reader drops each A' line from L2 once it has landed (one
//     reader a line: 128 x 296 tiles), so that A' need not be written back.
// Three chunkings: c-chunks (c-blocks of 64 in K order; the copy reads A in 128-byte pieces of its c-runs),
// d-chunks (d-block j of every c: the copy reads whole c-runs, A' gets c's stride padded to 320) and m-chunks
// (M tile j: the whole-run copy in production's order; a reader waits only for its own M tile's rows).
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
constexpr int CB = 64, DB = 64;                   // c-chunks' c-blocks; d-blocks of both
constexpr int D_BLOCKS = (E + DB - 1) / DB;       // 5
constexpr int MAX_CHUNKS = 5;                     // of either chunking (flags)
constexpr int THREADS = 256;

struct Args {
  const uint4* A; uint4* Ap; const uint4* B;      // A, A' and B as 16-byte vectors
  int* ready; int* done;                          // per chunk: copy tiles written, readers finished
  int copiers, readers, nt, splits, bm, bn;       // grid roles and the readers' tiling (3 M tiles)
  int overlapped, keep, discard;
};

constexpr int P = 320;                            // d-chunks: A' (d, c, a) with c's stride padded to 5 lines
constexpr int KPV = E * P / 8;                    // a padded A' row in 16-byte vectors
constexpr int KV = int(K / 8);                    // a row of B (or dense A') in 16-byte vectors

// Chunk j is c-block j of every d, K tiles in K order (64 consecutive k = d + 312 c); A' dense.
struct CChunks {
  static constexpr int CHUNKS = (E + CB - 1) / CB, CW = CB, PITCH = E, PACED = 1;
  __device__ static int a0(int) { return 0; }
  __device__ static int a_count(int) { return E; }
  __device__ static bool owns(int, int) { return true; }
  __device__ static int c0(int j) { return j * CB; }
  __device__ static int cw(int j) { return min(E - j * CB, CB); }
  __device__ static int d_block0(int) { return 0; }
  __device__ static int d_blocks(int) { return D_BLOCKS; }
  __device__ static int k_tiles(int j) { return cw(j) * E / KT; }
  __device__ static int parts(int) { return 8; }
  __device__ static const uint4* vector(const Args& g, int j, int t, bool a, int row, int part) {
    return (a ? g.Ap : g.B) + row * KV + (j * (CB * E / KT) + t) * (KT / 8) + part;
  }
};

// Chunk j is d-block j of every c (K tile t: 64 d at c = t, as a TMA view of K's two modes loads it): the copy
// reads A's whole 624-byte c-runs (its planes of one d are contiguous) and writes A' with c's stride padded to
// 320, each piece one whole 128-byte line; B's pieces are not aligned.
struct DChunks {
  static constexpr int CHUNKS = D_BLOCKS, CW = E, PITCH = P, PACED = 1;
  __device__ static int a0(int) { return 0; }
  __device__ static int a_count(int) { return E; }
  __device__ static bool owns(int, int) { return true; }
  __device__ static int c0(int) { return 0; }
  __device__ static int cw(int) { return E; }
  __device__ static int d_block0(int j) { return j; }
  __device__ static int d_blocks(int) { return 1; }
  __device__ static int k_tiles(int) { return E; }
  __device__ static int parts(int j) { return j * DB + DB <= E ? 8 : (E - j * DB) / 8; }   // 56 d: 7 vectors
  __device__ static const uint4* vector(const Args& g, int j, int t, bool a, int row, int part) {
    return a ? g.Ap + row * KPV + (P * t + DB * j) / 8 + part : g.B + row * KV + (E * t + DB * j) / 8 + part;
  }
};

// Chunk j is M tile j (a in [128 j, 128 j + 128)), copied in whole c-runs and in production's order (a slowest);
// a reader reads only its own M tile's chunk, all of K, so the first M tile's readers start after 41% of the copy.
struct MChunks {
  static constexpr int CHUNKS = (E + 127) / 128, CW = E, PITCH = E, PACED = 0;
  __device__ static int a0(int j) { return 128 * j; }
  __device__ static int a_count(int j) { return min(128, E - 128 * j); }
  __device__ static bool owns(int j, int m) { return j == m; }
  __device__ static int c0(int) { return 0; }
  __device__ static int cw(int) { return E; }
  __device__ static int d_block0(int) { return 0; }
  __device__ static int d_blocks(int) { return D_BLOCKS; }
  __device__ static int k_tiles(int) { return int(K / KT); }
  __device__ static int parts(int) { return 8; }
  __device__ static const uint4* vector(const Args& g, int, int t, bool a, int row, int part) {
    return (a ? g.Ap : g.B) + row * KV + t * (KT / 8) + part;
  }
};

__device__ __forceinline__ void wait_at_least(const int* flag, int value) {   // the whole CTA waits
  if (threadIdx.x == 0) {
    int v;
    do { asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(flag)); } while (v < value);
  }
  __syncthreads();
}

__device__ __forceinline__ void count_done(int* flag, int n) {   // after the CTA's work on a chunk
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence(); atomicAdd(flag, n); }
}

__device__ __forceinline__ void store(uint4* p, uint4 v, bool keep, unsigned long long policy) {
  if (keep) asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;"
                         ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy) : "memory");
  else *p = v;
}

// A copier CTA moves items of TPI consecutive a: for each, the rows d of a d-block, cw contiguous c each,
// into shared memory, then rows c of dw contiguous d into A'.
template <class L, int TPI>
__device__ void copier(const Args& g, int q) {
  constexpr int ROW = DB * (L::CW / 8), LOADS = (TPI * ROW + THREADS - 1) / THREADS;
  __shared__ uint16_t s[TPI][DB][L::CW + 1];   // +1: a column spreads over the banks
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const uint16_t* A = reinterpret_cast<const uint16_t*>(g.A);
  uint16_t* Ap = reinterpret_cast<uint16_t*>(g.Ap);
  for (int j = 0; j < L::CHUNKS; ++j) {
    if (L::PACED && g.overlapped && j >= 2) wait_at_least(g.done + j - 2, g.readers);   // two chunks unread at most
    const int c0 = L::c0(j), cw = L::cw(j), cv = cw / 8, groups = L::a_count(j) / TPI;
    for (int item = q; item < groups * L::d_blocks(j); item += g.copiers) {
      const int a0 = L::a0(j) + item % groups * TPI, d0 = (L::d_block0(j) + item / groups) * DB, dw = min(E - d0, DB);
      uint4 r[LOADS];
#pragma unroll
      for (int i = 0; i < LOADS; ++i) {
        const int v = threadIdx.x + i * THREADS, u = v / ROW, dd = v % ROW / cv, cc = v % ROW % cv * 8;
        if (u < TPI && dd < dw)
          asm volatile("ld.global.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r[i].x), "=r"(r[i].y), "=r"(r[i].z), "=r"(r[i].w)
                       : "l"(A + c0 + cc + (long long)E * (a0 + u + (long long)E * (d0 + dd))));
      }
#pragma unroll
      for (int i = 0; i < LOADS; ++i) {
        const int v = threadIdx.x + i * THREADS, u = v / ROW, dd = v % ROW / cv, cc = v % ROW % cv * 8;
        if (u < TPI && dd < dw) {
          union { uint4 v; uint16_t e[8]; } x{r[i]};
          for (int k = 0; k < 8; ++k) s[u][dd][cc + k] = x.e[k];
        }
      }
      __syncthreads();
      const int dv = dw / 8;
      for (int v = threadIdx.x; v < TPI * cw * dv; v += THREADS) {
        const int u = v / (cw * dv), cc = v / dv % cw, dd = v % dv * 8;
        union { uint4 v; uint16_t e[8]; } w;
        for (int i = 0; i < 8; ++i) w.e[i] = s[u][dd + i][cc];
        store(reinterpret_cast<uint4*>(Ap + d0 + dd + (long long)L::PITCH * (c0 + cc + (long long)E * (a0 + u))), w.v,
              g.keep, policy);
      }
      if (g.overlapped) count_done(g.ready + j, TPI);
      __syncthreads();
    }
  }
}

// A reader CTA (split s of M tile m, N tile n) loads its K tiles of each chunk by cp.async into STAGES shared
// buffers, as a producer with that many stages in flight would, and drops each A' line from L2 once its stage
// has landed (discard); a line's 8 vectors come through 8 consecutive lanes of one warp.
template <class L, int STAGES>
__device__ void reader(const Args& g, int r, uint4* smem) {
  const int s = r % g.splits, n = (r / g.splits) % g.nt, m = r / (g.splits * g.nt);
  const int m0 = m * g.bm, rows_m = min(E - m0, g.bm), n0 = n * g.bn, rows_n = min(NB - n0, g.bn);
  const int rows = rows_m + rows_n, part = threadIdx.x % 8;
  for (int j = 0; j < L::CHUNKS; ++j) {
    if (!L::owns(j, m)) continue;
    if (g.overlapped) wait_at_least(g.ready + j, L::a_count(j) * L::d_blocks(j));
    const int tiles = L::k_tiles(j), t0 = tiles * s / g.splits, t1 = tiles * (s + 1) / g.splits;
    for (int t = t0; t < t1 + STAGES - 1; ++t) {
      if (t < t1) {
        uint4* stage = smem + (t - t0) % STAGES * rows * 8;
        for (int v = threadIdx.x; v < rows * 8; v += THREADS) {
          if (part >= L::parts(j)) continue;
          const int rr = v / 8;
          const uint4* src = L::vector(g, j, t, rr < rows_m, rr < rows_m ? m0 + rr : n0 + rr - rows_m, part);
          const unsigned dst = unsigned(__cvta_generic_to_shared(stage + v));
          asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
        }
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
      asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");   // tile t - (STAGES - 1) landed
      const int landed = t - (STAGES - 1);
      if (g.discard && landed >= t0) {
        __syncwarp();
        for (int v = threadIdx.x; v < rows_m * 8; v += THREADS)
          if (part == 0)
            asm volatile("discard.global.L2 [%0], 128;" ::"l"(L::vector(g, j, landed, true, m0 + v / 8, 0)) : "memory");
      }
    }
    if (g.overlapped) count_done(g.done + j, 1);
  }
}

// At most 96 registers: two copier CTAs and a reader CTA must fit one SM's registers together (else a deadlock).
template <class L, int TPI>
__global__ void __maxnreg__(96) copy_kernel(Args g) { copier<L, TPI>(g, blockIdx.x); }

template <class L, int STAGES>
__global__ void __launch_bounds__(THREADS) read_kernel(Args g) {
  extern __shared__ uint4 smem[];
  reader<L, STAGES>(g, blockIdx.x, smem);
}

template <class L>
void read(int stages, const Args& g, size_t smem, cudaStream_t stream) {
  if (stages == 2) read_kernel<L, 2><<<g.readers, THREADS, smem, stream>>>(g);
  else if (stages == 3) read_kernel<L, 3><<<g.readers, THREADS, smem, stream>>>(g);
  else read_kernel<L, 4><<<g.readers, THREADS, smem, stream>>>(g);
}

// One shared-memory carveout for every kernel: an SM runs CTAs of kernels that ask for different ones only
// after draining, which left the copiers waiting for SMs the waiting readers held (a deadlock).
template <class F>
void one_carveout(F kernel, bool reader) {
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  if (reader) CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  const size_t a_bytes = (size_t)E * K * 2, b_bytes = (size_t)NB * K * 2, flush_bytes = 256u << 20;
  const size_t ap_bytes = (size_t)E * E * P * 2;   // room for the padded layout
  uint4 *A, *Ap, *B; char* flush; int* flags;
  CK(cudaMalloc(&A, a_bytes)); CK(cudaMalloc(&Ap, ap_bytes)); CK(cudaMalloc(&B, b_bytes));
  CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMalloc(&flags, 2 * MAX_CHUNKS * sizeof(int)));
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
  one_carveout(copy_kernel<CChunks, 2>, false);
  one_carveout(copy_kernel<CChunks, 4>, false);
  one_carveout(copy_kernel<DChunks, 1>, false);
  one_carveout(copy_kernel<MChunks, 1>, false);
  one_carveout(read_kernel<MChunks, 2>, true);
  one_carveout(read_kernel<MChunks, 3>, true);
  one_carveout(read_kernel<MChunks, 4>, true);
  one_carveout(read_kernel<CChunks, 2>, true);
  one_carveout(read_kernel<CChunks, 3>, true);
  one_carveout(read_kernel<CChunks, 4>, true);
  one_carveout(read_kernel<DChunks, 2>, true);
  one_carveout(read_kernel<DChunks, 3>, true);
  one_carveout(read_kernel<DChunks, 4>, true);
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, e2; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1)); CK(cudaEventCreate(&e2));

  // only: 1 the copy alone, 2 the readers alone; copiers: CTAs an SM; tpi: a copy item's a (c-chunks);
  // layout: 0 c-chunks, 1 d-chunks (A' padded), 2 m-chunks
  struct Arm { const char* name; int overlapped, keep, discard, nt, bn, splits, stages, copiers, only, tpi, layout; };
  const int sms = prop.multiProcessorCount;
  const Arm arms[] = {
      {"c-chunks: copy alone + evict_last", 0, 1, 0, 2, 160, 21, 4, 2, 1, 2, 0},
      {"c-chunks: readers alone, 128 x 160 k21 s4", 0, 0, 0, 2, 160, 21, 4, 2, 2, 2, 0},
      {"c-chunks: sequential + evict_last, 128 x 160 k21 s4", 0, 1, 0, 2, 160, 21, 4, 2, 0, 2, 0},
      {"c-chunks: overlapped + evict_last + discard, 128 x 296 k44 s3", 1, 1, 1, 1, 296, 44, 3, 2, 0, 2, 0},
      {"d-chunks: copy alone + evict_last", 0, 1, 0, 2, 160, 21, 4, 1, 1, 0, 1},
      {"d-chunks: copy alone + evict_last, 2 copiers an SM", 0, 1, 0, 2, 160, 21, 4, 2, 1, 0, 1},
      {"d-chunks: copy alone + evict_last, 4 copiers an SM", 0, 1, 0, 2, 160, 21, 4, 4, 1, 0, 1},
      {"d-chunks: readers alone, 128 x 160 k21 s3", 0, 0, 0, 2, 160, 21, 3, 1, 2, 0, 1},
      {"d-chunks: readers alone, 128 x 296 k44 s2", 0, 0, 0, 1, 296, 44, 2, 1, 2, 0, 1},
      {"d-chunks: sequential + evict_last, 2 copiers, 128 x 160 k21 s3", 0, 1, 0, 2, 160, 21, 3, 2, 0, 0, 1},
      {"d-chunks: overlapped + evict_last, 2 copiers, 128 x 160 k21 s3", 1, 1, 0, 2, 160, 21, 3, 2, 0, 0, 1},
      {"d-chunks: overlapped + evict_last + discard, 2 copiers, 128 x 296 k44 s2", 1, 1, 1, 1, 296, 44, 2, 2, 0, 0, 1},
      {"d-chunks: overlapped + evict_last + discard, 128 x 296 k44 s3", 1, 1, 1, 1, 296, 44, 3, 1, 0, 0, 1},
      {"m-chunks: copy alone + evict_last", 0, 1, 0, 2, 160, 21, 3, 1, 1, 0, 2},
      {"m-chunks: copy alone + evict_last, 2 copiers an SM", 0, 1, 0, 2, 160, 21, 3, 2, 1, 0, 2},
      {"m-chunks: readers alone, 128 x 160 k21 s3", 0, 0, 0, 2, 160, 21, 3, 2, 2, 0, 2},
      {"m-chunks: sequential + evict_last, 2 copiers, 128 x 160 k21 s3", 0, 1, 0, 2, 160, 21, 3, 2, 0, 0, 2},
      {"m-chunks: overlapped + evict_last, 2 copiers, 128 x 160 k21 s3", 1, 1, 0, 2, 160, 21, 3, 2, 0, 0, 2},
      {"m-chunks: overlapped + evict_last, 1 copier, 128 x 160 k21 s4", 1, 1, 0, 2, 160, 21, 4, 1, 0, 0, 2},
      {"m-chunks: overlapped + evict_last + discard, 2 copiers, 128 x 296 k44 s2", 1, 1, 1, 1, 296, 44, 2, 2, 0, 0, 2},
  };
  for (const Arm& arm : arms) {
    Args g{A, Ap, B, flags, flags + MAX_CHUNKS, arm.copiers * sms, 3 * arm.nt * arm.splits, arm.nt, arm.splits,
           128, arm.bn, arm.overlapped, arm.keep, arm.discard};
    const size_t smem = size_t(arm.stages) * (128 + arm.bn) * KT * 2;
    std::vector<float> ms;
    for (int rep = 0; rep < 12; ++rep) {
      CK(cudaMemsetAsync(flags, 0, 2 * MAX_CHUNKS * sizeof(int), s1));
      if (arm.only == 2) CK(cudaMemsetAsync(Ap, 0x5a, ap_bytes, s1));   // readers alone: A' as if copied
      else CK(cudaMemsetAsync(Ap, 0xff, ap_bytes, s1));                 // poisoned: the copy must write every element
      CK(cudaMemsetAsync(flush, rep, flush_bytes, s1));                 // evicts A' and the last run's lines
      CK(cudaEventRecord(e0, s1));
      CK(cudaStreamWaitEvent(s2, e0));
      auto copy = [&](cudaStream_t st) {
        if (arm.layout == 2) copy_kernel<MChunks, 1><<<g.copiers, THREADS, 0, st>>>(g);
        else if (arm.layout == 1) copy_kernel<DChunks, 1><<<g.copiers, THREADS, 0, st>>>(g);
        else if (arm.tpi == 4) copy_kernel<CChunks, 4><<<g.copiers, THREADS, 0, st>>>(g);
        else copy_kernel<CChunks, 2><<<g.copiers, THREADS, 0, st>>>(g);
      };
      // Overlapped: the readers first, one an SM (their shared memory), then the copiers beside them on another
      // stream; copiers and readers wait on each other, so all must be resident (copiers first could fill SMs).
      if (arm.only != 2 && !arm.overlapped) copy(s1);
      if (arm.only != 1) {
        if (arm.layout == 2) read<MChunks>(arm.stages, g, smem, s1);
        else if (arm.layout == 1) read<DChunks>(arm.stages, g, smem, s1);
        else read<CChunks>(arm.stages, g, smem, s1);
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
      const long long pitch = arm.layout == 1 ? P : E;   // A' c stride
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
