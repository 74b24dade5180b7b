// Tensor-core math with Hopper's warpgroup MMA (wgmma.mma_async, sm_90a), f16/bf16 data, f32
// accumulation. Warpgroup g (4 warps) owns rows [64g, 64g + 64) of the CTA tile and all BN columns (or,
// with SLABS, all rows of a tile that the warpgroups take in turn);
// both operands are read by the tensor cores straight from shared memory, through descriptors of the
// 128-byte-swizzled layout the loaders write (TileLoader with SWIZZLE128):
//   - K-major tile [rows][BK], BK * sizeof(T) == 128: line y = row, 8-line atoms of 1024 B;
//   - MN-major tile [rows / 64, rounded up][BK][64]: line y = (row / 64) * BK + k, atoms of 8 k-lines (the
//     instruction reads the last atom's first rows % 64 only).
// In both, 16-byte chunk c of line y sits at chunk c ^ (y % 8) (gett::swizzled_index).
// The accumulators of one warp follow the m16n8 C-fragment layout of mma.sync, one fragment per
// 8 columns, so WarpFragments' for_each walks them.
#pragma once
#include "copy.cuh"
#include "math_mma.cuh"
#include "types.cuh"

namespace gett {

// The wgmma operand lists, in blocks of 8 accumulators: register block b is %(8b)..%(8b + 7) and
// accumulator block b is d[8b]..d[8b + 7]. A width N takes the first N / 16 blocks (72: four and a
// half), then the two descriptors and the two transpose immediates; the scale-d predicate p is set by
// the caller's asm.
#define GETT_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define GETT_WGMMA_R1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define GETT_WGMMA_R2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define GETT_WGMMA_R3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define GETT_WGMMA_R4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define GETT_WGMMA_R5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define GETT_WGMMA_R6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define GETT_WGMMA_R7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define GETT_WGMMA_R8 "%64, %65, %66, %67, %68, %69, %70, %71"
#define GETT_WGMMA_R9 "%72, %73, %74, %75, %76, %77, %78, %79"
#define GETT_WGMMA_R10 "%80, %81, %82, %83, %84, %85, %86, %87"
#define GETT_WGMMA_R11 "%88, %89, %90, %91, %92, %93, %94, %95"
#define GETT_WGMMA_R12 "%96, %97, %98, %99, %100, %101, %102, %103"
#define GETT_WGMMA_R13 "%104, %105, %106, %107, %108, %109, %110, %111"
#define GETT_WGMMA_R14 "%112, %113, %114, %115, %116, %117, %118, %119"
#define GETT_WGMMA_R15 "%120, %121, %122, %123, %124, %125, %126, %127"
#define GETT_WGMMA_A0 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), \
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define GETT_WGMMA_A1 \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
  "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define GETT_WGMMA_A2 \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), \
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define GETT_WGMMA_A3 \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GETT_WGMMA_A4 \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define GETT_WGMMA_A5 \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define GETT_WGMMA_A6 \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), \
  "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define GETT_WGMMA_A7 \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
  "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define GETT_WGMMA_A8 \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), \
  "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define GETT_WGMMA_A9 \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), \
  "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define GETT_WGMMA_A10 \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), \
  "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define GETT_WGMMA_A11 \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), \
  "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define GETT_WGMMA_A12 \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), \
  "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
#define GETT_WGMMA_A13 \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), \
  "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define GETT_WGMMA_A14 \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), \
  "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
#define GETT_WGMMA_A15 \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), \
  "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define GETT_WGMMA_D64 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " \
  GETT_WGMMA_R3 "}, %32, %33, p, 1, 1, %34, %35;\n"
#define GETT_WGMMA_OPERANDS64 GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3
#define GETT_WGMMA_D72 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", %32, %33, %34, %35}, %36, %37, p, 1, 1, %38, %39;\n"
#define GETT_WGMMA_OPERANDS72 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define GETT_WGMMA_D80 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 "}, %40, %41, p, 1, 1, %42, %43;\n"
#define GETT_WGMMA_OPERANDS80 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4
#define GETT_WGMMA_D88 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", %40, %41, %42, %43}, %44, %45, p, 1, 1, %46, %47;\n"
#define GETT_WGMMA_OPERANDS88 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
#define GETT_WGMMA_D96 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 "}, %48, %49, p, 1, 1, %50, %51;\n"
#define GETT_WGMMA_OPERANDS96 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5
#define GETT_WGMMA_D112 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 "}, %56, %57, p, 1, 1, %58, %59;\n"
#define GETT_WGMMA_OPERANDS112 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, GETT_WGMMA_A6
#define GETT_WGMMA_D128 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 "}, %64, %65, p, 1, 1, %66, %67;\n"
#define GETT_WGMMA_OPERANDS128 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7
#define GETT_WGMMA_D160 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 ", " GETT_WGMMA_R8 ", " \
  GETT_WGMMA_R9 "}, %80, %81, p, 1, 1, %82, %83;\n"
