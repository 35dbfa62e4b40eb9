// The fused operator's sampled start (src/cuda/sm90/scorer/sampled_start.h), on the CPU: the tile
// order is a permutation whose first steps are spread evenly, and the guess holds (at least
// K keys at or above it) on random rows while keeping few more than K.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "cuda/plan/heuristics.h"
#include "cuda/sm90/scorer/sampled_start.h"

namespace {
using flashindexer::sm90::group_samples;
using flashindexer::sm90::guess_rank;
using flashindexer::sm90::SampleOrder;

// Which groups start with a sample (the host's repair flags and the kernel's tile order ask
// the same predicate): shared tiles always, alternate tiles (N = 256 that hold 2 K keys, and
// every N < 256) only in pairs.
TEST(SampledStart, SharedTilesAlwaysSampleAlternateTilesOnlyInPairs) {
  EXPECT_TRUE(group_samples(256, false, false));  // V3.2 prefill: shared tiles, steps of one tile
  EXPECT_TRUE(group_samples(256, false, true));
  EXPECT_TRUE(group_samples(256, true, true));    // V4 prefill: alternate tiles, pairs
  EXPECT_FALSE(group_samples(256, true, false));
  for (const int n : {32, 64, 128}) {             // GLM-5 prefill (N = 128), decode rows and pairs
    EXPECT_TRUE(group_samples(n, false, true)) << n;
    EXPECT_FALSE(group_samples(n, false, false)) << n;
  }
}

TEST(SampledStart, OrderIsAPermutationWithTheSampleFirst) {
  for (int32_t tiles : {1, 7, 48, 191, 192, 193, 1000, 1024, 3072, 4099, 65536, 65537})
    for (int32_t max_sample : {0, 1, 28, 48, 50}) {
      const SampleOrder o = SampleOrder::plan(tiles, max_sample);
      if (tiles < 4 * max_sample || max_sample == 0 || tiles > 65536) {
        EXPECT_EQ(o.sample, 0) << tiles << " " << max_sample;
      } else {
        EXPECT_EQ(o.sample, max_sample);
        EXPECT_GE(o.stride, 4);
      }
      std::vector<int> seen(size_t(tiles), 0);
      for (int32_t i = 0; i < tiles; ++i) {
        const int32_t t = o.tile(i);
        ASSERT_GE(t, 0) << tiles << " " << max_sample << " step " << i;
        ASSERT_LT(t, tiles) << tiles << " " << max_sample << " step " << i;
        ++seen[size_t(t)];
        if (i < o.sample) {
          EXPECT_EQ(t, i * o.stride);  // spread: one per block of stride tiles
        }
      }
      for (int32_t t = 0; t < tiles; ++t) ASSERT_EQ(seen[size_t(t)], 1) << "tile " << t << " of " << tiles;
      for (int32_t i = o.sample + 1; i < tiles; ++i) {  // the rest in increasing order
        EXPECT_GT(o.tile(i), o.tile(i - 1)) << tiles << " " << max_sample << " step " << i;
      }
    }
}

TEST(SampledStart, GuessRankHasAMarginAndStaysOffWhenTheSampleIsThin) {
  EXPECT_EQ(guess_rank(2048, 0, 65536), 0);
  EXPECT_EQ(guess_rank(512, 1024, 262144), 0);  // 2 sample keys expected above the K-th: no guess
  EXPECT_EQ(guess_rank(1024, 1792, 196608), 29);  // v4-pro 196,608: mean 9.3
  EXPECT_EQ(guess_rank(2048, 60000, 65536), 0);  // the guess would keep most of the sample
  const int32_t m = guess_rank(2048, 3072, 65536);  // fp8 K = 2048: 96 expected above the K-th
  EXPECT_GT(m, 96 + 5 * 10);
  EXPECT_LT(m, 96 + 7 * 10 + 2);
}

// Random rows, the sample of the fused order: the guess (the m-th best sample key) is at or
// below the K-th key in every trial, and the keys at or above it number < 4 K.
TEST(SampledStart, GuessHoldsOnRandomRows) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  struct Shape {
    int32_t k, sample, positions;
  };
  for (const Shape s : {Shape{2048, 48, 65536}, Shape{512, 28, 65536}, Shape{1024, 28, 49152}})
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> score(size_t(s.positions));
      for (float& v : score) v = normal(rng);
      const int32_t tiles = s.positions / 64;
      const SampleOrder o = SampleOrder::plan(tiles, s.sample);
      ASSERT_GT(o.sample, 0);
      std::vector<float> sample;
      for (int32_t j = 0; j < o.sample; ++j)
        for (int32_t p = 0; p < 64; ++p) sample.push_back(score[size_t(o.tile(j)) * 64 + size_t(p)]);
      const int32_t m = guess_rank(s.k, int64_t(sample.size()), s.positions);
      ASSERT_GT(m, 0) << s.k;
      std::nth_element(sample.begin(), sample.begin() + (m - 1), sample.end(), std::greater<float>());
      const float g = sample[size_t(m - 1)];
      const auto above = std::count_if(score.begin(), score.end(), [&](float v) { return v >= g; });
      EXPECT_GE(above, s.k) << "guess above the K-th key: K " << s.k << " trial " << trial;
      EXPECT_LT(above, 4 * s.k) << "guess too low to help: K " << s.k << " trial " << trial;
    }
}

TEST(SampledStart, SampleNeverCompactsAndTakesAVoteStep) {
  using flashindexer::cuda::fused_sample_tiles;
  EXPECT_EQ(fused_sample_tiles(2746, 2048, 64, 4), 36);  // fp8, K = 2048 (H200: cap 2,746): limit 2,490, 38 tiles
  EXPECT_EQ(fused_sample_tiles(3770, 2048, 64, 8), 48);  // limit 3,258
  EXPECT_EQ(fused_sample_tiles(2330, 512, 64, 8), 24);   // mxfp4, K = 512: limit 1,818, 28 tiles, a multiple of 8
  EXPECT_EQ(fused_sample_tiles(2048 + 512, 2048, 64, 4), 36);
  EXPECT_EQ(fused_sample_tiles(2048 + 256, 2048, 64, 4), 0);  // no room above K under the limit
  for (int32_t cap = 600; cap < 9000; cap += 53)
    for (int32_t every : {1, 2, 4, 8}) {
      const int32_t s = fused_sample_tiles(cap, 512, 64, every);
      EXPECT_EQ(s % every, 0);
      if (s > 0) {
        EXPECT_LE(int64_t(s) * 64, int64_t(cap) - every * 64) << cap << " " << every;
      }
    }
}

}  // namespace
