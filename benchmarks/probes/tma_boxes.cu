// Data movement only: how fast the TMA feeds the operand boxes of TCCG #13/#14 (f16, H100). One thread issues
// each stage's boxes, a consumer warpgroup releases the stage unread; L2 is evicted (a 256 MB read) before each
// launch; median of 20. Modes: 0, #14 (ab-cad-dcb) without staging, K blocks of c:LC x d:LD read by each operand in
// its own order (A box (LC, MT, LD), B box (LD, LC, NT): rows of 16-64 bytes); 1, #14's staged kernel's boxes
// (A' and B both d fastest: 128-byte rows); 2, #13 (ab-acd-dbc) as its wide kernel loads it (MT x NT, K runs of d;
//   A in boxes of 64 a, B in boxes of NT columns up to 256, else 148); 3, as 2 but A in one unswizzled box of MT
//   a (any multiple of 8 up to 256: 104-row tiles read 104 rows, where 64-a boxes would read 128); 4, as 2 but a
//   last box of MT % 64 a (a second map, 128-byte swizzle), e.g. 104 = 64 + 40.
//   ./tma_boxes layout: where a (40 a x 8 rows) box with 128-byte swizzle puts each element in shared memory.
// Session 39 (benchmarks/NOTES.md): mode 0 ran 170-290 us against mode 1's 62-67.
//   nvcc -O3 -arch=sm_90a -std=c++17 -o tma_boxes benchmarks/probes/tma_boxes.cu
//   ./tma_boxes MODE LC LD MT NT STAGES SPLITS C_INNER L2PROMO [MODE ...]   (PAD_KB=n: more shared memory)
//   e.g. ./tma_boxes 1 0 0 128 160 5 21 0 128  0 8 16 128 160 3 21 1 128  2 0 0 128 296 4 22 0 128
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <string>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

struct Cfg {
  int mode;            // 0: fused (A box (LC, MT, LD), B box (LD, LC, NT)); 1: staged pattern (both (64 d, 1 c, rows))
  int lc, ld, mt, nt, stages, splits;
  int c_inner;         // K blocks: c-blocks fastest (1) or d-blocks fastest (0)
};

__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* b, int n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n));
}
__device__ __forceinline__ void mbar_expect(unsigned long long* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* b, int parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(sa(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma3(void* dst, const CUtensorMap* m, int x, int y, int z, unsigned long long* b) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(
          sa(dst)),
      "l"(m), "r"(sa(b)), "r"(x), "r"(y), "r"(z)
      : "memory");
}

// #13's B tile as boxes of at most 256 rows: 296 columns as two of 148
__host__ __device__ inline int b_box_rows(int nt) { return nt <= 256 ? nt : 148; }

__global__ void __launch_bounds__(256) probe(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,
                                             const __grid_constant__ CUtensorMap ma_tail, Cfg cfg, int* sink) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ unsigned long long full[8], empty[8];
  const int a_bytes = cfg.mode == 0 ? cfg.lc * cfg.mt * cfg.ld * 2 : 64 * cfg.mt * 2;
  const int b_bytes = cfg.mode == 0 ? cfg.lc * cfg.nt * cfg.ld * 2 : 64 * cfg.nt * 2;
  const int stage_bytes = (a_bytes + b_bytes + 2048 + 1023) / 1024 * 1024;
  const int tiles_m = (312 + cfg.mt - 1) / cfg.mt, tiles_n = (296 + cfg.nt - 1) / cfg.nt;
  const int tile = blockIdx.x % (tiles_m * tiles_n), split = blockIdx.x / (tiles_m * tiles_n);
  const int m0 = tile % tiles_m * cfg.mt, n0 = tile / tiles_m * cfg.nt;
  // K blocks: fused: (312/lc) x ceil(312/ld); staged: 312 c x 5 d-tiles of 64
  const int nc = cfg.mode == 0 ? 312 / cfg.lc : cfg.mode >= 2 ? 296 : 312, nd = cfg.mode == 0 ? (312 + cfg.ld - 1) / cfg.ld : 5;
  const int kblocks = nc * nd;
  const int k_lo = (long long)kblocks * split / cfg.splits, k_hi = (long long)kblocks * (split + 1) / cfg.splits;
  if (threadIdx.x == 0) {
    for (int s = 0; s < cfg.stages; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], 1); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  int acc = 0;
  if (threadIdx.x < 128) {   // producer: one thread
    if (threadIdx.x == 0) {
      for (int k = k_lo, t = 0; k < k_hi; ++k, ++t) {
        const int s = t % cfg.stages;
        if (t >= cfg.stages) mbar_wait(&empty[s], ((t / cfg.stages) - 1) & 1);
        int cb, db;
        if (cfg.c_inner) { cb = k % nc; db = k / nc; } else { db = k % nd; cb = k / nd; }
        unsigned char* st = smem + s * stage_bytes;
        mbar_expect(&full[s], a_bytes + b_bytes);
        if (cfg.mode == 0) {
          tma3(st, &ma, cb * cfg.lc, m0, db * cfg.ld, &full[s]);
          tma3(st + a_bytes, &mb, db * cfg.ld, cb * cfg.lc, n0, &full[s]);
        } else if (cfg.mode == 1) {
          tma3(st, &ma, db * 64, cb, m0, &full[s]);
          tma3(st + a_bytes, &mb, db * 64, cb, n0, &full[s]);
        } else {   // #13: A (a, c, d) boxes (64 a, 1, 64 d) or one (MT a, 1, 64 d); B (d, b, c) boxes (64 d, 148 b, 1)
          if (cfg.mode == 3) {
            tma3(st, &ma, m0, cb, db * 64, &full[s]);
          } else {
            for (int j = 0; j < cfg.mt / 64; ++j) tma3(st + j * 8192, &ma, m0 + 64 * j, cb, db * 64, &full[s]);
            if (cfg.mode == 4) tma3(st + cfg.mt / 64 * 8192, &ma_tail, m0 + cfg.mt / 64 * 64, cb, db * 64, &full[s]);
          }
          const int nb = b_box_rows(cfg.nt);
          for (int j = 0; j < cfg.nt / nb; ++j) tma3(st + a_bytes + j * ((nb + 7) / 8 * 1024), &mb, db * 64, n0 + nb * j, cb, &full[s]);
        }
      }
    }
  } else {   // consumers: one warpgroup
    for (int k = k_lo, t = 0; k < k_hi; ++k, ++t) {
      const int s = t % cfg.stages;
      mbar_wait(&full[s], (t / cfg.stages) & 1);
      acc += smem[s * stage_bytes + (threadIdx.x - 128) * 16];
      asm volatile("bar.sync 1, 128;" ::: "memory");
      if (threadIdx.x == 128) mbar_arrive(&empty[s]);
    }
  }
  if (acc == 0x7fffffff) sink[0] = acc;
}

