// The production FP8 chain's linear columns (src/cuda/sm90/scorer/linear_columns.h), on the
// CPU: the e4m3 codec against the library's host codec, the three-term split's bound, the row
// scale, and the identity the GPU's head sums rest on, 2 sum_h w_h relu(x_h) = k . qbar +
// sum_h w_h |x_h|, within 2^-11 M with qbar in three e4m3 terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/sm90/scorer/linear_columns.h"
#include "flashindexer/quantize.h"

namespace {
using namespace flashindexer::sm90;

TEST(LinearColumns, E4m3ValueMatchesTheHostCodecOnEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float want = flashindexer::e4m3_to_float(uint8_t(c)), got = e4m3_value(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "code " << c;  // -0 (0x80) included
    }
  }
}

TEST(LinearColumns, E4m3RoundingMatchesTheHostCodec) {
  std::mt19937_64 rng(11);
  std::vector<float> xs;
  for (int c = 0; c < 256; ++c) {  // every code, and the midpoints around it (ties to even)
    const float v = flashindexer::e4m3_to_float(uint8_t(c));
    if (std::isnan(v) || std::fabs(v) > 448.0f) continue;
    xs.push_back(v);
    xs.push_back(std::nextafter(v, 0.0f));
    xs.push_back(std::nextafter(v, 1e9f));
    const float next = flashindexer::e4m3_to_float(uint8_t(c + 1));
    if ((c & 0x7F) < 0x7E && !std::isnan(next)) xs.push_back((v + next) * 0.5f);
  }
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-30, 8);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(mant(rng), ex(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    if (std::fabs(v) < 448.0f) xs.push_back(v);
  }
  for (float v : xs) ASSERT_EQ(e4m3_rn(v), flashindexer::float_to_e4m3(v)) << "x = " << v;
}

TEST(LinearColumns, ThreeTermsAreWithinTwoToTheMinusTwelve) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-40, 7);
  for (int i = 0; i < 500000; ++i) {
    const float v = float(std::ldexp(u(rng), ex(rng)));
    const E4m3Terms t = e4m3_terms(v);
    double sum = 0;
    for (uint8_t c : t.t) sum += double(e4m3_value(c));
    const double err = std::fabs(sum - double(v));
    ASSERT_LE(err, std::ldexp(std::fabs(double(v)), -12) + std::ldexp(1.0, -10)) << "v = " << v;
    ASSERT_LE(std::fabs(double(e4m3_value(t.t[0]))), 256.0) << "v = " << v;
  }
  // Values an e4m3 code holds come out whole in the first term.
  for (int c = 0; c < 256; ++c) {
    const float v = flashindexer::e4m3_to_float(uint8_t(c));
    if (std::isnan(v) || std::fabs(v) >= 256.0f) continue;
    const E4m3Terms t = e4m3_terms(v);
    EXPECT_EQ(e4m3_value(t.t[0]), v) << "code " << c;
    EXPECT_EQ(e4m3_value(t.t[1]), 0.0f) << "code " << c;
    EXPECT_EQ(e4m3_value(t.t[2]), 0.0f) << "code " << c;
  }
}

TEST(LinearColumns, RowScaleTakesTheLargestToOneTwentyEightUpToTwoFiftySix) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int e = -126; e <= 127; ++e) {
    const float amax = std::ldexp(mant(rng), e);
    if (!std::isfinite(amax)) continue;
    const int s = linear_scale_exponent(std::bit_cast<uint32_t>(amax));
    const double scaled = std::ldexp(double(amax), s);
    if (e >= -119) {
      EXPECT_GE(scaled, 128.0) << "amax 2^" << e;
      EXPECT_LT(scaled, 256.0) << "amax 2^" << e;
    } else {
      EXPECT_EQ(s, 126) << "amax 2^" << e;  // clamped: 2^s and 2^-s stay normal
    }
    EXPECT_TRUE(std::isnormal(std::ldexp(1.0f, s)) && std::isnormal(std::ldexp(1.0f, -s))) << s;
  }
  EXPECT_EQ(linear_scale_exponent(0u), 126);  // a row of zero weights
}

// One row: H heads of e4m3 queries, fp32 weights, keys of e4m3 values. The GPU's twice head
// sum is sum_h w_h |x_h| plus k . (t0 + t1 + t2) 2^-s; against 2 sum_h w_h relu(x_h) in fp64
// it must stay within 2^-11 M (x_h exact here: the MMA's own rounding is the oracle tests').
TEST(LinearColumns, LinearPlusAbsoluteIsTwiceTheReluSum) {
  std::mt19937_64 rng(14);
  std::normal_distribution<float> g(0.0f, 1.0f);
  constexpr int kH = 64, kD = 128;
  int checked = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const float wscale = std::ldexp(1.0f, int(rng() % 40) - 20);
    std::vector<uint8_t> q(kH * kD);
    std::vector<float> w(kH);
    for (auto& c : q) c = flashindexer::float_to_e4m3(g(rng) * (trial % 3 == 0 ? 100.0f : 1.0f));
    for (auto& x : w) x = g(rng) * wscale;
    std::vector<float> qbar(kD);
    uint32_t amax = 0;
    for (int d = 0; d < kD; ++d) {
      float v = 0.0f;
      for (int h = 0; h < kH; ++h) v = std::fma(w[h], e4m3_value(q[h * kD + d]), v);
      qbar[d] = v;
      amax = std::max(amax, std::bit_cast<uint32_t>(std::fabs(v)));
    }
    const int s = linear_scale_exponent(amax);
    std::vector<double> terms(kD);
    for (int d = 0; d < kD; ++d) {
      const E4m3Terms t = e4m3_terms(qbar[d] * std::ldexp(1.0f, s));
      terms[d] = double(e4m3_value(t.t[0])) + e4m3_value(t.t[1]) + e4m3_value(t.t[2]);
    }
    for (int key = 0; key < 16; ++key) {
      std::vector<double> k(kD);
      for (auto& v : k) v = flashindexer::e4m3_to_float(flashindexer::float_to_e4m3(g(rng) * 50.0f));
      double exact = 0, m = 0, abs_part = 0, lin = 0;
      for (int h = 0; h < kH; ++h) {
        double x = 0, xm = 0;
        for (int d = 0; d < kD; ++d) {
          x += double(e4m3_value(q[h * kD + d])) * k[d];
          xm += std::fabs(double(e4m3_value(q[h * kD + d])) * k[d]);
        }
        exact += 2.0 * double(w[h]) * std::max(x, 0.0);
        m += std::fabs(double(w[h])) * xm;
        abs_part += double(w[h]) * std::fabs(x);
      }
      for (int d = 0; d < kD; ++d) lin += k[d] * terms[d];
      const double got = abs_part + std::ldexp(lin, -s);
      ASSERT_LE(std::fabs(got - exact), std::ldexp(m, -11)) << "trial " << trial << " key " << key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 200 * 16);
}

}  // namespace
