// flashindexer: the fast E2M1 -> E5M2 rewrite of fp4_convert.cuh, callable on the host too
// (tests/test_e2m1_e5m2.cpp checks it exhaustively in CI, without a GPU).
//
// An E2M1 code times 2^-shift as an E5M2 byte, for shift <= 13 (every result normal):
// a byte permute through an 8-entry table of E5M2 magnitudes whose exponent fields are
// lowered by `shift`, and a second permute for the signs. e2m1x8_to_e5m2_lsb: eight codes
// at a fixed 2^-14 by bit moves (the scoring core's register-key path).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace flashindexer::sm90 {

inline constexpr uint32_t kE5m2FastMaxShift = 13;

// PTX prmt in its default mode over the selector's low 16 bits: byte i of the result is byte
// sel[4i..4i+2] of the pair {lo, hi}, or, with nibble bit 3 set, that byte's top bit filled
// across it (0xFF or 0).
FI_HD uint32_t byte_permute_sign_fill(uint32_t lo, uint32_t hi, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
  return r;
#else
  const uint64_t pair = uint64_t(hi) << 32 | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t c = (sel >> (4 * i)) & 15;
    uint32_t b = uint32_t((pair >> (8 * (c & 7))) & 0xFF);
    if (c & 8) b = (b & 0x80) ? 0xFF : 0;
    r |= b << (8 * i);
  }
  return r;
#endif
}

// The same for selectors whose nibbles are 0..7 (no sign fill): byte i of the result is
// byte sel[4i..4i+2] of the pair {lo, hi}.
FI_HD uint32_t byte_permute(uint32_t lo, uint32_t hi, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, sel);
#else
  return byte_permute_sign_fill(lo, hi, sel & 0x7777u);
#endif
}

// E5M2 magnitudes of E2M1 codes 0..3 {0, .5, 1, 1.5} and 4..7 {2, 3, 4, 6}, exponent - shift.
FI_HD uint32_t e5m2_lut_lo(uint32_t shift) { return 0x3E3C3800u - shift * 0x04040400u; }
FI_HD uint32_t e5m2_lut_hi(uint32_t shift) { return 0x46444240u - shift * 0x04040404u; }

// Four E2M1 codes (the low 16 bits of `codes`, code i in nibble i) to four E5M2 bytes.
FI_HD uint32_t e2m1x4_to_e5m2(uint32_t codes, uint32_t lut_lo, uint32_t lut_hi) {
  const uint32_t mag = byte_permute(lut_lo, lut_hi, codes & 0x7777);
  const uint32_t sgn = byte_permute(0u, 0x80808080u, (codes & 0x8888) >> 1);
  return mag | sgn;
}

// Eight E2M1 codes (code i in nibble i of `codes`) to E5M2 bytes worth the code's value times
// 2^-14, by bit moves alone: the byte (m << 1) | (sign << 7) of a magnitude code m = e1 e0 m0
// has exponent field e1 e0 and mantissa m0 0, which is E2M1's own encoding shifted by 14
// binades, E2M1's subnormal (0.5) landing on E5M2's subnormal 2^-15 (the FP8 MMA takes
// subnormal inputs). even gets codes 0, 2, 4, 6 and odd codes 1, 3, 5, 7, in bytes 0..3
// (the low and high nibbles of each byte). 7 integer ops.
FI_HD void e2m1x8_to_e5m2_lsb(uint32_t codes, uint32_t& even, uint32_t& odd) {
  even = ((codes << 1) & 0x0E0E0E0Eu) | ((codes << 4) & 0x80808080u);
  odd = ((codes >> 3) & 0x0E0E0E0Eu) | (codes & 0x80808080u);
}

}  // namespace flashindexer::sm90
