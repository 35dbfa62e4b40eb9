// flashindexer sm_90a: block-wide exact streaming TopK (the device stream_select).
//
// Purpose: one CTA keeps the exact top K of a stream of rank keys (rank_key.h:
//   (float_key << 32) | (0xFFFFFFFF - position), unique, larger = better).
// Algorithm: candidates above the threshold tau are appended to a shared-memory
//   buffer of kCap = kMaxK + 4096 keys (one warp-aggregated atomic per warp per
//   tile). Before a tile could overflow it, compact(): an MSB radix select over the
//   64-bit keys (11-bit digits, 2048-bin shared histogram, early exit once the
//   selected bin holds exactly the keys still needed) finds the K-th best key,
//   tau rises to it, and exactly K keys are kept. Exact and bounded by construction.
//   finish() selects the final min(K, n), sorts them (cub::BlockRadixSort, by
//   position or by rank) and hands them out in a blocked arrangement.
// Threads: kBlock = 512, all do every phase (no warp specialisation).
// Shared memory: kCap * 8 (48 KiB at kMaxK 2048) + 8 KiB histogram + scan/sort
//   scratch (the sort aliases the candidate buffer).
#pragma once

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cstdint>

#include "../../core/rank_key.h"

namespace flashindexer::sm90 {

inline constexpr int kBlock = 512;
inline constexpr int kMaxK = 2048;
inline constexpr int kTile = kBlock * 4;           // keys pushed per push_tile()
inline constexpr int kCap = kMaxK + 2 * kTile;      // candidate buffer (keys)
inline constexpr int kCapItems = kCap / kBlock;     // keys per thread in compact()
inline constexpr int kSortItems = kMaxK / kBlock;   // keys per thread in finish()
inline constexpr int kBins = 2048;
inline constexpr int kBinsPerThread = kBins / kBlock;

struct BlockSelectStorage {
  using Scan = cub::BlockScan<uint32_t, kBlock>;
  using Sort = cub::BlockRadixSort<uint64_t, kBlock, kSortItems>;
  union {
    uint64_t cand[kCap];
    typename Sort::TempStorage sort;
  };
  uint32_t hist[kBins];
  typename Scan::TempStorage scan;
  uint64_t tau;
  uint64_t min_key;
  uint32_t count;
  uint32_t sel_bin;
  uint32_t sel_need;
  uint32_t sel_count;
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

  // Pushes up to 4 keys per thread (valid[i] false = absent). Block-wide call.
  __device__ void push_tile(const uint64_t (&rk)[4], const bool (&valid)[4]) {
    __syncthreads();  // the previous tile's appends are complete
    // Every thread evaluates the same count before anyone appends again.
    if (__syncthreads_or(s_.count > uint32_t(kCap - kTile))) compact();
    const uint64_t tau = s_.tau;
    uint32_t mine = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) mine += (valid[i] && rk[i] > tau) ? 1u : 0u;
    // Warp-aggregated append: inclusive scan of per-lane counts.
    const int lane = threadIdx.x & 31;
    uint32_t incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
    uint32_t base = 0;
    if (lane == 31 && total) base = atomicAdd(&s_.count, total);
    base = __shfl_sync(0xffffffffu, base, 31) + incl - mine;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (valid[i] && rk[i] > tau) s_.cand[base++] = rk[i];
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
  // Keeps exactly the K best candidates; tau becomes the K-th best.
  __device__ void compact() {
    const uint32_t n = s_.count;  // block-uniform: read after a barrier
    uint64_t items[kCapItems];
#pragma unroll
    for (int i = 0; i < kCapItems; ++i) {
      const uint32_t idx = threadIdx.x + i * kBlock;
      items[i] = idx < n ? s_.cand[idx] : 0ull;  // 0 never matches a selected prefix below tau
    }
    const uint64_t kth = select_kth(items, uint32_t(k_));
    __syncthreads();
    if (threadIdx.x == 0) {
      s_.count = 0;
      s_.tau = kth;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < kCapItems; ++i) {
      const bool keep = items[i] >= kth && items[i] != 0ull;
      const uint32_t mask = __ballot_sync(0xffffffffu, keep);
      uint32_t base = 0;
      if (lane == 0 && mask) base = atomicAdd(&s_.count, __popc(mask));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (keep) s_.cand[base + __popc(mask & ((1u << lane) - 1))] = items[i];
    }
    __syncthreads();
  }

  // The `need`-th largest key among all threads' items (keys are unique; 0 = empty).
  __device__ uint64_t select_kth(const uint64_t (&items)[kCapItems], uint32_t need) {
    uint64_t prefix = 0, mask = 0;
    for (int digit = 0; digit < 6; ++digit) {  // bits 63-53, 52-42, 41-31, 30-20, 19-9, 8-0
      const int sh = digit < 5 ? 53 - 11 * digit : 0;
      const uint32_t nb = digit < 5 ? 2048u : 512u;
      for (int b = threadIdx.x; b < kBins; b += kBlock) s_.hist[b] = 0;
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kCapItems; ++i)
        if (items[i] != 0ull && (items[i] & mask) == prefix)
          atomicAdd(&s_.hist[(items[i] >> sh) & (nb - 1)], 1u);
      __syncthreads();
      // Walk bins from the top: thread t owns reversed bins [t*4, t*4+4).
      uint32_t local[kBinsPerThread];
      uint32_t sum = 0;
#pragma unroll
      for (int j = 0; j < kBinsPerThread; ++j) {
        const int r = threadIdx.x * kBinsPerThread + j;
        local[j] = r < int(nb) ? s_.hist[nb - 1 - r] : 0u;
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
      __syncthreads();  // everyone has read sel_* before the next pass rewrites them
      if (in_bin == need) {  // every key with this prefix is selected: tau = their minimum
        if (threadIdx.x == 0) s_.min_key = ~0ull;
        __syncthreads();
        uint64_t m = ~0ull;
#pragma unroll
        for (int i = 0; i < kCapItems; ++i)
          if (items[i] != 0ull && (items[i] & mask) == prefix && items[i] < m) m = items[i];
        if (m != ~0ull) atomicMin(reinterpret_cast<unsigned long long*>(&s_.min_key), (unsigned long long)m);
        __syncthreads();
        return s_.min_key;
      }
    }
    return prefix;  // all 64 bits fixed: the key itself
  }

  BlockSelectStorage& s_;
  int32_t k_;
};

}  // namespace flashindexer::sm90