// One (40 x 8) box of a 64 x 8 matrix holding 0, 1, 2, ... into a 1 KB swizzle atom filled with 0xffff first.
__global__ void layout_probe(const __grid_constant__ CUtensorMap m, unsigned short* out) {
  __shared__ __align__(1024) unsigned short tile[512];
  __shared__ unsigned long long bar;
  for (int i = threadIdx.x; i < 512; i += blockDim.x) tile[i] = 0xffff;
  if (threadIdx.x == 0) { mbar_init(&bar, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_expect(&bar, 40 * 8 * 2);
    tma3(tile, &m, 8, 0, 0, &bar);
  }
  mbar_wait(&bar, 0);
  for (int i = threadIdx.x; i < 512; i += blockDim.x) out[i] = tile[i];
}

typedef CUresult (*EncodeFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                             const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                             CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeFn encode_fn() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  return (EncodeFn)f;
}
static CUtensorMap make_map(void* p, cuuint64_t d0, cuuint64_t d1, cuuint64_t d2, cuuint64_t s1, cuuint64_t s2, cuuint32_t b0,
                            cuuint32_t b1, cuuint32_t b2, int l2promo, int swizzle = -1) {
  CUtensorMap m;
  cuuint64_t dims[3] = {d0, d1, d2}, strides[2] = {s1, s2};
  cuuint32_t box[3] = {b0, b1, b2}, es[3] = {1, 1, 1};
  CUtensorMapSwizzle sw = swizzle >= 0 ? (CUtensorMapSwizzle)swizzle
                        : b0 * 2 == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                        : b0 * 2 == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                        : b0 * 2 == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
  CUresult r = encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, p, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                           l2promo == 0 ? CU_TENSOR_MAP_L2_PROMOTION_NONE
                           : l2promo == 64 ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                           : l2promo == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("encode failed %d (box %u %u %u)\n", r, b0, b1, b2); exit(1); }
  return m;
}

__global__ void flush_l2(const int4* p, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x12345678) sink[0] = acc;
}
__global__ void fill(unsigned short* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = 0x3c00 + (unsigned short)(i * 2654435761u >> 22 & 0xff);
}

