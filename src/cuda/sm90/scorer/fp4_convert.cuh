// flashindexer sm_90a: MXFP4 (E2M1 + UE8M0 per 32 elements) to E5M2 on chip.
//
// Hopper has no FP4 MMA. A vector of D = 128 E2M1 values with four block exponents
// e_j is rewritten as E5M2 values e2m1 * 2^(e_j - e_max) times one scale
// 2^(e_max - 127) (REFERENCE §4). E5M2 holds every such value exactly while
// e_max - e_j <= 15; beyond that the smallest values round (to nearest even).
// Fast path (t = e_max - e_j <= 13, all results normal): a byte permute through an
// 8-entry table of E5M2 magnitudes with the shift folded into the table, and a second
// permute for the signs: 6 integer ops per 4 elements. Slower exact path otherwise.
#pragma once

#include <cstdint>

#include "cuda/sm90/scorer/e2m1_e5m2.h"
#include "cuda/sm90/scorer/e2m1_s8.h"

#include <cuda_fp8.h>

namespace flashindexer::sm90 {

// 2^(e - 127) for a UE8M0 byte; 0xFF is NaN (OCP MX).
__device__ __forceinline__ float ue8m0_value(uint32_t e) {
  const uint32_t bits = e == 0xFF ? 0x7FC00000u : e == 0 ? 0x00400000u : e << 23;  // 0: 2^-127, subnormal
  return __int_as_float(int(bits));
}

// Block b's UE8M0 exponent, byte b of a vector's scale word: one byte permute (a shift and
// a mask otherwise).
__device__ __forceinline__ uint32_t block_exponent(uint32_t scales4, uint32_t b) {
  return __byte_perm(scales4, 0u, 0x4440u | b);
}

// Largest of the four block exponents of one vector (0xFF if any block is NaN).
__device__ __forceinline__ uint32_t max_block_exponent(uint32_t scales4) {
  const uint32_t b0 = block_exponent(scales4, 0), b1 = block_exponent(scales4, 1);
  const uint32_t b2 = block_exponent(scales4, 2), b3 = block_exponent(scales4, 3);
  return max(max(b0, b1), max(b2, b3));
}

__device__ __forceinline__ uint32_t e2m1_slow(uint32_t codes4, int shift) {
  const float scale = shift >= 126 ? 0.0f : __int_as_float((127 - shift) << 23);
  uint32_t out = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t c = (codes4 >> (4 * i)) & 0xF;
    const uint32_t m = c & 7;  // E2M1 magnitude: 0, 0.5, then (2 + mantissa) * 2^(exponent - 2)
    float v = m < 2 ? 0.5f * float(m) : float(2 + (m & 1)) * __int_as_float(int((125 + (m >> 1)) << 23));
    v *= scale;
    if (c & 8) v = -v;
    const uint32_t b = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
    out |= (b & 0xFF) << (8 * i);
  }
  return out;
}

// One block: 16 bytes of packed E2M1 (32 elements, element 2i in the low nibble of
// byte i) scaled by 2^-shift, to 32 E5M2 bytes (elements 0..15 in lo, 16..31 in hi).
__device__ __forceinline__ void e2m1_block_to_e5m2(const uint4& in, uint32_t shift, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t o[8];
  if (shift <= kE5m2FastMaxShift) {
    const uint32_t lut_lo = e5m2_lut_lo(shift), lut_hi = e5m2_lut_hi(shift);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o[2 * k] = e2m1x4_to_e5m2(w[k], lut_lo, lut_hi);
      o[2 * k + 1] = e2m1x4_to_e5m2(w[k] >> 16, lut_lo, lut_hi);
    }
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o[2 * k] = e2m1_slow(w[k] & 0xFFFF, int(shift));
      o[2 * k + 1] = e2m1_slow(w[k] >> 16, int(shift));
    }
  }
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}

// One block as s8 integers for the integer MMA: twice each E2M1 value times 2^shift
// (shift <= kS8MaxShift; e2m1_s8.h), in e2m1_block_to_e5m2's element order.
__device__ __forceinline__ void e2m1_block_to_s8(const uint4& in, uint32_t shift, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  const MagnitudeLut lut = magnitude_lut(shift);
  uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) e2m1x8_to_s8(w[k], lut, o[2 * k], o[2 * k + 1]);
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}

// Least of the four block exponents of one vector (max_block_exponent: the largest).
__device__ __forceinline__ uint32_t min_block_exponent(uint32_t scales4) {
  const uint32_t b0 = block_exponent(scales4, 0), b1 = block_exponent(scales4, 1);
  const uint32_t b2 = block_exponent(scales4, 2), b3 = block_exponent(scales4, 3);
  return min(min(b0, b1), min(b2, b3));
}

}  // namespace flashindexer::sm90
