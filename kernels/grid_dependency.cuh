// Programmatic dependent launch (sm_90): a plan's kernels (staging copies, the contraction, the split-K
// reduction) run one after another on a stream, and the host launches each with the programmatic-
// serialisation attribute (the first behind whatever kernel the stream ran before), so that its launch is
// under way while the kernel before it drains. None triggers the next one early
// (griddepcontrol.launch_dependents): the next kernel's CTAs, resident while the copy before them ran its
// last blocks, cost #14 8 us (H100, session 35).
#pragma once

namespace gett {

// Until every kernel before this one in the stream has finished and its writes are visible; at once where
// this kernel was launched without the attribute. Called before any global memory is touched.
__device__ __forceinline__ void wait_for_prior_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace gett
