// flashindexer sm_90a: per-phase cycle sums for profiling builds (one knob per operator:
// FI_FUSED_PROFILE, FI_TOPK_PROFILE).
//
// Purpose: one thread of each CTA (the caller's choice) sums clock64() intervals into slots
//   and, at its end, adds them to a __device__ array of the operator that the host reads
//   with cudaMemcpyFromSymbol. Slot 0 counts the CTAs. PhaseClock<kSlots, false> does
//   nothing, so the kernels of a build without the knob are unchanged.
// Threads: any; only the flushing thread touches global memory. Shared memory: none.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace flashindexer::sm90 {

// Host: copies an operator's phase sums (its __device__ array) and zeroes them with reset.
template <class Symbol, size_t kSlots>
bool read_phase_sums(const Symbol& sums, unsigned long long (&out)[kSlots], bool reset) {
  if (cudaMemcpyFromSymbol(out, sums, sizeof(out)) != cudaSuccess) return false;
  const unsigned long long zero[kSlots] = {};
  return !reset || cudaMemcpyToSymbol(sums, zero, sizeof(zero)) == cudaSuccess;
}

template <int kSlots, bool kOn>
struct PhaseClock {
  static constexpr bool kEnabled = kOn;
  unsigned long long v[kSlots] = {};
  __device__ long long now() const { return clock64(); }
  __device__ void add(int slot, unsigned long long x) { v[slot] += x; }
  // Adds the interval since t to slot and restarts t.
  __device__ void lap(int slot, long long& t) {
    const long long n = clock64();
    v[slot] += static_cast<unsigned long long>(n - t);
    t = n;
  }
  __device__ void flush(bool mine, unsigned long long* sums) {
    if (!mine) return;
    v[0] = 1;
    for (int i = 0; i < kSlots; ++i) atomicAdd(&sums[i], v[i]);
  }
};

template <int kSlots>
struct PhaseClock<kSlots, false> {
  static constexpr bool kEnabled = false;
  __device__ long long now() const { return 0; }
  __device__ void add(int, unsigned long long) {}
  __device__ void lap(int, long long&) {}
  __device__ void flush(bool, unsigned long long*) {}
};

}  // namespace flashindexer::sm90