#define GETT_WGMMA_OPERANDS160 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7, GETT_WGMMA_A8, GETT_WGMMA_A9
#define GETT_WGMMA_D192 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 ", " GETT_WGMMA_R8 ", " GETT_WGMMA_R9 ", " \
  GETT_WGMMA_R10 ", " GETT_WGMMA_R11 "}, %96, %97, p, 1, 1, %98, %99;\n"
#define GETT_WGMMA_OPERANDS192 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7, GETT_WGMMA_A8, GETT_WGMMA_A9, GETT_WGMMA_A10, GETT_WGMMA_A11
#define GETT_WGMMA_D216 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 ", " GETT_WGMMA_R8 ", " GETT_WGMMA_R9 ", " \
  GETT_WGMMA_R10 ", " GETT_WGMMA_R11 ", " GETT_WGMMA_R12 ", %104, %105, %106, %107}, %108, %109, p, 1, 1, %110, %111;\n"
#define GETT_WGMMA_OPERANDS216 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7, GETT_WGMMA_A8, GETT_WGMMA_A9, GETT_WGMMA_A10, GETT_WGMMA_A11, \
  GETT_WGMMA_A12, "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107])
#define GETT_WGMMA_D224 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 ", " GETT_WGMMA_R8 ", " GETT_WGMMA_R9 ", " \
  GETT_WGMMA_R10 ", " GETT_WGMMA_R11 ", " GETT_WGMMA_R12 ", " GETT_WGMMA_R13 "}, %112, %113, p, 1, 1, %114, %115;\n"
#define GETT_WGMMA_OPERANDS224 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7, GETT_WGMMA_A8, GETT_WGMMA_A9, GETT_WGMMA_A10, GETT_WGMMA_A11, \
  GETT_WGMMA_A12, GETT_WGMMA_A13
#define GETT_WGMMA_D240 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 ", " GETT_WGMMA_R8 ", " GETT_WGMMA_R9 ", " \
  GETT_WGMMA_R10 ", " GETT_WGMMA_R11 ", " GETT_WGMMA_R12 ", " GETT_WGMMA_R13 ", " GETT_WGMMA_R14 "}, %120, %121, p, 1, 1, %122, %123;\n"
#define GETT_WGMMA_OPERANDS240 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7, GETT_WGMMA_A8, GETT_WGMMA_A9, GETT_WGMMA_A10, GETT_WGMMA_A11, \
  GETT_WGMMA_A12, GETT_WGMMA_A13, GETT_WGMMA_A14
#define GETT_WGMMA_D256 \
  "{" GETT_WGMMA_R0 ", " GETT_WGMMA_R1 ", " GETT_WGMMA_R2 ", " GETT_WGMMA_R3 ", " GETT_WGMMA_R4 ", " \
  GETT_WGMMA_R5 ", " GETT_WGMMA_R6 ", " GETT_WGMMA_R7 ", " GETT_WGMMA_R8 ", " GETT_WGMMA_R9 ", " \
  GETT_WGMMA_R10 ", " GETT_WGMMA_R11 ", " GETT_WGMMA_R12 ", " GETT_WGMMA_R13 ", " GETT_WGMMA_R14 ", " \
  GETT_WGMMA_R15 "}, %128, %129, p, 1, 1, %130, %131;\n"
#define GETT_WGMMA_OPERANDS256 \
  GETT_WGMMA_A0, GETT_WGMMA_A1, GETT_WGMMA_A2, GETT_WGMMA_A3, GETT_WGMMA_A4, GETT_WGMMA_A5, \
  GETT_WGMMA_A6, GETT_WGMMA_A7, GETT_WGMMA_A8, GETT_WGMMA_A9, GETT_WGMMA_A10, GETT_WGMMA_A11, \
  GETT_WGMMA_A12, GETT_WGMMA_A13, GETT_WGMMA_A14, GETT_WGMMA_A15

template <class T> struct IsBf16 { static constexpr bool value = false; };
template <> struct IsBf16<__nv_bfloat16> { static constexpr bool value = true; };

