// flashindexer: the candidate-buffer layout of block_select.cuh, callable on the host too
// (tests/test_warp_slots.cpp checks it in CI, without a GPU).
//
// Each of W warps appends to its own slots; slot j of warp w is buffer entry
//   (j / 32) * 32 W + 32 w + j % 32,
// so the warps' slots interleave in blocks of 32 entries. Two properties carry the selector:
// a prefix [0, n) of the buffer is exactly slots [0, prefix_share(n, w)) of every warp w (a
// compaction that packs the kept keys into [0, n) leaves each warp a count it knows without
// a scan, and warp 0 the most, at most ceil(n / 32 W) * 32), and the warps' slots [0, c_w),
// taken in warp order, index every key once (finish() reads key i of that order).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace flashindexer::sm90 {

template <int kWarps>
struct WarpSlots {
  static_assert(kWarps > 0 && (kWarps & (kWarps - 1)) == 0);
  // Buffer entry of slot j of warp w.
  FI_HD static constexpr uint32_t index(uint32_t w, uint32_t j) { return j + (j & ~31u) * (kWarps - 1) + 32 * w; }

  // The slots of warp w in the prefix [0, n) of the buffer.
  FI_HD static constexpr uint32_t prefix_share(uint32_t n, uint32_t w) {
    const uint32_t blocks = n / 32;
    const uint32_t whole = w < blocks ? (blocks - 1 - w) / kWarps + 1 : 0;
    return 32 * whole + (blocks % kWarps == w ? n % 32 : 0);
  }

  // The warp that holds key idx of the warps' slots read in warp order, given first[w] = the
  // keys of the warps below w (first[0] = 0 <= idx < the keys of all warps): the largest w
  // with first[w] <= idx; the key is its slot idx - first[w]. kWarps is a power of two.
  FI_HD static uint32_t warp_of(const uint32_t* first, uint32_t idx) {
    uint32_t w = 0;
    for (uint32_t step = kWarps / 2; step > 0; step /= 2)
      if (first[w + step] <= idx) w += step;
    return w;
  }

  // Buffer entries [0, extent) hold slots [0, most) of every warp.
  FI_HD static constexpr uint32_t extent(uint32_t most) { return (most + 31) / 32 * (32 * kWarps); }
};

}  // namespace flashindexer::sm90
