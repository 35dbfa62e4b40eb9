// flashindexer sm_90a: exact selection over rank keys in shared memory, by a group of
// threads (a whole CTA, or the consumer warpgroups of a warp-specialised CTA).
//
// Purpose: kth() finds the need-th largest of n unique rank keys (rank_key.h); compact()
//   keeps, in place, exactly the keys >= a given key. block_select.cuh (TopK over logits)
//   and fused_topk.cu (the fused operator) select with these, so both paths keep the same
//   sets by construction.
// Algorithm: MSB radix select that starts at the highest bit where the keys differ (their
//   common prefix is skipped, so the histogram, 2048 bins unless kBins says fewer, spreads
//   even for keys packed within a few ulps), one shared atomic per key (aggregating equal bins
//   per warp by __match_any_sync was slower: docs/experiments.md, 2026-11-30); once the selected bin
//   holds <= kSelectSmall keys, direct ranking finishes. Terminates: the last
//   digit leaves one key in its bin.
// Threads: kThreads (a multiple of 32, <= 1024), synchronised by Sync::sync() (the CTA
//   barrier or a named barrier); tid is the thread's index in the group.
// Shared memory: RadixSelectStorage, 4 x kBins bytes of histogram (8 KiB) + a few words.
#pragma once

#include <cstdint>

#include "cuda/sm90/common/ptx.cuh"
#include "cuda/sm90/select/warp_scan.cuh"

namespace flashindexer::sm90 {

struct CtaSync {
  __device__ static void sync() { __syncthreads(); }
};

template <uint32_t kId, uint32_t kThreads>
struct NamedSync {
  __device__ static void sync() { ptx::named_barrier(kId, kThreads); }
  // The barrier, and whether any of its threads passed p.
  __device__ static bool any(bool p) { return ptx::named_barrier_or(kId, kThreads, p); }
};

// The calling thread's own warpgroup: named barrier kFirstId + threadIdx.x / 128 - kFirstWg
// over its 128 threads (a group of threads that works apart from the other warpgroups).
template <uint32_t kFirstId, uint32_t kFirstWg>
struct WarpgroupSync {
  __device__ static uint32_t id() { return kFirstId + threadIdx.x / 128 - kFirstWg; }
  __device__ static void sync() { ptx::named_barrier(id(), 128); }
  __device__ static bool any(bool p) { return ptx::named_barrier_or(id(), 128, p); }
};

inline constexpr int kSelectBins = 2048;  // histogram bins (11-bit digits) unless a user picks fewer
inline constexpr int kSelectSmall = 64;   // direct ranking (O(n^2)) below this many keys

template <int kThreads, int kBins = kSelectBins>
struct RadixSelectStorage {
  union {
    uint32_t hist[kBins];
    uint64_t small[kSelectSmall];  // the last bin's keys, for direct ranking
  };
  uint32_t warp_sums[kThreads / 32];
  uint64_t lo, hi;
  uint32_t small_count, sel_bin, sel_need, sel_count;
};

template <int kThreads, class Sync, int kBins = kSelectBins>
struct RadixSelect {
  static_assert(kThreads % 32 == 0 && kBins % kThreads == 0 && kSelectSmall <= kThreads &&
                (kBins & (kBins - 1)) == 0);
  using Storage = RadixSelectStorage<kThreads, kBins>;
  using GroupSync = Sync;                            // the group's barrier
  static constexpr int kGroupThreads = kThreads;     // the group's threads
  static constexpr int kBinsPerThread = kBins / kThreads;
  static constexpr int kDigitBits = __builtin_ctz(kBins);

  __device__ static uint64_t item(const uint64_t* keys, uint32_t n, int tid, int round) {
    const uint32_t idx = uint32_t(tid + round * kThreads);
    return idx < n ? keys[idx] : 0ull;  // 0: absent (every rank key is > 0)
  }

  // Exclusive prefix sum of one value per thread over the group (thread order).
  __device__ static uint32_t exclusive_sum(Storage& s, int tid, uint32_t v) {
    const int lane = tid & 31, warp = tid >> 5;
    const uint32_t incl = warp_inclusive_sum(v, lane);
    if (lane == 31) s.warp_sums[warp] = incl;
    Sync::sync();
    uint32_t before = 0;
    for (int w = 0; w < warp; ++w) before += s.warp_sums[w];
    return before + incl - v;
  }

  // The need-th largest of keys[0, n) (unique, 1 <= need <= n). Entered and left by the
  // whole group; keys are only read.
  __device__ static uint64_t kth(Storage& s, const uint64_t* keys, uint32_t n, uint32_t need, int tid) {
    return select<false>(s, keys, n, need, need, tid);
  }

  // A key f <= the need-th largest such that need <= #(keys >= f) <= max_keep: the lower edge
  // of the first digit bin (from the top) that holds the need-th key once the keys at or
  // above that edge are few enough, else the need-th key itself. Keeping the keys >= f keeps
  // every key of the top need, usually after one histogram pass instead of kth's several.
  __device__ static uint64_t floor_of_kth(Storage& s, const uint64_t* keys, uint32_t n, uint32_t need,
                                          uint32_t max_keep, int tid) {
    return select<true>(s, keys, n, need, max_keep, tid);
  }

