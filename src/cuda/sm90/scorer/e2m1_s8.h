// flashindexer: E2M1 codes as signed 8-bit integers for the integer MMA (paged_scorer.cuh's
// mxfp4 prefill path), and twice the exact relu of its int32 dot products; callable on the host
// too (tests/test_e2m1_e5m2.cpp checks every 4-code word and shift, and twice_relu_s8 over
// its whole range, in CI, without a GPU).
//
// Twice an E2M1 value is an integer: magnitudes {0, 1, 2, 3, 4, 6, 8, 12} for codes 0..7,
// bit 3 the sign (code 8, -0, gives 0). A block of a vector whose UE8M0 exponent lies
// `shift` above the vector's least block exponent is stored as those integers << shift;
// with shift <= 3 every value fits s8 (|v| <= 96) and a 128-long dot product of two such
// vectors fits an int32 exactly (128 x 96 x 96 < 2^21). Eight codes at a time: byte permutes
// of the codes through a table of magnitudes, in prmt's sign-fill mode, give the positive and
// the negative parts, and one add and one xor the s8 bytes: 11 integer ops per 8 codes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cuda/sm90/scorer/e2m1_e5m2.h"

namespace flashindexer::sm90 {

inline constexpr uint32_t kS8MaxShift = 3;

struct MagnitudeLut {
  uint32_t lo, hi;  // bytes: twice the E2M1 magnitudes of codes 0..3, 4..7, times 2^shift
};
FI_HD MagnitudeLut magnitude_lut(uint32_t shift) { return {0x03020100u << shift, 0x0C080604u << shift}; }

// Eight E2M1 codes (code i in nibble i) as s8 bytes 2 v << shift: `first` gets codes 0..3,
// `second` codes 4..7, in bytes 0..3. With the codes as selectors, a negative code (bit 3)
// fills its byte with a magnitude's top bit, 0 (all magnitudes are below 128): the permute of
// the codes is the positive part and that of the codes ^ 0x8..8 the negative part;
// 128 + pos - neg borrows nothing between bytes (|v| <= 96), and its top bit flipped is the
// s8 byte.
FI_HD void e2m1x8_to_s8(uint32_t codes, const MagnitudeLut& t, uint32_t& first, uint32_t& second) {
  const uint32_t flipped = codes ^ 0x88888888u;
  const uint32_t pos0 = byte_permute_sign_fill(t.lo, t.hi, codes), neg0 = byte_permute_sign_fill(t.lo, t.hi, flipped);
  const uint32_t pos1 = byte_permute_sign_fill(t.lo, t.hi, codes >> 16);
  const uint32_t neg1 = byte_permute_sign_fill(t.lo, t.hi, flipped >> 16);
  first = (0x80808080u + pos0 - neg0) ^ 0x80808080u;
  second = (0x80808080u + pos1 - neg1) ^ 0x80808080u;
}

// Twice the relu of an exact int32 |a| < 2^22, as fp32 and exact: a added to the bits of
// 1.5 x 2^23 (whose ulp is 1) and floored there (one VIADDMNMX), then 2 F - 3 x 2^23 (one
// FFMA, exact: an integer below 2^23). The integer chain's dot products stay below 128 x 96^2
// < 2^21. Twice: the head sums of every path carry a factor 2, halved with the key scale.
FI_HD float twice_relu_s8(int32_t a) {
  constexpr int32_t kMagic = 0x4B400000;  // 12582912.0f
#if defined(__CUDA_ARCH__)
  return fmaf(__int_as_float(max(a + kMagic, kMagic)), 2.0f, -25165824.0f);
#else
  const int32_t bits = a + kMagic > kMagic ? a + kMagic : kMagic;
  float f;
  std::memcpy(&f, &bits, 4);
  return std::fma(f, 2.0f, -25165824.0f);
#endif
}

}  // namespace flashindexer::sm90
