// Does data a kernel has just written stay in L2 for the next kernel to read? A "copy" reads X MB of src
// and writes X MB of dst (optionally: reads evict_first, writes evict_last); then a "reader" reads dst
// (and, like a contraction's other operand, X MB of other data). Reader time after the copy against after
// an L2 flush. Session 39 (benchmarks/NOTES.md, results/l2_keep_session39.txt).
//   nvcc -O3 -arch=sm_90a -std=c++17 -o l2_keep benchmarks/probes/l2_keep.cu && ./l2_keep
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned long long policy(bool last) {
  unsigned long long p;
  if (last) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  else asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

__global__ void copyish(const int4* src, int4* dst, size_t n, int hints) {
  const unsigned long long first = policy(false), last = policy(true);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    int4 v;
    if (hints) asm volatile("ld.global.L2::cache_hint.v4.s32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src + i), "l"(first));
    else v = src[i];
    v.x += 1;
    if (hints) asm volatile("st.global.L2::cache_hint.v4.s32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(dst + i), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(last) : "memory");
    else dst[i] = v;
  }
}

__global__ void reader(const int4* a, const int4* b, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    int4 v = a[i];
    acc ^= v.x ^ v.w;
    if (b) { int4 w = b[i]; acc ^= w.y; }
  }
  if (acc == 0x12345678) sink[0] = acc;
}

__global__ void flush_l2(const int4* p, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x12345678) sink[0] = acc;
}

int main() {
  const size_t big = 256ull << 20;
  int4 *src, *dst, *other, *flush;
  int* sink;
  CK(cudaMalloc(&src, 64ull << 20));
  CK(cudaMalloc(&dst, 64ull << 20));
  CK(cudaMalloc(&other, 64ull << 20));
  CK(cudaMalloc(&flush, big));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(src, 1, 64ull << 20));
  CK(cudaMemset(other, 2, 64ull << 20));
  CK(cudaMemset(flush, 3, big));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int grid = 132 * 8, block = 256;
  for (int mb : {4, 8, 12, 16, 24, 32}) {
    const size_t n = ((size_t)mb << 20) / 16;
    for (int with_other = 0; with_other < 2; ++with_other) {
      for (int mode = 0; mode < 3; ++mode) {   // 0: cold (flush, then read), 1: after copy, 2: after copy with hints
        std::vector<float> ts;
        for (int r = 0; r < 15; ++r) {
          flush_l2<<<grid, block>>>(flush, big / 16, sink);
          if (mode > 0) copyish<<<grid, block>>>(src, dst, n, mode == 2);
          cudaEventRecord(e0);
          reader<<<grid, block>>>(dst, with_other ? other : nullptr, n, sink);
          cudaEventRecord(e1);
          CK(cudaEventSynchronize(e1));
          float ms;
          cudaEventElapsedTime(&ms, e0, e1);
          if (r >= 3) ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        const double us = ts[ts.size() / 2] * 1000;
        printf("%2d MB %s %-22s reader %6.1f us = %.2f TB/s\n", mb, with_other ? "+other" : "      ",
               mode == 0 ? "cold" : mode == 1 ? "after copy" : "after copy (hints)", us, mb * (with_other ? 2 : 1) * 1.048576 / us);
      }
    }
  }
  CK(cudaGetLastError());
  return 0;
}
