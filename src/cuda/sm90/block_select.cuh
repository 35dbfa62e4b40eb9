// flashindexer sm_90a: block-wide exact streaming TopK (the device stream_select).
//
// Purpose: one CTA keeps the exact top K of a stream of rank keys (rank_key.h:
//   (float_key << 32) | (0xFFFFFFFF - position), unique, larger = better).
// Algorithm: keys above the threshold tau are appended to a shared-memory buffer
//   of kCap keys (one warp-aggregated atomic per warp and tile, skipped when no lane
//   passes). When fewer than two tiles of room are left, compact(): the K-th best key
//   by radix select (radix_select.cuh, shared with the fused operator), tau rises to it
//   and exactly K keys are kept, in place. Exact and bounded by construction. finish()
//   orders the final min(K, n) keys: by position through a bitmap of the window (each
//   key's rank is a popcount prefix; no sort), or by rank (cub::BlockRadixSort).
// Threads: kThreads (a template parameter: 512 in most kernels, 1024 in the grid select's
//   finish), all do every phase (no warp specialisation).
// Shared memory: kCap * 8 candidates (the sort and the bitmap alias them) + 8 KiB histogram
//   + scalars: 88 KiB at 512 threads (two CTAs per SM), 152 KiB at 1024.
#pragma once

#include <cub/block/block_radix_sort.cuh>
#include <cstdint>

#include "../../core/rank_key.h"
#include "radix_select.cuh"
#include "warp_reserve.cuh"

namespace flashindexer::sm90 {

// FI_TOPK_PREFILTER (default 1; 0 = the rank-key path, same results): stream_logits feeds
// push_floats (topk_over_logits.cu): 2 instructions per order key, NaN found by a float
// compare, one vote per tile before any rank key. H200, 8,192 x 196,608, K = 1024:
// 3.82 -> 3.53 ms (bench/results/2026-11-29_prebuilt_ab_f961ac3.txt).
#ifndef FI_TOPK_PREFILTER
#define FI_TOPK_PREFILTER 1
#endif

// Experiment knob, not yet run on a GPU: FI_TOPK_GUESS_FLOOR=1 takes the sampled threshold
// guess from RadixSelect::floor_of_kth (usually one histogram pass) instead of the exact kth
// (the guess is 16% of a CTA at 64 x 65,536 and 10% in prefill: docs/perf.md, session 9).
#ifndef FI_TOPK_GUESS_FLOOR
#define FI_TOPK_GUESS_FLOOR 0
#endif

inline constexpr int kMaxK = 2048;

// The sizes of a BlockSelector of kThreads threads.
template <int kThreads>
struct BlockShape {
  static constexpr int kTile = kThreads * 4;          // keys per push_tile()
  static constexpr int kCap = kMaxK + 4 * kTile;       // candidate buffer (keys)
  static constexpr int kSortItems = kMaxK / kThreads;  // keys per thread in finish()
};

template <int kThreads>
struct BlockSelectStorage {
  using Sort = cub::BlockRadixSort<uint64_t, kThreads, BlockShape<kThreads>::kSortItems>;
  union {
    uint64_t cand[BlockShape<kThreads>::kCap];
    typename Sort::TempStorage sort;
  };
  typename RadixSelect<kThreads, CtaSync>::Storage select;
  uint64_t tau;
  uint32_t count;
};

template <int kThreads>
class BlockSelector {
 public:
  static constexpr int kTile = BlockShape<kThreads>::kTile;
  static constexpr int kCap = BlockShape<kThreads>::kCap;
  static constexpr int kSortItems = BlockShape<kThreads>::kSortItems;
  using Storage = BlockSelectStorage<kThreads>;
  using Select = RadixSelect<kThreads, CtaSync>;

