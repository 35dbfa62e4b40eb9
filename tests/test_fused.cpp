// The fused operator against dense logits + TopK over logits (bit for bit) on every
// generator, and the dense scores against the fp64 oracle (CONTRACT §4).
#include <limits>

#include "oracle/fp64_oracle.h"
#include "test_util.h"

namespace fit {
namespace {

struct GenCase {
  Generator gen;
  CacheFormat format;
};

void PrintTo(const GenCase& c, std::ostream* os) { *os << to_string(c.gen) << "/" << to_string(c.format); }

std::string name_of(const ::testing::TestParamInfo<GenCase>& info) {
  std::string n = std::string(to_string(info.param.gen)) + "_" + to_string(info.param.format);
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

std::vector<GenCase> all_cases() {
  std::vector<GenCase> v;
  for (Generator g : kAllGenerators)
    for (CacheFormat f : {CacheFormat::kMxfp4, CacheFormat::kFp8E4M3}) v.push_back({g, f});
  return v;
}

class EveryGenerator : public ::testing::TestWithParam<GenCase> {};

TEST_P(EveryGenerator, FusedBitIdenticalToDenseThenTopK) {
  for (OutputOrder order : {OutputOrder::kPosition, OutputOrder::kRank}) {
    SyntheticSpec s = small_spec(GetParam().gen, GetParam().format);
    s.order = order;
    s.accuracy = order == OutputOrder::kRank ? ScoreAccuracy::kExact : ScoreAccuracy::kProduction;
    s.weight_type = order == OutputOrder::kRank ? WeightType::kBF16 : WeightType::kF32;
    const HostProblem p = make(s);
    const HostResults f = fused(p), d = dense_topk(p, true);
    EXPECT_EQ(first_difference(f, d), "") << "order " << int(order);
    expect_oracle_selection(p, d, f);
    for (int32_t c : f.counts) EXPECT_EQ(c, s.k);  // every row is long
  }
}

// Each score mode's bound (CONTRACT §4), production (the default) and exact.
class EveryGeneratorAndMode : public ::testing::TestWithParam<std::tuple<GenCase, ScoreAccuracy>> {};

std::string mode_name_of(const ::testing::TestParamInfo<std::tuple<GenCase, ScoreAccuracy>>& param) {
  return name_of({std::get<0>(param.param), param.index}) + "_" + to_string(std::get<1>(param.param));
}

TEST_P(EveryGeneratorAndMode, ScoresWithinTheModesBoundOfTheFp64Oracle) {
  const auto [c, accuracy] = GetParam();
  SyntheticSpec s = small_spec(c.gen, c.format);
  s.rows = 4;
  s.context = 300;
  s.accuracy = accuracy;
  const double bound = score_error_bound(accuracy);
  const HostProblem p = make(s);
  const IndexerProblem v = p.view();
  const HostResults d = dense_topk(p, true);
  int64_t checked = 0;
  for (int64_t r = 0; r < p.rows(); ++r) {
    const oracle::Window w = oracle::window(v.rows, r);
    for (int64_t col = 0; col < p.max_context; ++col) {
      const float got = d.logits[size_t(r * d.logits_width + col)];
      if (col < w.start || col >= w.end) {
        ASSERT_EQ(got, -std::numeric_limits<float>::infinity()) << r << "," << col;
        continue;
      }
      const oracle::Exact e = oracle::score(v, r, col);
      if (std::isnan(e.score)) {  // NaN / inf inputs (specials): same class of result
        EXPECT_TRUE(std::isnan(got)) << r << "," << col;
        continue;
      }
      if (std::isinf(e.score)) {
        EXPECT_EQ(double(got), e.score) << r << "," << col;
        continue;
      }
      ASSERT_LE(std::fabs(double(got) - e.score), bound * e.m) << r << "," << col << " exact " << e.score;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Generators, EveryGenerator, ::testing::ValuesIn(all_cases()), name_of);
INSTANTIATE_TEST_SUITE_P(Generators, EveryGeneratorAndMode,
                         ::testing::Combine(::testing::ValuesIn(all_cases()),
                                            ::testing::Values(ScoreAccuracy::kProduction, ScoreAccuracy::kExact)),
                         mode_name_of);

// wide_range is built to catch an accumulator that drops small products beside a large one
// (docs/experiments.md): in every 32-element block of a scored fp8 cell with a positive dominant
// element, one product is 448^2 and the 31 others are positive and below 2^-13 of it, and
// those 31 weigh more than 10 x 2e-4 of M, so losing them breaks CONTRACT §4 tenfold.
TEST(Generators, WideRangeHidesContractBreakingSmallProducts) {
  SyntheticSpec s = small_spec(Generator::kWideRange, CacheFormat::kFp8E4M3);
  s.rows = 3;
  s.context = 200;
  const HostProblem p = make(s);
  const IndexerProblem v = p.view();
  int64_t dominant = 0, checked = 0;
  for (int64_t r = 0; r < p.rows(); ++r) {
    const oracle::Window w = oracle::window(v.rows, r);
    for (int64_t c = w.start; c < w.end; ++c) {
      const uint8_t* kv = oracle::key_bytes(v, r, c).values;
      ++checked;
      if (oracle::e4m3(kv[0]) < 0) continue;  // a negative dominant element: relu gives 0
      ++dominant;
      double small = 0, big = 0;
      for (int h = 0; h < v.queries.num_heads; ++h) {
        const uint8_t* qv = oracle::query_bytes(v, r, h);
        for (int d = 0; d < 128; ++d) {
          const double prod = oracle::e4m3(qv[d]) * oracle::e4m3(kv[d]);
          if (d % 32 == 0) {
            ASSERT_EQ(prod, 448.0 * 448.0) << r << "," << c << " head " << h;
            big += prod;
          } else {
            ASSERT_GT(prod, 0.0) << r << "," << c;
            ASSERT_LT(prod, 448.0 * 448.0 * 0x1p-13) << r << "," << c << " d " << d;
            small += prod;
          }
        }
      }
      // The weights are |w| and the key scale is common to every product, so the share of
      // the small products in M is this ratio of sums.
      EXPECT_GT(small / (big + small), 10 * 2e-4) << r << "," << c;
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(dominant, checked / 2);
}

TEST(Fused, ProductionTopKsOnLongRows) {
  for (int32_t k : {512, 1024, 2048, 5}) {
    SyntheticSpec s = small_spec(Generator::kStructured);
    s.k = k;
    s.context = k + 700;
    s.rows = 3;
    s.requests = 1;
    s.num_heads = k == 1024 ? 32 : 64;
    const HostProblem p = make(s);
    const HostResults f = fused(p), d = dense_topk(p, true);
    EXPECT_EQ(first_difference(f, d), "") << k;
    expect_oracle_selection(p, d, f);
    for (int32_t c : f.counts) EXPECT_EQ(c, k);
  }
}

TEST(Fused, DecodeNextN1To4) {
  for (int next_n = 1; next_n <= 4; ++next_n) {
    SyntheticSpec s = small_spec(Generator::kGaussian, next_n % 2 ? CacheFormat::kMxfp4 : CacheFormat::kFp8E4M3);
    s.form = RowForm::kDecode;
    s.requests = 3;
    s.next_n = next_n;
    s.context = 500;
    s.k = 128;
    const HostProblem p = make(s);
    const HostResults f = fused(p), d = dense_topk(p, true);
    EXPECT_EQ(first_difference(f, d), "") << next_n;
    expect_oracle_selection(p, d, f);
    ASSERT_EQ(f.rows, 3 * next_n);
    for (int b = 0; b < 3; ++b)
      for (int n = 0; n < next_n; ++n) {
        const int64_t len = p.context_lens[size_t(b)] - (next_n - 1 - n);
        EXPECT_EQ(f.counts[size_t(b * next_n + n)], std::min<int64_t>(128, len));
        // The window is [0, len): the last row of a request may select its last position.
        for (int32_t i = 0; i < f.counts[size_t(b * next_n + n)]; ++i)
          EXPECT_LT(f.positions[size_t((b * next_n + n) * 128 + i)], len);
      }
  }
}

// All q and k values 1.0, scales 2^0, weights 1: every score is exactly 128 * 64.
TEST(Fused, ExactConstantCase8192AndFirstKPositions) {
  for (CacheFormat f : {CacheFormat::kMxfp4, CacheFormat::kFp8E4M3}) {
    SyntheticSpec s = small_spec(Generator::kGaussian, f);
    s.rows = 2;
    s.requests = 1;
    HostProblem p = make(s);
    const KvCache cache = p.view().cache;
    uint8_t values[kHeadDim], scale4[4];
    const float one = 1.0f;
    if (f == CacheFormat::kMxfp4) {
      std::fill(values, values + 64, uint8_t{0x22});
      std::fill(scale4, scale4 + 4, uint8_t{127});
      std::fill(p.q.begin(), p.q.end(), uint8_t{0x22});
      std::fill(p.q_scale.begin(), p.q_scale.end(), uint8_t{127});
    } else {
      std::fill(values, values + kHeadDim, uint8_t{0x38});
      std::memcpy(scale4, &one, 4);
      std::fill(p.q.begin(), p.q.end(), uint8_t{0x38});
    }
    for (int64_t pos = 0; pos < p.max_context; ++pos) {
      const PageToken pt = locate(cache.pages, 0, pos);
      store_key_bytes(cache, p.pool.data(), pt.page, pt.token, values, scale4);
    }
    for (int64_t i = 0; i < p.rows() * p.num_heads; ++i) std::memcpy(&p.weights[size_t(i) * 4], &one, 4);
    const HostResults d = dense_topk(p, true);
    const HostResults r = fused(p);
    EXPECT_EQ(first_difference(r, d), "");
    for (int64_t row = 0; row < p.rows(); ++row) {
      for (int64_t c = p.window_start[size_t(row)]; c < p.window_end[size_t(row)]; ++c)
        ASSERT_EQ(d.logits[size_t(row * d.logits_width + c)], 8192.0f);
      for (int32_t i = 0; i < p.k; ++i) {
        EXPECT_EQ(r.positions[size_t(row * p.k + i)], p.window_start[size_t(row)] + i);
        EXPECT_EQ(r.scores[size_t(row * p.k + i)], 8192.0f);
      }
    }
  }
}

TEST(Fused, WeightScaleMultipliesEveryScore) {
  SyntheticSpec s = small_spec();
  HostProblem p = make(s);
  const HostResults base = dense_topk(p, true);
  p.weight_scale = 0.5f;  // a power of two: exactly half of every score
  const HostResults half = dense_topk(p, true);
  for (size_t i = 0; i < base.logits.size(); ++i)
    if (std::isfinite(base.logits[i])) {
      ASSERT_EQ(half.logits[i], base.logits[i] * 0.5f) << i;
    }
  EXPECT_EQ(base.positions, half.positions);
}

}  // namespace
}  // namespace fit
