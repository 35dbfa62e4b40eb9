// The total order (CONTRACT §3) and TopK over logits against an independent
// sort-based oracle on adversarial fp32 rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/rank_key.h"
#include "test_util.h"

namespace fit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Order, FloatKeyFollowsTheContractOrder) {
  const float ascending[] = {-kInf, -std::numeric_limits<float>::max(), -1.0f, -std::numeric_limits<float>::denorm_min(),
                             -0.0f, 0.0f, std::numeric_limits<float>::denorm_min(), 1.0f,
                             std::numeric_limits<float>::max(), kInf};
  for (size_t i = 0; i + 1 < std::size(ascending); ++i)
    EXPECT_LT(float_key(ascending[i]), float_key(ascending[i + 1])) << ascending[i];
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FBFFFFFu}) {
    EXPECT_EQ(float_key(std::bit_cast<float>(nan)), 0u) << std::hex << nan;
    EXPECT_LT(float_key(std::bit_cast<float>(nan)), float_key(-kInf));
  }
  for (float x : ascending) EXPECT_EQ(bits(key_to_float(float_key(x))), bits(x));
}

// The GPU's prefilter (BlockSelector::push_vectors) votes on ordered_bits: it must equal
// float_key on every non-NaN and never be below it, so that ordered_bits >= t keeps every key
// >= t; ordered_bits_nan and key_of_ordered_bits recover isnan and float_key from it.
TEST(Order, OrderedBitsIsFloatKeyWithoutNaNCanonicalization) {
  int64_t nans = 0;
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 251) {  // ~17M patterns over every exponent
    const float x = std::bit_cast<float>(uint32_t(b));
    if (std::isnan(x)) {
      ++nans;
      EXPECT_GE(ordered_bits(x), float_key(x));
    } else if (ordered_bits(x) != float_key(x)) {
      ADD_FAILURE() << std::hex << b << ": " << ordered_bits(x) << " vs " << float_key(x);
      break;
    }
    if (ordered_bits_nan(ordered_bits(x)) != std::isnan(x) || key_of_ordered_bits(ordered_bits(x)) != float_key(x)) {
      ADD_FAILURE() << std::hex << b << ": ordered_bits_nan / key_of_ordered_bits disagree with isnan / float_key";
      break;
    }
  }
  // The edges of the NaN ranges on both signs.
  for (uint32_t b : {0x7F800000u, 0x7F800001u, 0x7FFFFFFFu, 0xFF800000u, 0xFF800001u, 0xFFFFFFFFu, 0x80000000u, 0u})
    EXPECT_EQ(ordered_bits_nan(ordered_bits(std::bit_cast<float>(b))), std::isnan(std::bit_cast<float>(b)))
        << std::hex << b;
  EXPECT_GT(nans, 0);
  for (float x : {-kInf, -0.0f, 0.0f, kInf, -1.0f, 1.0f}) EXPECT_EQ(ordered_bits(x), float_key(x)) << x;
}

// The fused scorer's gate (paged_scorer.cuh, GatesPuts): a score whose ordered bits are below
// the high word of a row's threshold tau has a rank key below tau at every position, so
// dropping it before the put (which appends only keys > tau) changes nothing. Thresholds
// from real keys (the guess, compactions), NaN scores and equal high words included.
TEST(Order, ScoresBelowTheGateNeverBeatTheThreshold) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  const uint32_t specials[] = {0x7FC00000u, 0xFFC00000u, 0x7F800000u, 0xFF800000u, 0u, 0x80000000u, 0x3F800000u};
  int64_t gated = 0;
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t vb = i % 16 == 0 ? specials[(i / 16) % std::size(specials)] : any(rng);
    const float v = std::bit_cast<float>(vb);
    // tau: 0 (the start), or a key whose score is near v's (shared high words are the edge)
    const uint32_t tb = i % 5 == 0 ? vb ^ (any(rng) & 3u) : any(rng);
    const uint64_t tau = i % 97 == 0 ? 0ull : rank_key(std::bit_cast<float>(tb), int32_t(any(rng) >> 1));
    const int32_t pos = int32_t(any(rng) >> 1);
    if (ordered_bits(v) < uint32_t(tau >> 32)) {
      ++gated;
      ASSERT_LE(rank_key(v, pos), tau) << std::hex << vb << " " << tau;
    }
  }
  EXPECT_GT(gated, 100000);
}