 private:
  template <bool kFloor>
  __device__ __forceinline__ static uint64_t select(Storage& s, const uint64_t* keys, uint32_t n, uint32_t need, uint32_t max_keep,
                                    int tid) {
    const uint32_t need0 = need;
    const int rounds = int((n + kThreads - 1) / kThreads);
    const int lane = tid & 31;
    // Common prefix of all keys: radix digits start below it.
    uint64_t lo = ~0ull, hi = 0;
    for (int r = 0; r < rounds; ++r) {
      const uint64_t v = item(keys, n, tid, r);
      if (v != 0ull) {
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const uint64_t l2 = __shfl_xor_sync(0xffffffffu, lo, o), h2 = __shfl_xor_sync(0xffffffffu, hi, o);
      lo = l2 < lo ? l2 : lo;
      hi = h2 > hi ? h2 : hi;
    }
    if (tid == 0) {
      s.lo = ~0ull;
      s.hi = 0;
    }
    Sync::sync();
    if (lane == 0) {
      atomicMin(reinterpret_cast<unsigned long long*>(&s.lo), (unsigned long long)lo);
      atomicMax(reinterpret_cast<unsigned long long*>(&s.hi), (unsigned long long)hi);
    }
    Sync::sync();
    lo = s.lo;
    hi = s.hi;
    Sync::sync();  // lo / hi read before rank_small may rewrite them
    if (lo == hi) return hi;
    int top = 63 - __clzll((long long)(lo ^ hi));  // highest differing bit
    uint64_t mask = top == 63 ? 0ull : ~((2ull << top) - 1);
    uint64_t prefix = hi & mask;
    while (true) {
      const int bits = top + 1 < kDigitBits ? top + 1 : kDigitBits;
      const int sh = top + 1 - bits;
      const uint32_t nb = 1u << bits;
      for (int b = tid; b < int(nb); b += kThreads) s.hist[b] = 0;
      Sync::sync();
      for (int r = 0; r < rounds; ++r) {
        const uint64_t v = item(keys, n, tid, r);
        if (v != 0ull && (v & mask) == prefix) atomicAdd(&s.hist[uint32_t(v >> sh) & (nb - 1)], 1u);
      }
      Sync::sync();
      // Walk bins from the top: thread t owns reversed bins [t * kBinsPerThread, ...).
      uint32_t local[kBinsPerThread];
      uint32_t sum = 0;
#pragma unroll
      for (int j = 0; j < kBinsPerThread; ++j) {
        const int rb = tid * kBinsPerThread + j;
        local[j] = rb < int(nb) ? s.hist[nb - 1 - rb] : 0u;
        sum += local[j];
      }
      const uint32_t before = exclusive_sum(s, tid, sum);
      if (before < need && need <= before + sum) {
        uint32_t acc = before;
#pragma unroll
        for (int j = 0; j < kBinsPerThread; ++j) {
          if (acc < need && need <= acc + local[j]) {
            s.sel_bin = nb - 1 - uint32_t(tid * kBinsPerThread + j);
            s.sel_need = need - acc;
            s.sel_count = local[j];
          }
          acc += local[j];
        }
      }
      Sync::sync();
      prefix |= uint64_t(s.sel_bin) << sh;
      mask |= uint64_t(nb - 1) << sh;
      need = s.sel_need;
      const uint32_t in_bin = s.sel_count;
      Sync::sync();  // sel_* and warp_sums read before they are rewritten
      // Keys at or above the bin's lower edge: need0 - need above the bin, in_bin in it.
      if constexpr (kFloor)
        if (need0 - need + in_bin <= max_keep) return prefix;
      if (in_bin <= uint32_t(kSelectSmall)) return rank_small(s, keys, n, rounds, prefix, mask, need, tid);
      top = sh - 1;
    }
  }

 public:
  // Keeps, in place, exactly the keys of keys[0, n) that are >= kth; *count becomes their
  // number. Round r reads keys[r kThreads, (r + 1) kThreads) and writes below (r + 1)
  // kThreads, after every read of the round. Entered and left by the whole group.
  __device__ static void compact(uint64_t* keys, uint32_t n, uint64_t kth, uint32_t* count, int tid) {
    if (tid == 0) *count = 0;
    Sync::sync();
    const int lane = tid & 31;
    const int rounds = int((n + kThreads - 1) / kThreads);
    for (int r = 0; r < rounds; ++r) {
      const uint64_t v = item(keys, n, tid, r);
      const bool keep = v >= kth && v != 0ull;
      Sync::sync();
      const uint32_t m = __ballot_sync(0xffffffffu, keep);
      uint32_t base = 0;
      if (lane == 0 && m) base = atomicAdd(count, __popc(m));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (keep) keys[base + __popc(m & ((1u << lane) - 1))] = v;
    }
    Sync::sync();
  }

 private:
  // The need-th largest of the <= kSelectSmall keys that match prefix / mask, by direct
  // ranking (keys unique: exactly one has need - 1 larger ones).
  __device__ static uint64_t rank_small(Storage& s, const uint64_t* keys, uint32_t n, int rounds, uint64_t prefix,
                                        uint64_t mask, uint32_t need, int tid) {
    if (tid == 0) s.small_count = 0;
    Sync::sync();  // also: the histogram (aliased by small) is no longer read
    for (int r = 0; r < rounds; ++r) {
      const uint64_t v = item(keys, n, tid, r);
      if (v != 0ull && (v & mask) == prefix) s.small[atomicAdd(&s.small_count, 1u)] = v;
    }
    Sync::sync();
    const uint32_t m = s.small_count;
    if (uint32_t(tid) < m) {
      const uint64_t v = s.small[tid];
      uint32_t larger = 0;
      for (uint32_t j = 0; j < m; ++j) larger += s.small[j] > v ? 1u : 0u;
      if (larger == need - 1) s.lo = v;
    }
    Sync::sync();
    const uint64_t kth = s.lo;
    Sync::sync();
    return kth;
  }
};

}  // namespace flashindexer::sm90
