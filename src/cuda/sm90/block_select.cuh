// flashindexer sm_90a: block-wide exact streaming TopK (the device stream_select).
//
// Purpose: one CTA keeps the exact top K of a stream of rank keys (rank_key.h:
//   (float_key << 32) | (0xFFFFFFFF - position), unique, larger = better).
// Algorithm: keys above the threshold tau are appended to a shared-memory buffer
//   of kCap keys (one warp-aggregated atomic per warp and tile, skipped when no lane
//   passes). When fewer than two tiles of room are left, compact(): find the K-th
//   best key with an MSB radix select that starts at the highest bit where the
//   candidates differ (their common prefix is skipped, so the 2048-bin histogram
//   spreads), aggregates equal bins per warp (__match_any_sync), and finishes by
//   direct ranking once the selected bin holds <= kSmall (64) keys. tau rises to the
//   K-th key and exactly K keys are kept (in-place, round by round). Exact and
//   bounded by construction. finish() sorts the final min(K, n) keys
//   (cub::BlockRadixSort, by position or by rank).
// Threads: kBlock = 512, all do every phase (no warp specialisation).
// Shared memory: kCap * 8 = 80 KiB candidates (the sort aliases them) + 8 KiB
//   histogram + scalars: two CTAs per SM.
#pragma once

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cstdint>

#include "../../core/rank_key.h"

namespace flashindexer::sm90 {

inline constexpr int kBlock = 512;
inline constexpr int kMaxK = 2048;
inline constexpr int kTile = kBlock * 4;             // keys per push_tile()
inline constexpr int kCap = kMaxK + 4 * kTile;        // candidate buffer (keys)
inline constexpr int kRounds = kCap / kBlock;         // strided rounds over the buffer
inline constexpr int kSortItems = kMaxK / kBlock;     // keys per thread in finish()
inline constexpr int kBins = 2048;
inline constexpr int kBinsPerThread = kBins / kBlock;
inline constexpr int kSmall = 64;                      // direct ranking (O(n^2)) below this many keys

struct BlockSelectStorage {
  using Scan = cub::BlockScan<uint32_t, kBlock>;
  using Sort = cub::BlockRadixSort<uint64_t, kBlock, kSortItems>;
  union {
    uint64_t cand[kCap];
    typename Sort::TempStorage sort;
  };
  union {
    uint32_t hist[kBins];
    uint64_t small[kSmall];  // the last bin's keys, for direct ranking
  };
  typename Scan::TempStorage scan;
  uint64_t tau;
  uint64_t lo, hi;
  uint32_t count;
  uint32_t small_count;
  uint32_t sel_bin, sel_need, sel_count;
};

class BlockSelector {
 public:
  __device__ BlockSelector(BlockSelectStorage& s, int32_t k) : s_(s), k_(k) {
    if (threadIdx.x == 0) {
      s_.tau = 0;
      s_.count = 0;
    }
    __syncthreads();
  }

  // Pushes up to 4 rank keys per thread (valid[i] false = absent). Block-wide call.
  __device__ void push_tile(const uint64_t (&rk)[4], const bool (&valid)[4]) {
    make_room();
    const uint64_t tau = s_.tau;
    bool pass[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) pass[i] = valid[i] && rk[i] > tau;
    append(pass, [&](int i) { return rk[i]; });
  }

