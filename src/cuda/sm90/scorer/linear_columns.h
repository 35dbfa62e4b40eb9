// flashindexer: the production FP8 chain's linear columns (paged_scorer.cuh); callable on
// the host too (tests/test_linear_columns.cpp checks them in CI, without a GPU).
//
// 2 relu(x) = x + |x|, so twice a row's head sum splits into a linear part and an absolute
// part:  sum_h w_h 2 relu(x_h) = k . qbar + sum_h w_h |x_h|,  qbar[d] = sum_h w_h q[h][d].
// The absolute part costs one FFMA per accumulator (|x| is an operand modifier); the linear
// part is a dot product with one more query vector, so the tensor cores take it: qbar,
// scaled by 2^s (its largest magnitude to [128, 256)), as three e4m3 terms whose sum is
// within 2^-12 of it (each term rounds the remainder of the ones before it), three more MMA
// columns per row, their sum times 2^-s added to the head sum.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "cuda/sm90/scorer/e2m1_e5m2.h"  // FI_HD

namespace flashindexer::sm90 {

inline constexpr uint8_t kE4m3Nan = 0x7F;

// The value of an e4m3 (fn) code: NaN for 0x7F / 0xFF.
FI_HD float e4m3_value(uint8_t code) {
  const uint32_t e = (code >> 3) & 15u, m = code & 7u, sign = uint32_t(code >> 7) << 31;
  if (e == 15 && m == 7) return std::bit_cast<float>(0x7FC00000u);
  const float mag = e == 0 ? float(m) * 0x1p-9f : std::bit_cast<float>((e + 120u) << 23 | m << 20);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
}

// e4m3 (fn) of a finite |v| < 464, rounded to nearest even (as the hardware's cvt.rn).
FI_HD uint8_t e4m3_rn(float v) {
  const uint32_t b = std::bit_cast<uint32_t>(v), sign = (b >> 24) & 0x80u, a = b & 0x7FFFFFFFu;
  if (a < 0x3C800000u) {  // below 2^-6: subnormal codes, m 2^-9 (m = 8 is 2^-6, code 0x08)
#if defined(__CUDA_ARCH__)
    const float m = rintf(std::bit_cast<float>(a) * 512.0f);
#else
    const float m = std::nearbyint(std::bit_cast<float>(a) * 512.0f);
#endif
    return uint8_t(sign | uint32_t(m));
  }
  const uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;  // 3 fraction bits, ties to even
  return uint8_t(sign | (r - (120u << 3)));
}

// The scale exponent s of a row whose largest |qbar| has the bits `amax_bits` (>= 0x7F800000:
// not finite): 2^s maps it to [128, 256), clamped so that 2^s and 2^-s are normal floats.
FI_HD int linear_scale_exponent(uint32_t amax_bits) {
  const int e = int(amax_bits >> 23) - 127;  // floor(log2) of a normal amax
  const int s = 7 - e;
  return s > 126 ? 126 : s;
}

// The three e4m3 terms of v (v = qbar * 2^s, |v| < 256): t0 = rn(v), t1 = rn(v - t0),
// t2 = rn(v - t0 - t1); every difference is exact in fp32, so |v - sum| <= 2^-12 |v| + 2^-10.
struct E4m3Terms {
  uint8_t t[3];
};
FI_HD E4m3Terms e4m3_terms(float v) {
  E4m3Terms out;
  float r = v;
  for (int i = 0; i < 3; ++i) {
    out.t[i] = e4m3_rn(r);
    r -= e4m3_value(out.t[i]);
  }
  return out;
}

}  // namespace flashindexer::sm90
