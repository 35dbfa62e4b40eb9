// flashindexer: E2M1 codes as signed 8-bit integers for the integer MMA (paged_scorer.cuh's
// mxfp4 prefill path), and the exact relu of its int32 dot products; callable on the host
// too (tests/test_e2m1_e5m2.cpp checks every 4-code word and shift, and relu_s8 over its
// whole range, in CI, without a GPU).
//
// Twice an E2M1 value is an integer: magnitudes {0, 1, 2, 3, 4, 6, 8, 12} for codes 0..7,
// bit 3 the sign (code 8, -0, gives 0). A block of a vector whose UE8M0 exponent lies
// `shift` above the vector's least block exponent is stored as those integers << shift;
// with shift <= 3 every value fits s8 (|v| <= 96) and a 128-long dot product of two such
// vectors fits an int32 exactly (128 x 96 x 96 < 2^21). A byte permute through an 8-entry
// table of magnitudes, one through the negated table, and a third for the signs selects
// between them: 7 integer ops per 4 codes.
#pragma once

#include <cstdint>
#include <cstring>

#include "e2m1_e5m2.h"

namespace flashindexer::sm90 {

inline constexpr uint32_t kS8MaxShift = 3;

struct S8Lut {
  uint32_t lo, hi;    // bytes: magnitudes of codes 0..3, 4..7, times 2^shift
  uint32_t nlo, nhi;  // the same, negated (two's complement bytes)
};

// No table byte is 0 except byte 0 of lo, so adding 1 to each complemented byte carries
// nowhere once byte 0 is left out (and cleared).
FI_HD S8Lut s8_lut(uint32_t shift) {
  const uint32_t lo = 0x03020100u << shift, hi = 0x0C080604u << shift;
  return {lo, hi, (~lo + 0x01010100u) & 0xFFFFFF00u, ~hi + 0x01010101u};
}

// Four E2M1 codes (the low 16 bits of `codes`, code i in nibble i) to four s8 bytes.
FI_HD uint32_t e2m1x4_to_s8(uint32_t codes, const S8Lut& t) {
  const uint32_t sel = codes & 0x7777;
  const uint32_t pos = byte_permute(t.lo, t.hi, sel), neg = byte_permute(t.nlo, t.nhi, sel);
  const uint32_t sign = byte_permute(0u, 0xFFFFFFFFu, (codes & 0x8888) >> 1);
  return (pos & ~sign) | (neg & sign);
}

// relu of an exact int32 |a| < 2^22, as fp32 and exact: a added to the bits of 1.5 x 2^23
// (whose ulp is 1) and floored there (one VIADDMNMX), minus 1.5 x 2^23 (one FADD). The
// integer chain's dot products stay below 128 x 96^2 < 2^21.
FI_HD float relu_s8(int32_t a) {
  constexpr int32_t kMagic = 0x4B400000;  // 12582912.0f
#if defined(__CUDA_ARCH__)
  return __int_as_float(max(a + kMagic, kMagic)) - 12582912.0f;
#else
  const int32_t bits = a + kMagic > kMagic ? a + kMagic : kMagic;
  float f;
  std::memcpy(&f, &bits, 4);
  return f - 12582912.0f;
#endif
}

}  // namespace flashindexer::sm90
