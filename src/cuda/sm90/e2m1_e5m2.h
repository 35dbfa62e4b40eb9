// flashindexer: the fast E2M1 -> E5M2 rewrite of fp4_convert.cuh, callable on the host too
// (tests/test_e2m1_e5m2.cpp checks it exhaustively in CI, without a GPU).
//
// An E2M1 code times 2^-shift as an E5M2 byte, for shift <= 13 (every result normal):
// a byte permute through an 8-entry table of E5M2 magnitudes whose exponent fields are
// lowered by `shift`, and a second permute for the signs. e2m1x8_to_e5m2: eight codes at
// shift 0 (the scoring core's register path), signs by prmt's sign-replicate mode.
#pragma once

#include <cstdint>

#include "../../core/host_device.h"

namespace flashindexer::sm90 {

inline constexpr uint32_t kE5m2FastMaxShift = 13;

// PTX prmt (default mode) for selectors whose nibbles are 0..7: byte i of the result is
// byte sel[4i..4i+3] of the pair {lo, hi}.
FI_HD uint32_t byte_permute(uint32_t lo, uint32_t hi, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, sel);
#else
  const uint64_t pair = uint64_t(hi) << 32 | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((pair >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
#endif
}

// PTX prmt (default mode) for any selector: as byte_permute, except that where bit 3 of a
// selector nibble is set the result byte is the selected byte's sign bit replicated (0x00 / 0xFF).
FI_HD uint32_t byte_permute_sx(uint32_t lo, uint32_t hi, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
  return r;
#else
  const uint64_t pair = uint64_t(hi) << 32 | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nib = (sel >> (4 * i)) & 0xF;
    uint32_t b = uint32_t(pair >> (8 * (nib & 7))) & 0xFF;
    if (nib & 8) b = (b & 0x80) ? 0xFF : 0x00;
    r |= b << (8 * i);
  }
  return r;
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

// Eight E2M1 codes (code i in nibble i of `codes`) to E5M2 bytes at shift 0: lo gets codes
// 0..3, hi codes 4..7 (code i in byte i % 4). Magnitudes: the codes' low three bits through
// the shift-0 table; signs: a permute of 0x80 bytes in sign-replicate mode (0x80 for a
// positive code, 0xFF for a negative one), whose bit 0 is shifted to bit 7. 11 integer ops.
FI_HD void e2m1x8_to_e5m2(uint32_t codes, uint32_t& lo, uint32_t& hi) {
  const uint32_t lut_lo = e5m2_lut_lo(0), lut_hi = e5m2_lut_hi(0);
  const uint32_t mag = codes & 0x77777777u;
  const uint32_t neg_lo = byte_permute_sx(0x80808080u, 0x80808080u, codes);
  const uint32_t neg_hi = byte_permute_sx(0x80808080u, 0x80808080u, codes >> 16);
  lo = byte_permute_sx(lut_lo, lut_hi, mag) | ((neg_lo << 7) & 0x80808080u);
  hi = byte_permute_sx(lut_lo, lut_hi, mag >> 16) | ((neg_hi << 7) & 0x80808080u);
}

}  // namespace flashindexer::sm90
