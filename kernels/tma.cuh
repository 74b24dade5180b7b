// The Tensor Memory Accelerator (sm_90): one thread copies a whole box of a 2-D tensor from global to
// shared memory, landing in the 128-byte-swizzled layout wgmma reads, and the copy's bytes complete
// an mbarrier's phase. The tensor map (shape, strides, box, swizzle) is encoded on the host
// (gett/tensor_map.py) and passed as a __grid_constant__ kernel parameter.
#pragma once
#include "copy.cuh"

namespace gett {

// A CUtensorMap: 128 opaque bytes, 64-byte aligned (cuda.h's type, which NVRTC does not see).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// The arrival that opens a phase of `bar` expecting `bytes` more from bulk copies (init count 1).
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// The box of `map` at element coordinates (x inner, y outer) into `smem` (1024-byte aligned for the
// 128-byte swizzle); out-of-range elements land as zeros, and count toward the bytes like the rest.
__device__ __forceinline__ void tma_load_2d(void* smem, const TensorMap* map, int x, int y, unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(smem_address(smem)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
      "r"(smem_address(bar))
      : "memory");
}

// One stage of an operand tile of ROWS x BK 16-bit elements: K-major tiles are one box of BK x ROWS
// (K innermost, one 128-byte line a row); MN-major tiles are ROWS / 64 boxes of 64 rows x BK, each
// BK lines of 128 bytes (the layout of loader.cuh's swizzled tiles).
template <class T, int ROWS, int BK, bool ROW_CONTIG>
__device__ __forceinline__ void tma_load_tile(T* stage, const TensorMap* map, int row0, int k0,
                                              unsigned long long* bar) {
  static_assert(sizeof(T) == 2 && BK == 64, "TMA tiles: 16-bit elements, K tiles of one 128-byte line");
  if constexpr (ROW_CONTIG) {
#pragma unroll
    for (int j = 0; j < ROWS / 64; ++j) tma_load_2d(stage + j * 64 * BK, map, row0 + 64 * j, k0, bar);
  } else {
    tma_load_2d(stage, map, k0, row0, bar);
  }
}

}  // namespace gett
