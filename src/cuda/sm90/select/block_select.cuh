// flashindexer sm_90a: block-wide exact streaming TopK (the device stream_select).
//
// Purpose: one CTA keeps the exact top K of a stream of rank keys (rank_key.h:
//   (float_key << 32) | (0xFFFFFFFF - position), unique, larger = better).
// Algorithm: keys above the threshold tau (a register copy) are appended to a shared-memory
//   buffer of kCap slots, each warp to its own slots (warp_slots.h: they interleave in
//   blocks of 32), so a warp places its keys by ballots alone (no shared atomic, no shuffle
//   chain). One barrier per push checks that every warp has room for the push; else
//   compact(): the K-th best key by radix select (radix_select.cuh, shared with the fused
//   operator; each warp first zeroes its slots past its count, 0 being no rank key, so the
//   select reads the buffer as one array), tau rises to it, and the K best move to the
//   buffer's prefix [0, K), which is an even share of every warp's first slots. Exact and
//   bounded by construction. finish() reads the warps' slots in warp order and orders the
//   final min(K, n) keys: by position through a bitmap of the window (each key's rank is a
//   popcount prefix; no sort), or by rank (cub::BlockRadixSort).
// Threads: kThreads (a template parameter: 512 in most kernels, 1024 in the grid select's
//   finish), all do every phase (no warp specialisation).
// Shared memory: kCap * 8 candidates (the sort and the bitmap alias them) + 8 KiB histogram
//   + scalars: 88 KiB at 512 threads (two CTAs per SM), 152 KiB at 1024.
#pragma once

#include <cub/block/block_radix_sort.cuh>
#include <cstdint>

#include "core/rank_key.h"
#include "cuda/sm90/common/diagnostics.h"
#include "cuda/sm90/select/bitmap_order.cuh"
#include "cuda/sm90/select/radix_select.cuh"
#include "cuda/sm90/select/warp_slots.h"

namespace flashindexer::sm90 {


inline constexpr int kMaxK = 2048;

// The sizes of a BlockSelector of kThreads threads.
template <int kThreads>
struct BlockShape {
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTile = kThreads * 4;          // keys per push_tile()
  static constexpr int kCap = kMaxK + 4 * kTile;       // candidate slots
  static constexpr int kWarpSlots = kCap / kWarps;     // each warp's: kMaxK / kWarps + 512
  static constexpr int kSortItems = kMaxK / kThreads;  // keys per thread in finish()
  // After a compaction warp 0 holds the most slots, at most kMaxK / kWarps (kMaxK is a
  // multiple of 32 kWarps); the rest is room for any push of up to 16 keys per lane.
  static_assert(kMaxK % (32 * kWarps) == 0 && kWarpSlots - kMaxK / kWarps == 16 * 32);
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
  uint32_t count;      // keys held, all warps
  uint32_t max_count;  // the most slots any warp has filled
};

template <int kThreads>
class BlockSelector {
 public:
  static constexpr int kWarps = BlockShape<kThreads>::kWarps;
  static constexpr int kTile = BlockShape<kThreads>::kTile;
  static constexpr int kCap = BlockShape<kThreads>::kCap;
  static constexpr int kWarpSlots = BlockShape<kThreads>::kWarpSlots;
  static constexpr int kSortItems = BlockShape<kThreads>::kSortItems;
  using Storage = BlockSelectStorage<kThreads>;
  using Select = RadixSelect<kThreads, CtaSync>;
  using Slots = WarpSlots<kWarps>;

  __device__ BlockSelector(Storage& s, int32_t k) : s_(s), k_(k), mine_(s.cand + threadIdx.x / 32 * 32) {
    if (threadIdx.x == 0) {
      s_.tau = 0;
      s_.count = 0;
      s_.max_count = 0;
    }
    __syncthreads();
  }

  // Pushes up to 4 rank keys per thread (valid[i] false = absent). Block-wide call.
  __device__ void push_tile(const uint64_t (&rk)[4], const bool (&valid)[4]) {
    make_room(4);
    bool pass[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) pass[i] = valid[i] && rk[i] > tau_;
    append(pass, [&](int i) { return rk[i]; });
  }