  __device__ BlockSelector(Storage& s, int32_t k) : s_(s), k_(k) {
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

  // Pushes 4 consecutive scores per thread, positions pos0 .. pos0 + 3 (ok false = absent),
  // with raw[i] = ordered_bits(f[i]) >= float_key(f[i]) (equal but for NaNs): one warp vote
  // of the raw keys against tau's score skips the tile for most warps, and only the others
  // build rank keys. Block-wide call (FI_TOPK_PREFILTER).
  __device__ void push_floats(const float (&f)[4], const uint32_t (&raw)[4], int32_t pos0, bool ok) {
    make_room();
    const uint64_t tau = s_.tau;
    const uint32_t tau_hi = uint32_t(tau >> 32);
    const bool maybe = ok && (raw[0] >= tau_hi || raw[1] >= tau_hi || raw[2] >= tau_hi || raw[3] >= tau_hi);
    if (__ballot_sync(0xffffffffu, maybe) == 0) return;
    uint64_t rk[4];
    bool pass[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      rk[i] = rank_key(f[i], pos0 + i);
      pass[i] = ok && rk[i] > tau;
    }
    append(pass, [&](int i) { return rk[i]; });
  }

  // Threshold guess from a sample of the stream: tau := (need-th best sample) - 1.
  // Only a guess: the caller verifies that at least K keys passed it (reduce() == K)
  // and otherwise reset()s and streams again without it.
  __device__ void guess(const uint64_t (&sample)[4], uint32_t need) {
    const bool all[4] = {true, true, true, true};
    push_tile(sample, all);
    __syncthreads();
#if FI_TOPK_GUESS_FLOOR
    // A key at or below the need-th best sample, usually after one radix pass: the lower edge
    // of its digit bin once at most 2 need samples lie at or above that edge.
    const uint64_t kth = Select::floor_of_kth(s_.select, s_.cand, s_.count, need, 2 * need, threadIdx.x);
    reset(kth == 0 ? 0 : kth - 1);
#else
    const uint64_t kth = Select::kth(s_.select, s_.cand, s_.count, need, threadIdx.x);
    reset(kth - 1);
#endif
  }

  __device__ void reset(uint64_t tau = 0) {
    __syncthreads();
    if (threadIdx.x == 0) {
      s_.count = 0;
      s_.tau = tau;
    }
    __syncthreads();
  }

  // A new K for what follows (the candidates held are kept): the grid select's finish
  // first keeps the best K - A ties, then adds the A keys known to rank above them.
  __device__ void set_k(int32_t k) { k_ = k; }

  // Reduces to the min(K, n) best candidates, unsorted, in candidates()[0, return).
  __device__ int32_t reduce() {
    __syncthreads();
    if (s_.count > uint32_t(k_)) compact();
    __syncthreads();
    return int32_t(s_.count);
  }
  __device__ const uint64_t* candidates() const { return s_.cand; }

  // Final selection and sort. Returns n = min(K, candidates); thread t holds
  // sorted entries [t * kSortItems, t * kSortItems + kSortItems) in out. Every candidate's
  // position lies in the window [start, start + len). Ascending position: a bitmap of the
  // window ranks each position (rank_by_bitmap) when it fits, else (and by rank) a radix
  // sort; pos_bits: every position is below 2^pos_bits - 1, so that sort needs pos_bits bits.
  __device__ int32_t finish(bool by_rank, uint64_t (&out)[kSortItems], int pos_bits, int64_t start, int64_t len) {
    const int32_t n = reduce();
    bool outside = false;
#pragma unroll
    for (int i = 0; i < kSortItems; ++i) {
      const int idx = threadIdx.x * kSortItems + i;
      out[i] = idx < n ? s_.cand[idx] : 0ull;  // 0 sorts last in both orders below
      outside |= idx < n && uint64_t(int64_t(rank_key_position(out[i])) - start) >= uint64_t(len);
    }
    // The barrier also ends the reads of cand: the sort storage and the bitmap alias it.
    if (!by_rank && len <= kBitmapMaxLen && !__syncthreads_or(outside)) {
      rank_by_bitmap(out, n, start, len);
      return n;
    }
    __syncthreads();
    typename Storage::Sort sort(s_.sort);
    if (by_rank) {
      sort.SortDescending(out);
    } else {
      // low word = 0xFFFFFFFF - position: ascending position. Its bits from pos_bits up are
      // all ones, and its low pos_bits bits are nonzero, so padding (0) still sorts last.
      sort.SortDescending(out, 0, pos_bits);
    }
    return n;
  }

  // Longest window for rank_by_bitmap: past the kMaxK sorted keys, the candidate buffer
  // holds 2 (kCap - kMaxK) 32-bit words, one bitmap word and one prefix per 32 positions.
  static constexpr int kBitmapWords = kCap - kMaxK;
  static constexpr int64_t kBitmapMaxLen = int64_t(kBitmapWords) * 32;

  private:
  // Ascending position without a sort: one bit per window position, an exclusive prefix of
  // the set bits per 32-bit word, and each key's rank = the prefix of its word + the set bits
  // below it in that word. Shared memory (inside cand): sorted[kMaxK] keys, bits[words],
  // prefix[words]. Entered after a barrier that ended every read of cand.
  __device__ void rank_by_bitmap(uint64_t (&out)[kSortItems], int32_t n, int64_t start, int64_t len) {
    uint64_t* sorted = s_.cand;
    uint32_t* bits = reinterpret_cast<uint32_t*>(s_.cand + kMaxK);
    uint32_t* prefix = bits + kBitmapWords;
    const int words = int((len + 31) / 32);
    for (int i = threadIdx.x; i < words; i += kThreads) bits[i] = 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kSortItems; ++i)
      if (int(threadIdx.x) * kSortItems + i < n) {
        const uint32_t off = uint32_t(rank_key_position(out[i]) - start);
        atomicOr(&bits[off >> 5], 1u << (off & 31));
      }
    __syncthreads();
    // Thread t owns words [t * per, t * per + per): its set bits, then a block-wide scan.
    const int per = (words + kThreads - 1) / kThreads;
    const int w0 = int(threadIdx.x) * per;
    const int w1 = w0 + per < words ? w0 + per : words;
    uint32_t mine = 0;
    for (int w = w0; w < w1; ++w) mine += __popc(bits[w]);
    uint32_t before = Select::exclusive_sum(s_.select, threadIdx.x, mine);
    for (int w = w0; w < w1; ++w) {
      prefix[w] = before;
      before += __popc(bits[w]);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kSortItems; ++i)
      if (int(threadIdx.x) * kSortItems + i < n) {
        const uint32_t off = uint32_t(rank_key_position(out[i]) - start);
        sorted[prefix[off >> 5] + __popc(bits[off >> 5] & ((1u << (off & 31)) - 1u))] = out[i];
      }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kSortItems; ++i) {
      const int idx = threadIdx.x * kSortItems + i;
      out[i] = idx < n ? sorted[idx] : 0ull;
    }
  }

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
    uint32_t base = warp_reserve(mine, &s_.count);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (pass[i]) s_.cand[base++] = key_of(i);
  }

  // Keeps exactly the K best candidates; tau becomes the K-th best. Entered after a barrier.
  __device__ void compact() {
    const uint32_t n = s_.count;
    const uint64_t kth = Select::kth(s_.select, s_.cand, n, uint32_t(k_), threadIdx.x);
    if (threadIdx.x == 0) s_.tau = kth;
    Select::compact(s_.cand, n, kth, &s_.count, threadIdx.x);
  }

  Storage& s_;
  int32_t k_;
};

}  // namespace flashindexer::sm90
