// The GPU's E2M1 -> E5M2 fast path (src/cuda/sm90/e2m1_e5m2.h), checked exhaustively on the
// CPU: every 4-code word and every fast-path shift, against independent decoders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <cstdint>

#include "cuda/sm90/scorer/e2m1_e5m2.h"
#include "cuda/sm90/scorer/e2m1_s8.h"
#include "oracle/fp64_oracle.h"

namespace {
using namespace flashindexer::sm90;

// E5M2: 1 sign, 5 exponent bits (bias 15), 2 mantissa bits; exponent 0 is subnormal.
double e5m2(uint8_t b) {
  const int sign = b >> 7, e = (b >> 2) & 31, m = b & 3;
  if (e == 31) return m ? NAN : (sign ? -INFINITY : INFINITY);
  const double mag = e == 0 ? std::ldexp(m / 4.0, -14) : std::ldexp(1.0 + m / 4.0, e - 15);
  return sign ? -mag : mag;
}

TEST(E2m1ToE5m2, EveryCodeWordAndShiftIsExact) {
  int64_t checked = 0;
  for (uint32_t shift = 0; shift <= kE5m2FastMaxShift; ++shift) {
    const uint32_t lo = e5m2_lut_lo(shift), hi = e5m2_lut_hi(shift);
    for (uint32_t codes = 0; codes < 65536; ++codes) {
      const uint32_t out = e2m1x4_to_e5m2(codes, lo, hi);
      for (int i = 0; i < 4; ++i) {
        const uint8_t nibble = (codes >> (4 * i)) & 0xF;
        const uint8_t byte = (out >> (8 * i)) & 0xFF;
        const double want = std::ldexp(oracle::e2m1(nibble), -int(shift));
        const double got = e5m2(byte);
        ASSERT_EQ(got, want) << "code " << int(nibble) << " shift " << shift << " byte " << int(byte);
        ASSERT_EQ(std::signbit(got), (nibble & 8) != 0) << "sign of code " << int(nibble);  // -0 stays -0
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, int64_t(14) * 65536 * 4);
}

TEST(E2m1ToE5m2, EightCodesByBitMovesAreExactTimesTwoToMinus14) {
  // Every 16-bit half, in either half of the word, with the other half pseudo-random.
  int64_t checked = 0;
  uint32_t other = 0x9E3779B9u;
  for (uint32_t half = 0; half < 65536; ++half) {
    other = other * 1664525u + 1013904223u;
    for (int upper = 0; upper < 2; ++upper) {
      const uint32_t codes = upper ? (half << 16 | (other & 0xFFFF)) : ((other & 0xFFFF0000u) | half);
      uint32_t even = 0, odd = 0;
      e2m1x8_to_e5m2_lsb(codes, even, odd);
      for (int i = 0; i < 8; ++i) {
        const uint8_t nibble = (codes >> (4 * i)) & 0xF;
        const uint8_t byte = (((i % 2) ? odd : even) >> (8 * (i / 2))) & 0xFF;
        const double got = e5m2(byte);
        ASSERT_EQ(got, std::ldexp(oracle::e2m1(nibble), -14)) << "code " << int(nibble) << " byte " << int(byte);
        ASSERT_EQ(std::signbit(got), (nibble & 8) != 0) << "sign of code " << int(nibble);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, int64_t(65536) * 2 * 8);
}

// 2 v << shift as s8, codes 0..3 of a word in `first`, 4..7 in `second`, for every 16-bit code
// pattern in either half (beside another pattern in the other) and every shift.
TEST(E2m1ToS8, EveryEightCodeWordAndShiftIsTwiceTheValueShifted) {
  int64_t checked = 0;
  for (uint32_t shift = 0; shift <= kS8MaxShift; ++shift) {
    const MagnitudeLut lut = magnitude_lut(shift);
    for (uint32_t codes = 0; codes < 65536; ++codes) {
      const uint32_t other = (codes * 40503u + 0x1234u) & 0xFFFFu;
      for (const uint32_t word : {codes | other << 16, other | codes << 16}) {
        uint32_t first = 0, second = 0;
        e2m1x8_to_s8(word, lut, first, second);
        for (int i = 0; i < 8; ++i) {
          const uint8_t nibble = (word >> (4 * i)) & 0xF;
          const int8_t got = int8_t(((i < 4 ? first : second) >> (8 * (i % 4))) & 0xFF);
          const double want = std::ldexp(2.0 * oracle::e2m1(nibble), int(shift));
          ASSERT_EQ(double(got), want) << "code " << int(nibble) << " at " << i << " shift " << shift;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, int64_t(4) * 65536 * 2 * 8);
  uint32_t first = 0, second = 0;
  e2m1x8_to_s8(0xF0000007u, magnitude_lut(kS8MaxShift), first, second);
  EXPECT_EQ(int8_t(first & 0xFF), 96);          // the largest magnitude
  EXPECT_EQ(int8_t((second >> 24) & 0xFF), -96);
}

// prmt's sign fill, as the host emulation models it (PTX ISA, prmt default mode): a selector
// nibble with bit 3 set gives 0xFF or 0 by the selected byte's top bit.
TEST(E2m1ToS8, BytePermuteSignFillFollowsPrmt) {
  EXPECT_EQ(byte_permute_sign_fill(0x80221100u, 0x7766F544u, 0x7531), 0x77F58011u);
  EXPECT_EQ(byte_permute_sign_fill(0x80221100u, 0x7766F544u, 0xB9D8), 0xFF00FF00u);  // bytes 0, 5, 1, 3
  EXPECT_EQ(byte_permute_sign_fill(0x80221100u, 0x7766F544u, 0x0000FFFFu), 0x00000000u);  // byte 7 (0x77): 0
}

TEST(E2m1ToS8, TwiceTheReluOfTheIntegerChainIsExact) {
  // Every int32 the chain can produce (|a| < 2^22, a superset of 128 x 96^2 < 2^21).
  for (int32_t a = -(1 << 22); a < (1 << 22); ++a) {
    const float got = twice_relu_s8(a);
    if (got != 2.0f * float(a > 0 ? a : 0)) FAIL() << "twice_relu_s8(" << a << ") = " << got;
  }
  EXPECT_EQ(twice_relu_s8(128 * 96 * 96), float(2 * 128 * 96 * 96));
  EXPECT_FALSE(std::signbit(twice_relu_s8(-5)));  // +0, not -0
  EXPECT_FALSE(std::signbit(twice_relu_s8(0)));
}

// The integer path's representation on random vectors quantized as the model does (block
// exponents within 3 of their least): twice each E2M1 value shifted by e_b - e_min, as the
// permutes give it, times 2^(e_min - 127) / 2, is the dequantized value; so the int32 dot
// product of a key and a query head times 2^(ek_min + eq_min - 254) / 4 is the exact dot.
TEST(E2m1ToS8, ShiftedIntegersTimesTheLeastScaleAreTheDequantizedValues) {
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  struct Vec {
    uint8_t codes[128], exps[4];
    int8_t s8[128];
    double value[128];
  };
  auto make_vec = [&] {
    Vec v{};
    const int base = 100 + int(next() % 40);
    for (int b = 0; b < 4; ++b) v.exps[b] = uint8_t(base + int(next() % 4));
    const int emin = std::min(std::min(v.exps[0], v.exps[1]), std::min(v.exps[2], v.exps[3]));
    for (int b = 0; b < 4; ++b) {
      const MagnitudeLut lut = magnitude_lut(uint32_t(v.exps[b] - emin));
      for (int i = 0; i < 32; i += 8) {
        uint32_t codes = 0;
        for (int j = 0; j < 8; ++j) {
          const uint8_t c = uint8_t(next() & 0xF);
          v.codes[32 * b + i + j] = c;
          codes |= uint32_t(c) << (4 * j);
        }
        uint32_t out[2];
        e2m1x8_to_s8(codes, lut, out[0], out[1]);
        for (int j = 0; j < 8; ++j) v.s8[32 * b + i + j] = int8_t((out[j / 4] >> (8 * (j % 4))) & 0xFF);
      }
      for (int i = 0; i < 32; ++i)
        v.value[32 * b + i] = std::ldexp(oracle::e2m1(v.codes[32 * b + i]), int(v.exps[b]) - 127);
    }
    for (int d = 0; d < 128; ++d)
      EXPECT_EQ(std::ldexp(double(v.s8[d]), emin - 127 - 1), v.value[d]) << "element " << d;
    return std::make_pair(v, emin);
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const auto [k, ek] = make_vec();
    const auto [q, eq] = make_vec();
    int32_t dot = 0;
    double exact = 0;
    for (int d = 0; d < 128; ++d) {
      dot += int32_t(k.s8[d]) * int32_t(q.s8[d]);
      exact += k.value[d] * q.value[d];
    }
    ASSERT_LT(std::abs(dot), 128 * 96 * 96);
    ASSERT_EQ(std::ldexp(double(dot), ek + eq - 254 - 2), exact) << "trial " << trial;
  }
}

TEST(E2m1ToE5m2, BytePermuteFollowsPrmt) {
  // Byte i of the result is byte sel[4i..4i+3] of {lo, hi} (hi bytes are 4..7).
  EXPECT_EQ(byte_permute(0x33221100u, 0x77665544u, 0x7531), 0x77553311u);
  EXPECT_EQ(byte_permute(0x33221100u, 0x77665544u, 0x0000), 0x00000000u);
  EXPECT_EQ(byte_permute(0x33221100u, 0x77665544u, 0x4444), 0x44444444u);
}

}  // namespace