  // Pushes kU float4 of scores per thread: v[u] holds positions pos[u] .. pos[u] + 3 (ok[u]
  // false = absent), those whose float key keep() accepts. One warp vote of the raw order
  // bits against tau's score skips the push for most warps of a long stream; only the
  // others build rank keys. Returns whether any present score was NaN. Block-wide call.
  template <int kU, class Keep>
  __device__ bool push_vectors(const float4 (&v)[kU], const int32_t (&pos)[kU], const bool (&ok)[kU], Keep&& keep) {
    make_room(4 * kU);
    const uint32_t tau_hi = uint32_t(tau_ >> 32);
    uint32_t raw[4 * kU];
    bool maybe = false, nan = false;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const float f[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        raw[4 * u + j] = ordered_bits(f[j]);  // >= float_key (rank_key.h)
        nan |= ok[u] && ordered_bits_nan(raw[4 * u + j]);
        maybe |= ok[u] && raw[4 * u + j] >= tau_hi;
      }
    }
    if (__ballot_sync(0xffffffffu, maybe) == 0 || FI_TOPK_DIAG_VOTE_ONLY) return nan;
    uint64_t rk[4 * kU];
    bool pass[4 * kU];
#pragma unroll
    for (int i = 0; i < 4 * kU; ++i) {
      const uint32_t key = key_of_ordered_bits(raw[i]);
      rk[i] = (uint64_t(key) << 32) | (0xFFFFFFFFu - uint32_t(pos[i / 4] + i % 4));
      pass[i] = ok[i / 4] && rk[i] > tau_ && keep(key);
    }
    append(pass, [&](int i) { return rk[i]; });
    return nan;
  }

  // Threshold guess from a sample of the stream: tau := (need-th best sample) - 1.
  // Only a guess: the caller verifies that at least K keys passed it (reduce() == K)
  // and otherwise reset()s and streams again without it. The first push of the selector.
  __device__ void guess(const uint64_t (&sample)[4], uint32_t need) {
    const bool all[4] = {true, true, true, true};
    push_tile(sample, all);
    __syncthreads();
    const uint32_t ext = extent();
    clear_unused(ext);
    const uint64_t kth = Select::kth(s_.select, s_.cand, ext, need, threadIdx.x);
    reset(kth - 1);
  }

  // A new K for what follows (the candidates held are kept): the grid select's finish first
  // keeps the best K - A ties, then adds the A keys known to rank above them.
  __device__ void set_k(int32_t k) { k_ = k; }

  // Empties the selector; tau becomes the given key.
  __device__ void reset(uint64_t tau = 0) {
    __syncthreads();
    if (threadIdx.x == 0) {
      s_.count = 0;
      s_.max_count = 0;
      s_.tau = tau;
    }
    wcount_ = 0;
    tau_ = tau;
    __syncthreads();
  }

  // Reduces to the min(K, n) best candidates (a compaction when n > K); returns that number.
  // More keys may be pushed after it.
  __device__ int32_t reduce() {
    __syncthreads();
    if (s_.count > uint32_t(k_)) compact();
    __syncthreads();
    return int32_t(s_.count);
  }

  // reduce(), then the candidates in candidates()[0, return) (a compaction that keeps every
  // key packs them there when pushes left them in the warps' slots). No pushes after it.
  __device__ int32_t gather() {
    const int32_t n = reduce();
    if (__syncthreads_or(wcount_ != Slots::prefix_share(uint32_t(n), threadIdx.x / 32))) compact();
    return n;
  }
  __device__ const uint64_t* candidates() const { return s_.cand; }

  // Every key held lies in candidates()[0, return), the rest of that range is 0 (no key):
  // the buffer as one array, for a reader in another CTA. No pushes after it.
  __device__ uint32_t expose() {
    __syncthreads();
    const uint32_t ext = extent();
    clear_unused(ext);
    return ext;
  }

