// The GPU scorer's per-CTA pass plan (src/cuda/sm90/scorer/score_passes.h) on random groups:
// every in-window position of every live row inside the CTA's split is covered by exactly
// one pass, the one of its request; nothing else is planned.
#include <gtest/gtest.h>

#include <random>

#include "cuda/sm90/scorer/score_passes.h"

namespace {
using namespace flashindexer::sm90;

template <int kRows>
void check_random_groups(uint32_t seed) {
  std::mt19937 g(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    GroupRow rows[kRows];
    const int present = 1 + int(g() % kRows);
    for (int r = 0; r < kRows; ++r) {
      int32_t a = int32_t(g() % 1000), b = int32_t(g() % 1000);
      if (a > b) std::swap(a, b);
      if (g() % 8 == 0) b = a;  // empty window
      rows[r] = {r < present ? int64_t(100 + r) : -1, int32_t(g() % 3), a, b, g() % 10 == 0 ? 1u : 0u, 0u};
    }
    const int64_t c0 = int64_t(g() % 16) * 64, c1 = std::min<int64_t>(c0 + 64 * (1 + g() % 8), 1000);
    ScorePass passes[kRows];
    int32_t np = -1, nt = -1;
    plan_score_passes<kRows>(rows, c0, c1, passes, &np, &nt);
    ASSERT_GE(np, 0);
    ASSERT_LE(np, kRows);
    uint32_t seen = 0;
    int32_t tiles = 0;
    for (int p = 0; p < np; ++p) {
      const ScorePass& ps = passes[p];
      ASSERT_EQ(ps.tile_begin, tiles) << "trial " << trial;
      tiles += ps.tiles;
      ASSERT_EQ(seen & ps.mask, 0u) << "a row in two passes";
      seen |= ps.mask;
      ASSERT_NE(ps.mask, 0u);
      ASSERT_EQ(ps.first % flashindexer::cuda::kScorerTile, 0);
      if (ps.tiles > 0) {
        ASSERT_GE(ps.first, c0 / flashindexer::cuda::kScorerTile * flashindexer::cuda::kScorerTile);
        ASSERT_LT(ps.first + int64_t(ps.tiles - 1) * flashindexer::cuda::kScorerTile, c1) << "a tile past the split";
      }
      for (int r = 0; r < kRows; ++r) {
        if ((ps.mask >> r) & 1) {
          ASSERT_EQ(rows[r].request, ps.request);
        }
      }
    }
    ASSERT_EQ(nt, tiles);
    for (int r = 0; r < kRows; ++r) {
      const bool live = rows[r].row >= 0 && rows[r].status == 0 && rows[r].end > rows[r].start;
      ASSERT_EQ(((seen >> r) & 1) != 0, live) << "row " << r << " trial " << trial;
      if (!live) continue;
      int owner = -1;
      for (int p = 0; p < np; ++p)
        if ((passes[p].mask >> r) & 1) owner = p;
      if constexpr (kRows > 1) {  // one pass per request (kRows = 1: no other row; GCC's -Warray-bounds)
        for (int other = 0; other < kRows; ++other) {
          if (other != r && ((seen >> other) & 1) && rows[other].request == rows[r].request) {
            ASSERT_TRUE((passes[owner].mask >> other) & 1);
          }
        }
      }
      const ScorePass& ps = passes[owner];
      for (int64_t s = std::max<int64_t>(rows[r].start, c0); s < std::min<int64_t>(rows[r].end, c1); ++s)
        ASSERT_TRUE(s >= ps.first && s < ps.first + int64_t(ps.tiles) * flashindexer::cuda::kScorerTile)
            << "position " << s << " of row " << r << " not covered, trial " << trial;
    }
  }
}

TEST(ScorePasses, RandomGroupsOfFourRows) { check_random_groups<4>(11); }
TEST(ScorePasses, RandomGroupsOfEightRows) { check_random_groups<8>(12); }
TEST(ScorePasses, SingleRow) { check_random_groups<1>(13); }

}  // namespace
