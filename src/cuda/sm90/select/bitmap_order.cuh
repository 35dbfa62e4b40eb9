// flashindexer sm_90a: ascending-position order of a row's selected keys without a sort.
//
// Purpose: the default output order (ascending position) of a row's min(K, n) rank keys
//   (rank_key.h; positions unique), for the selectors that end with the keys in registers:
//   block_select.cuh (TopK over logits) and fused_topk.cu's finish.
// Algorithm: one bit per position of the row's window [start, start + len), set by the keys
//   (shared atomicOr); an exclusive prefix of the set bits per 32-bit word (each thread
//   counts a run of words, a group-wide exclusive sum joins the runs); a key's index in
//   position order is the prefix of its word plus the set bits below it in that word, where
//   it is stored. Two barriers and the scan's one, against 6 barriers and a 66-stage
//   network for a bitonic sort of 2,048 keys.
// Threads: the group of Select (RadixSelect: Select::kGroupThreads threads synchronised by
//   Select::GroupSync; tid is the thread's index in it).
// Shared memory: the caller's: bits[words] and prefix[words], words = ceil(len / 32), and
//   the output array (it may alias where the keys came from once every read of it is over).
#pragma once

#include <cstdint>

#include "core/rank_key.h"

namespace flashindexer::sm90 {

template <class Select>
struct BitmapOrder {
  static constexpr int kThreads = Select::kGroupThreads;
  using Sync = typename Select::GroupSync;

  // out[the key's index in position order] = key, for every nonzero key (0: none). Every
  // key's position lies in [start, start + len). Entered by the whole group after a barrier
  // that ended every read of bits, prefix, out and the scan storage; the caller's next
  // barrier publishes out.
  template <int kItems>
  __device__ static void place(const uint64_t (&keys)[kItems], int64_t start, int64_t len, uint32_t* bits,
                               uint32_t* prefix, uint64_t* out, typename Select::Storage& scan, int tid) {
    const int words = int((len + 31) / 32);
    for (int i = tid; i < words; i += kThreads) bits[i] = 0;
    Sync::sync();
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (keys[i] != 0ull) {
        const uint32_t off = uint32_t(rank_key_position(keys[i]) - start);
        atomicOr(&bits[off >> 5], 1u << (off & 31));
      }
    Sync::sync();
    // Thread tid owns words [tid per, tid per + per): its set bits, then a group-wide scan.
    const int per = (words + kThreads - 1) / kThreads;
    const int w0 = tid * per;
    const int w1 = w0 + per < words ? w0 + per : words;
    uint32_t mine = 0;
    for (int w = w0; w < w1; ++w) mine += __popc(bits[w]);
    uint32_t before = Select::exclusive_sum(scan, tid, mine);
    for (int w = w0; w < w1; ++w) {
      prefix[w] = before;
      before += __popc(bits[w]);
    }
    Sync::sync();
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (keys[i] != 0ull) {
        const uint32_t off = uint32_t(rank_key_position(keys[i]) - start);
        out[prefix[off >> 5] + __popc(bits[off >> 5] & ((1u << (off & 31)) - 1u))] = keys[i];
      }
  }
};

}  // namespace flashindexer::sm90
