// Data movement primitives (sm_80+): global loads, asynchronous global->shared copies and ldmatrix.
#pragma once

namespace gett {

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Copy the first src_bytes (0 to BYTES) of BYTES (4, 8 or 16) from global to shared memory without
// staging in registers; the rest of the destination is zero-filled (a vector clipped at an operand's end).
template <int BYTES>
__device__ __forceinline__ void cp_async_clipped(void* smem, const void* gmem, int src_bytes) {
  const unsigned dst = smem_address(smem);
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(BYTES),
                 "r"(src_bytes));
  }
}

// Copy BYTES (4, 8 or 16) from global to shared memory without staging in registers; when !valid
// nothing is read and the destination is zero-filled (src-size 0). An L2 miss fetches the whole 128-byte
// line (.L2::128B), which neighbouring loads then find: H100, runner A/B (session 36), f16 #1, #2, #5 and
// #19 4-5% faster, #17/#18 2%, f32 #1-#4 2-5%; 256 bytes cost #9 12% and #19 15%.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, bool valid) {
  cp_async_clipped<BYTES>(smem, gmem, valid ? BYTES : 0);
}

// A global load of one 16-byte vector whose L2 miss fetches the whole 128-byte line, as cp_async's does:
// the staging copies' neighbouring vectors then find it (H100, session 36: #14 -0.8%, #17 -1.2%).
template <class V>
__device__ __forceinline__ V load_global(const V* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  if constexpr (sizeof(V) == 16) {
    uint4 x;
    asm volatile("ld.global.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w)
                 : "l"(gmem));
    V out;
    memcpy(&out, &x, sizeof(V));
    return out;
  }
#endif
  return *gmem;
}

// Stores one vector with an L2 evict_last policy (sm_80+; elsewhere a plain store): for data the next kernel
// reads, which the L2 should keep ahead of that kernel's streamed loads. Where the device sets L2 aside for
// persisting accesses, evict_last lines are persisting ones: they go there, and stay until other persisting
// lines (the next call's copy) replace them. H100, session 44, calls back to back, #14 (a 60 MB staged copy,
// then its contraction): 106.0 -> 101.5 us with 9.4 MiB set aside (some machines' default), 106.0 -> 104.6
// with none; the other staged TCCG plans (f16, f32, fused) and the kernels run after #14 even.
template <class V>
__device__ __forceinline__ void store_global_kept(V* gmem, const V& v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(V) == 16) {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
    uint4 x;
    memcpy(&x, &v, sizeof(V));
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;\n" ::"l"(gmem), "r"(x.x), "r"(x.y),
                 "r"(x.z), "r"(x.w), "l"(policy)
                 : "memory");
    return;
  }
#endif
  *gmem = v;
}

// Starts moving the line holding `gmem` into L2, for a later read to find it there.
__device__ __forceinline__ void prefetch_l2(const void* gmem) { asm volatile("prefetch.L2 [%0];\n" ::"l"(gmem)); }

// Drops the 128-byte line at `gmem` (128-byte aligned) from L2 without writing it back: for scratch data
// read for the last time, whose write-back would only take DRAM bandwidth from later work. Its contents
// become indeterminate.
__device__ __forceinline__ void discard_l2_line(const void* gmem) {
  asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING)); }

// Shared-memory writes of the generic proxy (st.shared, cp.async) made visible to the async proxy,
// through which wgmma reads its operands.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Four 8x8 matrices of 16-bit elements; lane i gives the row address of matrix i/8, row i%8.
template <bool TRANSPOSE>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  const unsigned a = smem_address(smem);
  if constexpr (TRANSPOSE) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  }
}

// The inverse of ldmatrix_x4 (sm_90): lane i gives the row address of matrix i/8, row i%8 (TRANSPOSE: that
// row receives the matrix's column i%8).
// (`address`: a shared-memory address, as smem_address gives.)
template <bool TRANSPOSE = false>
__device__ __forceinline__ void stmatrix_x4(unsigned address, const unsigned (&r)[4]) {
  if constexpr (TRANSPOSE) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(address),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(address),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
  }
}
template <bool TRANSPOSE = false>
__device__ __forceinline__ void stmatrix_x4(void* smem, const unsigned (&r)[4]) {
  stmatrix_x4<TRANSPOSE>(smem_address(smem), r);
}

}  // namespace gett
