// flashindexer sm_90a: the K-th key over the keys that the CTAs of a thread-block cluster hold,
// each CTA its own (the cluster merge of topk_over_logits.cu and the finish of the fused decode
// clusters, fused_staged.cu).
//
// Algorithm: radix passes over 11-bit digits below the keys' common prefix (lo / hi over the
//   cluster, which the caller exchanges). Each pass every CTA counts its own keys that match the
//   prefix into its own histogram (double-buffered: one cluster barrier per pass), then warp 0
//   of every CTA reads the cluster's 64 group sums (32 bins each) through distributed shared
//   memory, then the chosen group's 32 bins, and every CTA takes the same digit. It stops when
//   the keys at or above the selected bin's lower edge are exactly `need`: that edge is the
//   threshold (no key list is ever gathered). The lowest digit leaves one key per bin (keys
//   are unique), so it terminates.
// Threads: 512 per CTA, all in the call. Shared memory: two histograms of 2,048 words (the
//   caller's) and ClusterSelectScratch.
#pragma once

#include <cstdint>

namespace flashindexer::sm90 {

inline constexpr int kClusterSelectThreads = 512;
inline constexpr int kClusterSelectDigitBits = 11;
inline constexpr int kClusterSelectBins = 1 << kClusterSelectDigitBits;
inline constexpr int kClusterSelectGroups = kClusterSelectBins / 32;
static_assert(kClusterSelectBins % kClusterSelectThreads == 0 && kClusterSelectGroups == 64 &&
                  kClusterSelectGroups % (kClusterSelectThreads / 32) == 0,
              "whole bins per thread; two groups per lane");

struct ClusterSelectScratch {
  uint32_t groups[2][kClusterSelectGroups];  // pass p: sums of each 32 bins of hist[p & 1]
  uint32_t sel_bin, sel_count, sel_need;     // the pass's digit, the keys in its bin, the rank among them
};

// The lane whose inclusive prefix sum (over the warp, in lane order) of c first reaches need
// (0 < need <= the warp's total); *excl: its exclusive prefix (the same in every lane).
__device__ inline int warp_select_lane(uint32_t c, uint32_t need, int lane, uint32_t* excl) {
  uint32_t incl = c;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  const int at = __ffs(__ballot_sync(0xffffffffu, incl >= need)) - 1;
  *excl = __shfl_sync(0xffffffffu, incl - c, at);
  return at;
}

__device__ inline uint64_t warp_min_u64(uint64_t x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y < x ? y : x;
  }
  return x;
}
__device__ inline uint64_t warp_max_u64(uint64_t x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}

// The threshold f such that exactly `need` of the cluster's keys are >= f (0 < need < the
// cluster's key count; lo < hi: the least and largest key over the cluster). count(mask,
// prefix, sh, hist): the calling thread adds each of its keys k with (k & mask) == prefix to
// hist[(k >> sh) & 2047] (a shared atomicAdd). hist0 / hist1: this CTA's two histograms
// (2,048 words each). first_pass(): called once, after the first pass (a profile
// lap). Entered and left by all threads of every CTA of the cluster.
template <class Cluster, class Count, class FirstPass>
__device__ uint64_t cluster_floor_of_kth(const Cluster& cluster, uint32_t* hist0, uint32_t* hist1,
                                         ClusterSelectScratch& s, uint32_t need, uint64_t lo, uint64_t hi,
                                         Count&& count, FirstPass&& first_pass) {
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const uint32_t ctas = cluster.num_blocks();
  constexpr int kMaxCtas = 16;
  int top = 63 - __clzll((long long)(lo ^ hi));  // digits start below the common prefix
  uint64_t mask = top == 63 ? 0ull : ~((2ull << top) - 1);
  uint64_t prefix = hi & mask;
  for (int pass = 0;; ++pass) {
    // The digit: 11 bits ending at `top`, or the lowest 11 (its bits above top are the
    // prefix's, the same in every key counted).
    const int sh = top >= kClusterSelectDigitBits - 1 ? top + 1 - kClusterSelectDigitBits : 0;
    uint32_t* h = pass & 1 ? hist1 : hist0;
    uint32_t* g = s.groups[pass & 1];
#pragma unroll
    for (int j = 0; j < kClusterSelectBins / kClusterSelectThreads; ++j) h[tid + j * kClusterSelectThreads] = 0;
    __syncthreads();
    count(mask, prefix, sh, h);
    __syncthreads();
#pragma unroll
    for (int e = 0; e < kClusterSelectGroups / (kClusterSelectThreads / 32); ++e) {
      const int grp = warp * (kClusterSelectGroups / (kClusterSelectThreads / 32)) + e;
      const uint32_t c = __reduce_add_sync(0xffffffffu, h[grp * 32 + lane]);
      if (lane == 0) g[grp] = c;
    }
    __syncthreads();
    // Every CTA's counts of this pass are complete. (Buffer pass & 1 is zeroed again two
    // passes on, after the next cluster barrier: every CTA has read it by then.)
    cluster.sync();
    // Warp 0 finds the bin, from the top: lane l sums groups 63 - 2l and 62 - 2l over the
    // cluster, then the chosen group's bin 31 - l. (Every warp doing so cost 16 x the
    // distributed shared-memory reads: docs/perf.md, session 19.)
    if (warp == 0) {
      uint32_t hi_g = 0, lo_g = 0;
#pragma unroll
      for (uint32_t q = 0; q < kMaxCtas; ++q) {  // every load issued, then added
        if (q < ctas) {
          const uint2 u =
              reinterpret_cast<const uint2*>(cluster.map_shared_rank(g, q))[kClusterSelectGroups / 2 - 1 - lane];
          hi_g += u.y;
          lo_g += u.x;
        }
      }
      uint32_t excl;
      const int gl = warp_select_lane(hi_g + lo_g, need, lane, &excl);
      uint32_t need_g = need - excl;
      const bool upper = need_g <= hi_g;
      if (!upper) need_g -= hi_g;
      const int grp = __shfl_sync(0xffffffffu, kClusterSelectGroups - 1 - 2 * lane - (upper ? 0 : 1), gl);
      need_g = __shfl_sync(0xffffffffu, need_g, gl);
      const uint32_t bin = uint32_t(grp * 32 + 31 - lane);
      uint32_t c = 0;
#pragma unroll
      for (uint32_t q = 0; q < kMaxCtas; ++q)
        if (q < ctas) c += cluster.map_shared_rank(h, q)[bin];
      const int bl = warp_select_lane(c, need_g, lane, &excl);
      if (lane == bl) {
        s.sel_bin = bin;
        s.sel_count = c;
        s.sel_need = need_g - excl;
      }
    }
    __syncthreads();  // (sel_* are rewritten next pass after three more CTA barriers)
    const uint32_t sel_bin = s.sel_bin, in_bin = s.sel_count;
    need = s.sel_need;
    if (pass == 0) first_pass();
    prefix |= uint64_t(sel_bin) << sh;
    mask |= uint64_t(kClusterSelectBins - 1) << sh;
    // need0 - need keys lie above the bin and in_bin in it: when in_bin is need, the bin's
    // lower edge keeps exactly need0.
    if (in_bin == need) return prefix;
    top = sh - 1;
  }
}

}  // namespace flashindexer::sm90