int main(int argc, char** argv) {
  const size_t na = 312ull * 312 * 312, nb = 312ull * 312 * 296;
  unsigned short *A, *B;
  int* sink;
  CK(cudaMalloc(&A, na * 2));
  CK(cudaMalloc(&B, nb * 2));
  CK(cudaMalloc(&sink, 4));
  unsigned char* flush;
  CK(cudaMalloc(&flush, 256 << 20));
  CK(cudaMemset(flush, 1, 256 << 20));
  fill<<<1024, 256>>>(A, na);
  fill<<<1024, 256>>>(B, nb);
  int optin = 0;
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, probe));
  const int max_dyn = optin - (int)fa.sharedSizeBytes;
  printf("optin %d static %zu max dynamic %d\n", optin, fa.sharedSizeBytes, max_dyn);
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, max_dyn));
  if (argc == 2 && std::string(argv[1]) == "layout") {
    unsigned short* out;
    CK(cudaMalloc(&out, 1024));
    std::vector<unsigned short> h(64 * 8);
    for (int i = 0; i < 64 * 8; ++i) h[i] = i;
    CK(cudaMemcpy(A, h.data(), 1024, cudaMemcpyHostToDevice));
    CUtensorMap m = make_map(A, 64, 8, 1, 128, 1024, 40, 8, 1, 0, CU_TENSOR_MAP_SWIZZLE_128B);
    layout_probe<<<1, 128>>>(m, out);
    CK(cudaMemcpy(h.data(), out, 1024, cudaMemcpyDeviceToHost));
    printf("box (40 a from a = 8, 8 rows), 128-byte swizzle; shared memory as 8 rows of 8 16-byte chunks, each chunk's first"
           " element (row * 64 + a in global), -1 unwritten:\n");
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 8; ++c) printf(" %5d", h[r * 64 + c * 8] == 0xffff ? -1 : (int)h[r * 64 + c * 8]);
      printf("\n");
    }
    return 0;
  }
  // argv: mode lc ld mt nt stages splits c_inner l2promo
  if (argc < 10 || (argc - 1) % 9 != 0) {
    printf("usage: mode lc ld mt nt stages splits c_inner l2promo [...]\n");
    return 1;
  }
  for (int i = 1; i + 8 < argc; i += 9) {
    Cfg c{atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2]), atoi(argv[i + 3]), atoi(argv[i + 4]), atoi(argv[i + 5]),
          atoi(argv[i + 6]), atoi(argv[i + 7])};
    const int promo = atoi(argv[i + 8]);
    CUtensorMap ma, mb, ma_tail;
    if (c.mode == 0) {   // A (c, a, d), B (d, c, b)
      ma = make_map(A, 312, 312, 312, 624, 624ull * 312, c.lc, c.mt, c.ld, promo);
      mb = make_map(B, 312, 312, 296, 624, 624ull * 312, c.ld, c.lc, c.nt, promo);
    } else if (c.mode >= 2) {   // #13: A (a, c, d), B (d, b, c)
      ma = make_map(A, 312, 296, 312, 624, 624ull * 296, c.mode == 3 ? c.mt : 64, 1, 64, promo);
      if (c.mode == 4)
        ma_tail = make_map(A, 312, 296, 312, 624, 624ull * 296, c.mt % 64, 1, 64, promo, CU_TENSOR_MAP_SWIZZLE_128B);
      mb = make_map(B, 312, 296, 296, 624, 624ull * 296, 64, b_box_rows(c.nt), 1, promo);
    } else {             // A' (d, c, a), B (d, c, b)
      ma = make_map(A, 312, 312, 312, 624, 624ull * 312, 64, 1, c.mt, promo);
      mb = make_map(B, 312, 312, 296, 624, 624ull * 312, 64, 1, c.nt, promo);
    }
    const int a_bytes = c.mode == 0 ? c.lc * c.mt * c.ld * 2 : 64 * c.mt * 2;
    const int b_bytes = c.mode == 0 ? c.lc * c.nt * c.ld * 2 : 64 * c.nt * 2;
    const int stage_bytes = (a_bytes + b_bytes + 2048 + 1023) / 1024 * 1024;
    const int smem = stage_bytes * c.stages + 1024 + (getenv("PAD_KB") ? atoi(getenv("PAD_KB")) * 1024 : 0);
    if (smem > max_dyn) { printf("too much smem %d\n", smem); continue; }
    const int ctas = ((312 + c.mt - 1) / c.mt) * ((296 + c.nt - 1) / c.nt) * c.splits;
    std::vector<float> ts;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < 25; ++r) {
      flush_l2<<<1024, 256>>>((const int4*)flush, (256 << 20) / 16, sink);   // evict A and B (reads: no write-backs)
      cudaEventRecord(e0);
      probe<<<ctas, 256, smem>>>(ma, mb, c.mode == 4 ? ma_tail : ma, c, sink);
      cudaEventRecord(e1);
      CK(cudaEventSynchronize(e1));
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (r >= 5) ts.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    const double us = ts[ts.size() / 2] * 1000;
    const double unique = c.mode >= 2 ? 2.0 * (312.0 * 296 * 312 + 312.0 * 296 * 296) / 1e6 : (na + nb) * 2 / 1e6;   // MB
    printf("mode %d lc %d ld %d mt %d nt %d stages %d splits %d c_inner %d promo %d ctas %d smem %d: %.1f us (min %.1f) "
           "= %.2f TB/s of A+B\n",
           c.mode, c.lc, c.ld, c.mt, c.nt, c.stages, c.splits, c.c_inner, promo, ctas, smem, us, ts[0] * 1000,
           unique / us);
  }
  return 0;
}