// The fused scorer's float gate (paged_scorer.cuh, FI_FUSED_WARP_PUTS = 1): g = key_to_float(tau >> 32).
// A score below g never beats tau (dropped at once), a score above it always does (kept
// without the 64-bit compare), and a NaN or the start's tau 0 (g is NaN) lets the exact
// compare decide.
TEST(Order, FloatGateAgreesWithTheThreshold) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  const uint32_t specials[] = {0x7FC00000u, 0xFFC00000u, 0x7F800000u, 0xFF800000u, 0u, 0x80000000u, 0x3F800000u};
  EXPECT_TRUE(std::isnan(key_to_float(0u)));
  int64_t below = 0, above = 0;
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t vb = i % 16 == 0 ? specials[(i / 16) % std::size(specials)] : any(rng);
    const float v = std::bit_cast<float>(vb);
    // tau: 0 (the start), or a key whose score is near v's (shared high words are the edge)
    const uint32_t tb = i % 5 == 0 ? vb ^ (any(rng) & 3u) : any(rng);
    const uint64_t tau = i % 97 == 0 ? 0ull : rank_key(std::bit_cast<float>(tb), int32_t(any(rng) >> 1));
    const float g = key_to_float(uint32_t(tau >> 32));
    const int32_t pos = int32_t(any(rng) >> 1);
    if (std::isnan(v) || std::isnan(g)) {
      EXPECT_FALSE(v < g);  // passes the gate
      EXPECT_FALSE(v > g);  // and takes the exact compare
    } else if (v < g) {
      ++below;
      ASSERT_LE(rank_key(v, pos), tau) << std::hex << vb << " " << tau;
    } else if (v > g) {
      ++above;
      ASSERT_GT(rank_key(v, pos), tau) << std::hex << vb << " " << tau;
    }
  }
  EXPECT_GT(below, 100000);
  EXPECT_GT(above, 100000);
}

TEST(Order, RankKeyBreaksTiesByLowerPosition) {
  EXPECT_GT(rank_key(1.0f, 3), rank_key(1.0f, 4));
  EXPECT_GT(rank_key(std::nanf(""), 0), rank_key(-std::nanf(""), 1));
  EXPECT_GT(rank_key(-kInf, 100), rank_key(std::nanf(""), 0));
  EXPECT_EQ(rank_key_position(rank_key(2.0f, 2147483647)), 2147483647);
  EXPECT_EQ(rank_key_position(rank_key(2.0f, 0)), 0);
}

struct Case {
  int32_t k;
  int64_t width;
};

// Runs topk_over_logits on `rows` identical-width rows (windows with nonzero starts too).
TEST(TopKOverLogits, MatchesSortOracleOnAdversarialRows) {
  const Case cases[] = {{1, 50}, {7, 6}, {7, 7}, {7, 8}, {64, 1000}, {512, 511}, {512, 512}, {512, 513},
                        {512, 3000}, {1024, 2500}, {2048, 5000}};
  uint32_t seed = 1;
  for (Dist dist : kDists)
    for (const Case& c : cases)
      for (OutputOrder order : {OutputOrder::kPosition, OutputOrder::kRank}) {
        const int64_t rows = 3, width = c.width + 5;
        std::vector<float> logits;
        std::vector<int32_t> rb(rows, 0), ws(rows), we(rows);
        for (int64_t r = 0; r < rows; ++r) {
          const auto row = make_row(dist, width, seed++);
          logits.insert(logits.end(), row.begin(), row.end());
          ws[size_t(r)] = int32_t(r == 1 ? 5 : 0);          // a nonzero start
          we[size_t(r)] = int32_t(ws[size_t(r)] + c.width - (r == 2 ? 1 : 0));
        }
        TopKProblem p;
        p.logits = logits.data();
        p.logits_row_stride = width;
        p.rows.num_rows = rows;
        p.rows.num_requests = 1;
        p.rows.row_batch = rb.data();
        p.rows.window_start = ws.data();
        p.rows.window_end = we.data();
        p.rows.max_context = width;
        p.pages.page_size = 0;  // no page map
        p.k = c.k;
        p.order = order;
        HostResults out;
        ASSERT_TRUE(cpu_topk(p, false, &out).is_ok());

        for (int64_t r = 0; r < rows; ++r) {
          const int64_t s0 = ws[size_t(r)], s1 = we[size_t(r)];
          const float* row = logits.data() + r * width;
          const std::vector<int32_t> idx = oracle_topk(row, s0, s1, c.k, order);
          const auto count = int32_t(idx.size());
          SCOPED_TRACE(::testing::Message() << "dist " << int(dist) << " k " << c.k << " width " << c.width
                                            << " row " << r << " order " << int(order));
          ASSERT_EQ(out.counts[size_t(r)], count);
          bool any_nan = false;
          for (int64_t s = s0; s < s1; ++s) any_nan |= std::isnan(row[s]);
          EXPECT_EQ(out.status[size_t(r)], any_nan ? row_status::kHasNaN : 0u);
          for (int32_t i = 0; i < c.k; ++i) {
            const size_t o = size_t(r * c.k + i);
            if (i < count) {
              ASSERT_EQ(out.positions[o], idx[size_t(i)]) << "entry " << i;
              const float want = row[idx[size_t(i)]];
              if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(out.scores[o]));
              } else {
                EXPECT_EQ(bits(out.scores[o]), bits(want)) << "entry " << i;
              }
            } else {
              ASSERT_EQ(out.positions[o], -1);
              EXPECT_EQ(out.scores[o], -kInf);
            }
          }
        }
      }
}

}  // namespace
}  // namespace fit
