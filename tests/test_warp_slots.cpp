// The candidate-buffer layout of the GPU's BlockSelector (src/cuda/sm90/select/warp_slots.h):
// the properties its compactions and its finish rely on, checked on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/sm90/select/warp_slots.h"

namespace {

using flashindexer::sm90::WarpSlots;

// A prefix [0, n) of the buffer is exactly slots [0, prefix_share(n, w)) of every warp w,
// and warp 0 holds the most: a packed compaction leaves counts the warps know without a scan.
template <int kWarps>
void check_prefixes(uint32_t cap) {
  using S = WarpSlots<kWarps>;
  for (uint32_t n = 0; n <= cap; n += (n < 4096 ? 1 : 61)) {
    std::vector<int> hits(cap + 32 * kWarps, 0);
    uint32_t total = 0, most = 0;
    for (uint32_t w = 0; w < kWarps; ++w) {
      const uint32_t share = S::prefix_share(n, w);
      most = std::max(most, share);
      total += share;
      for (uint32_t j = 0; j < share; ++j) ++hits.at(S::index(w, j));
    }
    ASSERT_EQ(total, n) << "W " << kWarps;
    ASSERT_EQ(most, S::prefix_share(n, 0)) << "n " << n;
    ASSERT_LE(most, (n + 32 * kWarps - 1) / (32 * kWarps) * 32) << "n " << n;
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n " << n << " entry " << i;
    for (uint32_t i = n; i < hits.size(); ++i) ASSERT_EQ(hits[i], 0) << "n " << n << " entry " << i;
  }
}

TEST(WarpSlots, APrefixOfTheBufferIsAnEvenShareOfEveryWarp) {
  check_prefixes<16>(2048 + 4 * 2048);  // 512 threads: kCap
  check_prefixes<32>(2048 + 4 * 4096);  // 1024 threads
}

// Slots [0, most) of every warp lie inside entries [0, extent(most)), each entry at most
// once, and fill them all when most is a multiple of 32.
TEST(WarpSlots, SlotsBelowTheMostFilledStayInsideTheExtent) {
  using S = WarpSlots<16>;
  for (uint32_t most : {1u, 31u, 32u, 33u, 100u, 640u}) {
    std::vector<int> hits(S::extent(most), 0);
    for (uint32_t w = 0; w < 16; ++w)
      for (uint32_t j = 0; j < most; ++j) {
        ASSERT_LT(S::index(w, j), S::extent(most)) << "most " << most;
        ++hits[S::index(w, j)];
      }
    const int full = int(std::count(hits.begin(), hits.end(), 1));
    EXPECT_EQ(std::count_if(hits.begin(), hits.end(), [](int h) { return h > 1; }), 0) << "most " << most;
    EXPECT_EQ(full, int(16 * most)) << "most " << most;
    if (most % 32 == 0) {
      EXPECT_EQ(full, int(hits.size())) << "most " << most;
    }
  }
}

// finish(): key idx of the warps' slots in warp order is slot idx - first[w] of warp
// warp_of(first, idx); every slot below each warp's count is read once, empty warps too.
template <int kWarps>
void check_warp_order(std::mt19937& rng) {
  using S = WarpSlots<kWarps>;
  std::uniform_int_distribution<uint32_t> count(0, 80);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint32_t> counts(kWarps), first(kWarps);
    for (auto& c : counts) c = trial % 3 == 0 && rng() % 2 ? 0 : count(rng);
    uint32_t total = 0;
    for (int w = 0; w < kWarps; ++w) {
      first[w] = total;
      total += counts[w];
    }
    std::vector<std::vector<int>> seen(kWarps);
    for (int w = 0; w < kWarps; ++w) seen[w].assign(counts[w], 0);
    for (uint32_t idx = 0; idx < total; ++idx) {
      const uint32_t w = S::warp_of(first.data(), idx);
      ASSERT_LT(w, uint32_t(kWarps));
      ASSERT_LT(idx - first[w], counts[w]) << "idx " << idx << " went to warp " << w;
      ++seen[w][idx - first[w]];
    }
    for (int w = 0; w < kWarps; ++w)
      for (int s : seen[w]) ASSERT_EQ(s, 1);
  }
}

TEST(WarpSlots, WarpOrderReadsEverySlotOnce) {
  std::mt19937 rng(7);
  check_warp_order<16>(rng);
  check_warp_order<32>(rng);
}

}  // namespace
