// Synchronisation between the warps of one CTA that play different roles (sm_90): shared-memory
// mbarriers, whose phases count arrivals, and named barriers over a subset of the threads.
#pragma once
#include "copy.cuh"

namespace gett {

// Phase 0 of `bar` completes after `count` arrivals; the next phase starts at once with the same count.
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count) : "memory");
}

// One arrival (release: this thread's earlier writes are visible to whoever waits for the phase).
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

// One arrival once every cp.async this thread issued so far has landed (counts toward the init count).
__device__ __forceinline__ void mbarrier_arrive_on_copies(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

// Until the phase with parity `parity` (0 for phases 0, 2, ...) has completed (acquire).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  const unsigned a = smem_address(bar);
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(a), "r"(parity) : "memory");
  }
}

// A barrier for the THREADS threads (whole warps) that use barrier number ID; 0 is __syncthreads'.
template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(ID > 0 && ID < 16 && THREADS % 32 == 0, "named barriers 1-15, whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

// Counts this warp's threads toward barrier ID without waiting (the others wait in named_barrier_sync).
template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_arrive() {
  static_assert(ID > 0 && ID < 16 && THREADS % 32 == 0, "named barriers 1-15, whole warps");
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

// The same at a barrier whose number is known only at run time (one a warpgroup, say).
template <int THREADS>
__device__ __forceinline__ void named_barrier_sync_at(int id) {
  static_assert(THREADS % 32 == 0, "whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}
template <int THREADS>
__device__ __forceinline__ void named_barrier_arrive_at(int id) {
  static_assert(THREADS % 32 == 0, "whole warps");
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}

// Moves this warpgroup's registers per thread to REGS (a multiple of 8, 24-256; every thread of the
// warpgroup executes it): dec gives registers back to the CTA's pool, inc waits until the pool has them.
template <int REGS>
__device__ __forceinline__ void warpgroup_registers_dec() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg takes multiples of 8 in 24-256");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void warpgroup_registers_inc() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg takes multiples of 8 in 24-256");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

}  // namespace gett