  // Pushes up to 4 scores per thread as float keys + positions: the rank key is
  // built only for the few that beat tau (the scan's hot path). Block-wide call.
  __device__ void push_scores(const uint32_t (&key)[4], const int32_t (&pos)[4], const bool (&valid)[4]) {
    make_room();
    const uint64_t tau = s_.tau;
    const uint32_t tau_hi = uint32_t(tau >> 32), tau_lo = uint32_t(tau);
    bool pass[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      pass[i] = valid[i] && (key[i] > tau_hi || (key[i] == tau_hi && 0xFFFFFFFFu - uint32_t(pos[i]) > tau_lo));
    append(pass, [&](int i) { return (uint64_t(key[i]) << 32) | (0xFFFFFFFFu - uint32_t(pos[i])); });
  }

  // Threshold guess from a sample of the stream: tau := (need-th best sample) - 1.
  // Only a guess: the caller verifies that at least K keys passed it (reduce() == K)
  // and otherwise reset()s and streams again without it.
  __device__ void guess(const uint64_t (&sample)[4], uint32_t need) {
    const bool all[4] = {true, true, true, true};
    push_tile(sample, all);
    __syncthreads();
    const uint64_t kth = select_kth(s_.count, need);
    reset(kth - 1);
  }

  __device__ void reset(uint64_t tau = 0) {
    __syncthreads();
    if (threadIdx.x == 0) {
      s_.count = 0;
      s_.tau = tau;
    }
    __syncthreads();
  }

  // Reduces to the min(K, n) best candidates, unsorted, in candidates()[0, return).
  __device__ int32_t reduce() {
    __syncthreads();
    if (s_.count > uint32_t(k_)) compact();
    __syncthreads();
    return int32_t(s_.count);
  }
  __device__ const uint64_t* candidates() const { return s_.cand; }

  // Final selection and sort. Returns n = min(K, candidates); thread t holds
  // sorted entries [t * kSortItems, t * kSortItems + kSortItems) in out.
  __device__ int32_t finish(bool by_rank, uint64_t (&out)[kSortItems]) {
    const int32_t n = reduce();
#pragma unroll
    for (int i = 0; i < kSortItems; ++i) {
      const int idx = threadIdx.x * kSortItems + i;
      out[i] = idx < n ? s_.cand[idx] : 0ull;  // 0 sorts last in both orders below
    }
    __syncthreads();  // the sort storage aliases cand
    typename BlockSelectStorage::Sort sort(s_.sort);
    if (by_rank) {
      sort.SortDescending(out);
    } else {
      sort.SortDescending(out, 0, 32);  // low word = 0xFFFFFFFF - position: ascending position
    }
    return n;
  }

 private:
  // One barrier per tile. A thread may see a count that misses the previous tile's
  // appends (at most kTile keys), so compact while two tiles of room remain.
  __device__ void make_room() {
    if (__syncthreads_or(s_.count > uint32_t(kCap - 2 * kTile))) compact();
  }

  // Warp-aggregated append of the passing keys (one shared atomic per warp).
  template <typename KeyOf>
  __device__ void append(const bool (&pass)[4], KeyOf&& key_of) {
    const uint32_t mine = uint32_t(pass[0]) + uint32_t(pass[1]) + uint32_t(pass[2]) + uint32_t(pass[3]);
    if (__ballot_sync(0xffffffffu, mine != 0) == 0) return;
    const int lane = threadIdx.x & 31;
    uint32_t incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
    uint32_t base = 0;
    if (lane == 31) base = atomicAdd(&s_.count, total);
    base = __shfl_sync(0xffffffffu, base, 31) + incl - mine;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (pass[i]) s_.cand[base++] = key_of(i);
  }

  __device__ uint64_t item(uint32_t n, int round) const {
    const uint32_t idx = threadIdx.x + round * kBlock;
    return idx < n ? s_.cand[idx] : 0ull;  // 0: absent (every rank key is > 0)
  }

  // Keeps exactly the K best candidates; tau becomes the K-th best. Entered after a barrier.
  __device__ void compact() {
    const uint32_t n = s_.count;
    const uint64_t kth = select_kth(n, uint32_t(k_));
    if (threadIdx.x == 0) {
      s_.count = 0;
      s_.tau = kth;
    }
    __syncthreads();
    // Round r reads cand[r*kBlock, (r+1)*kBlock) and writes below (r+1)*kBlock: in place.
    const int lane = threadIdx.x & 31;
    const int rounds = int((n + kBlock - 1) / kBlock);
    for (int r = 0; r < rounds; ++r) {
      const uint64_t v = item(n, r);
      const bool keep = v >= kth;
      __syncthreads();  // every read of this round precedes every write
      const uint32_t mask = __ballot_sync(0xffffffffu, keep);
      uint32_t base = 0;
      if (lane == 0 && mask) base = atomicAdd(&s_.count, __popc(mask));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (keep) s_.cand[base + __popc(mask & ((1u << lane) - 1))] = v;
    }
    __syncthreads();
  }

  // The need-th largest of the n candidates (keys unique).
  __device__ uint64_t select_kth(uint32_t n, uint32_t need) {
    const int rounds = int((n + kBlock - 1) / kBlock);
    // Common prefix of all candidates: radix digits start below it.
    uint64_t lo = ~0ull, hi = 0;
    for (int r = 0; r < rounds; ++r) {
      const uint64_t v = item(n, r);
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
    if (threadIdx.x == 0) {
      s_.lo = ~0ull;
      s_.hi = 0;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
      atomicMin(reinterpret_cast<unsigned long long*>(&s_.lo), (unsigned long long)lo);
      atomicMax(reinterpret_cast<unsigned long long*>(&s_.hi), (unsigned long long)hi);
    }
    __syncthreads();
    lo = s_.lo;
    hi = s_.hi;
    if (lo == hi) return hi;
    int top = 63 - __clzll((long long)(lo ^ hi));  // highest differing bit
    uint64_t mask = top == 63 ? 0ull : ~((2ull << top) - 1);
    uint64_t prefix = hi & mask;
    const int lane = threadIdx.x & 31;
    while (true) {
      const int bits = top + 1 < 11 ? top + 1 : 11;
      const int sh = top + 1 - bits;
      const uint32_t nb = 1u << bits;
      for (int b = threadIdx.x; b < int(nb); b += kBlock) s_.hist[b] = 0;
      __syncthreads();
      for (int r = 0; r < rounds; ++r) {
        const uint64_t v = item(n, r);
        const bool in = v != 0ull && (v & mask) == prefix;
        const uint32_t bin = in ? uint32_t(v >> sh) & (nb - 1) : 0xFFFFFFFFu;
        const uint32_t peers = __match_any_sync(0xffffffffu, bin);
        if (in && lane == __ffs(peers) - 1) atomicAdd(&s_.hist[bin], __popc(peers));
      }
      __syncthreads();
      // Walk bins from the top: thread t owns reversed bins [t*4, t*4+4).
      uint32_t local[kBinsPerThread];
      uint32_t sum = 0;
#pragma unroll
      for (int j = 0; j < kBinsPerThread; ++j) {
        const int rb = threadIdx.x * kBinsPerThread + j;
        local[j] = rb < int(nb) ? s_.hist[nb - 1 - rb] : 0u;
        sum += local[j];
      }
      uint32_t before = 0;
      typename BlockSelectStorage::Scan(s_.scan).ExclusiveSum(sum, before);
      if (before < need && need <= before + sum) {
        uint32_t acc = before;
#pragma unroll
        for (int j = 0; j < kBinsPerThread; ++j) {
          if (acc < need && need <= acc + local[j]) {
            s_.sel_bin = nb - 1 - (threadIdx.x * kBinsPerThread + j);
            s_.sel_need = need - acc;
            s_.sel_count = local[j];
          }
          acc += local[j];
        }
      }
      __syncthreads();
      prefix |= uint64_t(s_.sel_bin) << sh;
      mask |= uint64_t(nb - 1) << sh;
      need = s_.sel_need;
      const uint32_t in_bin = s_.sel_count;
      // Terminates: the last digit (sh == 0) leaves one key in its bin.
      if (in_bin <= uint32_t(kSmall)) return rank_small(n, rounds, prefix, mask, need);
      top = sh - 1;
      __syncthreads();  // sel_* read before the next pass rewrites them
    }
  }

  // Gathers the <= kSmall keys matching prefix/mask and returns the need-th largest
  // by direct ranking (keys unique: exactly one key has need - 1 larger ones).
  __device__ uint64_t rank_small(uint32_t n, int rounds, uint64_t prefix, uint64_t mask, uint32_t need) {
    if (threadIdx.x == 0) s_.small_count = 0;
    __syncthreads();  // also: the histogram (aliased by small) is no longer read
    for (int r = 0; r < rounds; ++r) {
      const uint64_t v = item(n, r);
      if (v != 0ull && (v & mask) == prefix) s_.small[atomicAdd(&s_.small_count, 1u)] = v;
    }
    __syncthreads();
    const uint32_t m = s_.small_count;
    if (threadIdx.x < m) {
      const uint64_t v = s_.small[threadIdx.x];
      uint32_t larger = 0;
      for (uint32_t j = 0; j < m; ++j) larger += s_.small[j] > v ? 1u : 0u;
      if (larger == need - 1) s_.lo = v;
    }
    __syncthreads();
    const uint64_t kth = s_.lo;
    __syncthreads();
    return kth;
  }

  BlockSelectStorage& s_;
  int32_t k_;
};

}  // namespace flashindexer::sm90
