// flashindexer sm_90a: diagnostic wrappers of a group barrier (a Sync policy of
// radix_select.cuh: NamedSync, WarpgroupSync), for builds with a diagnostic knob only.
//
// Purpose: evidence about a kernel's barriers that compute-sanitizer cannot give
//   (docs/experiments.md, 2026-12-01: racecheck reports on the lockstep kernel's finish).
// PhaseCheckedSync<kId, kThreads>: barrier kId over kThreads threads, as bar.red.popc over
//   two bits of the calling warp's count of the barrier's instances (shared memory, per
//   warp), then bar.red.or: warps at the same instance agree on both bits, so a count other
//   than 0 or kThreads means that warps met at different instances (a skew by a multiple of 4
//   goes unseen); each such warp adds 1 to g_barrier_phase_errors. The kernel zeroes the
//   counters first (phase_check_start).
// FuzzedSync<Sync>: Sync with a pseudo-random 0-2 us sleep per warp before and after each
//   arrival (schedule fuzzing): a barrier that does not order what it should shows as wrong
//   outputs once the warps' timing is shuffled.
// Shared memory: PhaseCheckedSync, 4 bytes per warp of the CTA (static).
#pragma once

#include <cstdint>

#include "cuda/sm90/common/ptx.cuh"

namespace flashindexer::sm90 {

inline constexpr int kPhaseCheckWarps = 32;
static __shared__ uint32_t s_barrier_phase[kPhaseCheckWarps];  // per warp of the CTA: instances passed
static __device__ unsigned int g_barrier_phase_errors;         // warps that met at a skewed instance

// Zeroes the CTA's instance counters: every thread, before the CTA's first barrier.
__device__ inline void phase_check_start() {
  if (threadIdx.x < kPhaseCheckWarps) s_barrier_phase[threadIdx.x] = 0;
}

template <uint32_t kId, uint32_t kThreads>
struct PhaseCheckedSync {
  __device__ static void sync() { (void)any(false); }
  __device__ static bool any(bool p) {
    const int w = int(threadIdx.x) / 32;
    const uint32_t n = s_barrier_phase[w] + 1;
    __syncwarp();
    if ((threadIdx.x & 31) == 0) s_barrier_phase[w] = n;
    const uint32_t b0 = ptx::named_barrier_popc(kId, kThreads, n & 1);
    const uint32_t b1 = ptx::named_barrier_popc(kId, kThreads, (n >> 1) & 1);
    const bool r = ptx::named_barrier_or(kId, kThreads, p);
    if ((threadIdx.x & 31) == 0 && (b0 % kThreads != 0 || b1 % kThreads != 0)) atomicAdd(&g_barrier_phase_errors, 1u);
    return r;
  }
};

__device__ __forceinline__ void fuzz_delay() {
  const uint32_t h = (uint32_t(clock()) ^ (threadIdx.x >> 5) * 0x9E3779B9u) * 0x85EBCA6Bu;
  __nanosleep(h >> 21);  // 0..2047 ns, the same in every lane of the warp
}

template <class Sync>
struct FuzzedSync {
  __device__ static uint32_t id() { return Sync::id(); }
  __device__ static void sync() {
    fuzz_delay();
    Sync::sync();
    fuzz_delay();
  }
  __device__ static bool any(bool p) {
    fuzz_delay();
    const bool r = Sync::any(p);
    fuzz_delay();
    return r;
  }
};

}  // namespace flashindexer::sm90