#define GETT_WGMMA_INSTR(N, TYPE)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                           \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " GETT_WGMMA_D##N \
               "}\n"                                                                                \
               : GETT_WGMMA_OPERANDS##N                                                             \
               : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B))

// D[64 x N] += A[64 x 16] * B[16 x N] for one warpgroup; TRANS_A/TRANS_B say the operand is MN-major.
template <class T, int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[N / 2], unsigned long long desc_a, unsigned long long desc_b) {
  constexpr bool bf16 = IsBf16<T>::value;
  // one width's instruction for either 16-bit type (the asm string needs the width as a literal)
#define GETT_WGMMA_TYPED(W) \
  if constexpr (bf16) GETT_WGMMA_INSTR(W, "bf16"); else GETT_WGMMA_INSTR(W, "f16")
  if constexpr (N == 64) { GETT_WGMMA_TYPED(64); }
  else if constexpr (N == 72) { GETT_WGMMA_TYPED(72); }
  else if constexpr (N == 80) { GETT_WGMMA_TYPED(80); }
  else if constexpr (N == 88) { GETT_WGMMA_TYPED(88); }
  else if constexpr (N == 96) { GETT_WGMMA_TYPED(96); }
  else if constexpr (N == 112) { GETT_WGMMA_TYPED(112); }
  else if constexpr (N == 128) { GETT_WGMMA_TYPED(128); }
  else if constexpr (N == 160) { GETT_WGMMA_TYPED(160); }
  else if constexpr (N == 192) { GETT_WGMMA_TYPED(192); }
  else if constexpr (N == 216) { GETT_WGMMA_TYPED(216); }
  else if constexpr (N == 224) { GETT_WGMMA_TYPED(224); }
  else if constexpr (N == 240) { GETT_WGMMA_TYPED(240); }
  else {
    static_assert(N == 256, "wgmma tiles here are 64 x {64, 72, 80, 88, 96, 112, 128, 160, 192, 216, 224, 240, 256}");
    GETT_WGMMA_TYPED(256);
  }
#undef GETT_WGMMA_TYPED
}
#undef GETT_WGMMA_INSTR

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets
// (all in 16-byte units) and the layout type in bits 62-63 (1 = 128B swizzle).
__device__ __forceinline__ unsigned long long smem_descriptor(const void* p, unsigned lead_bytes, unsigned stride_bytes) {
  using u64 = unsigned long long;
  return u64((smem_address(p) & 0x3FFFF) >> 4) | (u64(lead_bytes >> 4) << 16) | (u64(stride_bytes >> 4) << 32) |
         (u64(1) << 62);
}

// SWAP: the warpgroups take their 64 rows from B's tile and multiply them by all of A's tile (the
// instruction's width is BM), accumulating D's transpose; for_each hands out (m, n) all the same. A
// short M (72) then costs no half-empty 128-row tile. PART: the widest instruction, the tile's width
// issued as parts of PART columns and the rest: ptxas fits each wgmma's accumulators in the registers
// a thread has at launch (128 at 512 threads), though setmaxnreg gives the math warpgroups more.
// SLABS: the 64-row slabs a warpgroup takes; 1 (warpgroup g takes rows [64g, 64g + 64)), or all of a
// tile's for warpgroups that take whole tiles in turn (Gett's PINGPONG), a warp holding 16 rows of each.
template <class T, class LoadA, class LoadB, int BM, int BN, int BK, bool SWAP = false, int PART = 256, int SLABS = 1>
struct WgmmaMath : WarpFragments<float, 16, 4, SWAP ? BM : BN, 16 * SLABS, SWAP ? BM : BN, (SLABS > 1 ? 64 : 16)> {
  static constexpr int WIDTH = SWAP ? BM : BN;   // the instruction's N
  using Base = WarpFragments<float, 16, 4, WIDTH, 16 * SLABS, WIDTH, (SLABS > 1 ? 64 : 16)>;
  using Base::acc;
  using LoadRows = Conditional<SWAP, LoadB, LoadA>;   // the operand whose 64-row slabs the warpgroups take
  using LoadCols = Conditional<SWAP, LoadA, LoadB>;
  // compute() only starts the MMAs (reading shared memory through the async proxy); wait() ends them
  static constexpr bool kAsyncMath = true;
  static constexpr int LINE = 128 / int(sizeof(T));   // elements per 128-byte line
  static_assert(sizeof(T) == 2 && (SWAP ? BN : BM) % 64 == 0 && BK % 16 == 0,
                "wgmma: 16-bit data, 64-row warpgroup tiles");
  static_assert(LoadA::kSwizzle128 && LoadB::kSwizzle128, "wgmma reads the 128-byte-swizzled layout");
  static_assert(LoadA::kRowContig || BK == LINE, "K-major tiles are one 128-byte line deep");
  static_assert(LoadB::kRowContig || BK == LINE, "K-major tiles are one 128-byte line deep");
  static_assert(SLABS == 1 || (!SWAP && SLABS * 64 == BM), "a warpgroup over a whole tile takes all of its rows");
  static constexpr int kSlabs = SLABS;