  // Final selection and sort. Returns n = min(K, candidates); thread t holds
  // sorted entries [t * kSortItems, t * kSortItems + kSortItems) in out. Every candidate's
  // position lies in the window [start, start + len). Ascending position: a bitmap of the
  // window ranks each position (rank_by_bitmap) when it fits, else (and by rank) a radix
  // sort; pos_bits: every position is below 2^pos_bits - 1, so that sort needs pos_bits bits.
  // No pushes after it.
  __device__ int32_t finish(bool by_rank, uint64_t (&out)[kSortItems], int pos_bits, int64_t start, int64_t len) {
    const int32_t n = reduce();
    // Thread t takes keys [t kSortItems, (t + 1) kSortItems) of the warps' slots read in warp
    // order: first[w] = the keys of warps below w (the histogram is free here), so key idx is
    // slot idx - first[w] of the warp w with first[w] <= idx < first[w + 1].
    uint32_t* first = s_.select.hist;
    const uint32_t before = Select::exclusive_sum(s_.select, threadIdx.x, threadIdx.x % 32 == 0 ? wcount_ : 0u);
    if (threadIdx.x % 32 == 0) first[threadIdx.x / 32] = before;
    __syncthreads();
    bool outside = false;
#pragma unroll
    for (int i = 0; i < kSortItems; ++i) {
      const uint32_t idx = threadIdx.x * kSortItems + i;
      out[i] = 0ull;  // no key: sorts last in both orders below
      if (idx < uint32_t(n)) {
        const uint32_t w = Slots::warp_of(first, idx);
        out[i] = s_.cand[Slots::index(w, idx - first[w])];
        outside |= uint64_t(int64_t(rank_key_position(out[i])) - start) >= uint64_t(len);
      }
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
  // Ascending position without a sort (bitmap_order.cuh). Shared memory (inside cand):
  // sorted[kMaxK] keys, bits[words], prefix[words]. Entered after a barrier that ended every
  // read of cand.
  __device__ void rank_by_bitmap(uint64_t (&out)[kSortItems], int32_t n, int64_t start, int64_t len) {
    uint64_t* sorted = s_.cand;
    uint32_t* bits = reinterpret_cast<uint32_t*>(s_.cand + kMaxK);
    BitmapOrder<Select>::place(out, start, len, bits, bits + kBitmapWords, sorted, s_.select,
                                                  int(threadIdx.x));
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kSortItems; ++i) {
      const int idx = threadIdx.x * kSortItems + i;
      out[i] = idx < n ? sorted[idx] : 0ull;
    }
  }

  // One barrier per push: compacts when a warp may lack room for per_lane keys per lane.
  __device__ void make_room(uint32_t per_lane) {
    if (__syncthreads_or(wcount_ + 32 * per_lane > uint32_t(kWarpSlots))) compact();
  }

  // Slot j of this warp (mine_ is its slot 0).
  __device__ uint64_t& slot(uint32_t j) const { return mine_[Slots::index(0, j)]; }

  // Buffer indices [0, extent()) hold every key. Read after a barrier that follows the pushes.
  __device__ uint32_t extent() const {
    const uint32_t e = Slots::extent(s_.max_count);
    return e < uint32_t(kCap) ? e : uint32_t(kCap);
  }

  // Appends the passing keys to this warp's slots, placed by one ballot per key index.
  template <int N, typename KeyOf>
  __device__ void append(const bool (&pass)[N], KeyOf&& key_of) {
    const uint32_t lower = (1u << (threadIdx.x & 31)) - 1u;
    uint32_t n = wcount_;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const uint32_t b = __ballot_sync(0xffffffffu, pass[i]);
      if (pass[i]) slot(n + __popc(b & lower)) = key_of(i);
      n += __popc(b);
    }
    if (n != wcount_) {
      if ((threadIdx.x & 31) == 0) {
        atomicAdd(&s_.count, n - wcount_);
        atomicMax(&s_.max_count, n);
      }
      wcount_ = n;
    }
  }

  // Zeroes this warp's slots from its count up to the extent, so that the buffer's first ext
  // entries are keys or 0 for the radix select; ends with a barrier. Slots past a warp's
  // count are not kept zero between selects: pushes write only below it.
  __device__ void clear_unused(uint32_t ext) {
    for (uint32_t j = wcount_ + (threadIdx.x & 31); j < ext / kWarps; j += 32) slot(j) = 0ull;
    __syncthreads();
  }

  // Keeps the min(K, n) best candidates, in the prefix [0, min(K, n)) of the buffer (an even
  // share of every warp's slots); when n > K, tau becomes the K-th best. Entered after a
  // barrier that follows the pushes.
  __device__ void compact() {
    const uint32_t n = s_.count, ext = extent();
    clear_unused(ext);  // its barrier: count read before Select::compact rewrites it
    uint64_t kth = 1;  // keeps every key (rank keys are > 0)
    if (n > uint32_t(k_)) {
      kth = Select::kth(s_.select, s_.cand, ext, uint32_t(k_), threadIdx.x);
      if (threadIdx.x == 0) s_.tau = kth;
    }
    Select::compact(s_.cand, ext, kth, &s_.count, threadIdx.x);
    const uint32_t kept = s_.count;
    wcount_ = Slots::prefix_share(kept, threadIdx.x / 32);
    __syncthreads();  // every thread read count before thread 0 writes max_count
    if (threadIdx.x == 0) s_.max_count = Slots::prefix_share(kept, 0);
    tau_ = s_.tau;
    __syncthreads();
  }

  Storage& s_;
  int32_t k_;
  uint64_t* mine_;       // cand + 32 * this warp's index: its slot 0
  uint32_t wcount_ = 0;  // slots this warp has filled (the same in all its lanes)
  uint64_t tau_ = 0;     // s_.tau as of the last barrier that changed it
};

}  // namespace flashindexer::sm90