  // Byte offset of k step s (16 deep) inside a tile, and the descriptor's (leading, stride) offsets:
  // K-major moves 32 B along the line; MN-major moves 16 lines, atoms of 64 rows lie BK lines apart.
  template <class Load>
  __device__ __forceinline__ static unsigned long long descriptor(const T* tile, int s) {
    if constexpr (Load::kRowContig) return smem_descriptor(tile + s * 16 * LINE, BK * 128, 1024);
    else return smem_descriptor(tile + s * 16, 16, 1024);
  }

  __device__ __forceinline__ void compute(const T* sA, const T* sB, int) {
    constexpr int SLAB = 64 * (LoadRows::kRowContig ? BK : LINE);   // elements of a 64-row slab
    const int group = SLABS == 1 ? threadIdx.x / 128 : 0;           // this warpgroup's first slab
    const T* rows = (SWAP ? sB : sA) + group * SLAB;
    const T* cols = SWAP ? sA : sB;
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < BK / 16; ++s)
#pragma unroll
      for (int slab = 0; slab < SLABS; ++slab) multiply<0>(rows + slab * SLAB, cols, s, slab);
    wgmma_commit();
  }
  // k step s of one slab's rows by the columns from C0 on, PART at a time: a K-major tile's columns are its
  // lines, an MN-major one's 64-column atoms lie BK lines apart (PART a multiple of 64 keeps parts in whole atoms).
  static_assert(PART >= WIDTH || PART % 64 == 0 || !LoadCols::kRowContig,
                "an MN-major operand's instruction parts are whole 64-column atoms");
  template <int C0>
  __device__ __forceinline__ void multiply(const T* rows, const T* cols, int s, int slab) {
    constexpr int W = WIDTH - C0 < PART ? WIDTH - C0 : PART;
    constexpr int C0_OFFSET = LoadCols::kRowContig ? C0 / 64 * BK * LINE : C0 * LINE;
    float (&d)[W / 2] = reinterpret_cast<float (&)[W / 2]>(*(&acc[slab][0][0] + C0 / 2));
    wgmma_64xNx16<T, W, LoadRows::kRowContig ? 1 : 0, LoadCols::kRowContig ? 1 : 0>(
        d, descriptor<LoadRows>(rows, s), descriptor<LoadCols>(cols + C0_OFFSET, s));
    if constexpr (C0 + W < WIDTH) multiply<C0 + W>(rows, cols, s, slab);
  }

  // Every accumulator as f(m, n, v), in the CTA tile's coordinates. Swapped, neighbouring accumulators
  // are neighbouring rows of D, so there are no column pairs (gett::Gett::kPairs).
  static constexpr bool kColumnPairs = !SWAP;
  template <class F>
  __device__ __forceinline__ void for_each_pair(F&& f) const {
    static_assert(!SWAP, "swapped accumulators hold no column pairs");
    Base::for_each_pair(f);
  }
  // ... but pairs of rows: f(m, n, v) with v[1] at (m + 1, n).
  static constexpr int kRowRun = SWAP ? 2 : 1;
  static constexpr int kWarpRows = 0;   // a warpgroup's rows: no for_each_strided_run
  static constexpr bool kBlockQuads = !SWAP && WIDTH % 16 == 0;   // (m, n) blocks as the fragments hold them
  template <class F>
  __device__ __forceinline__ void for_each_row_run(F&& f) const {
    static_assert(SWAP, "unswapped accumulators hold no row pairs");
    Base::for_each_pair([&](int n, int m, float v0, float v1) {
      const float v[2] = {v0, v1};
      f(m, n, v);
    });
  }
  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    if constexpr (SWAP) Base::for_each([&](int n, int m, float v) { f(m, n, v); });
    else Base::for_each(f);
  }

  // Until at most PENDING tiles' MMAs are still running in this warpgroup.
  template <int PENDING>
  __device__ __forceinline__ void wait() const { wgmma_wait<PENDING>(); }
};

}  // namespace gett
