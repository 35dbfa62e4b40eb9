// flashindexer: the total order of CONTRACT §3 as one unsigned integer.
//
// float_key: every NaN -> 0 (lowest, all equal); otherwise the usual sign flip,
//   so -inf < finite negatives < -0 < +0 < finite positives < +inf.
// rank_key: (float_key << 32) | (0xFFFFFFFF - position). Distinct positions give
//   distinct rank keys, and a larger rank key ranks higher (ties -> lower position).
#pragma once

#include <bit>
#include <cstdint>

#include "host_device.h"

namespace flashindexer {

FI_HD constexpr uint32_t float_key(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0u;  // NaN of either sign
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Inverse of float_key for keys that are not NaN; key 0 -> the canonical quiet NaN.
FI_HD constexpr float key_to_float(uint32_t key) {
  if (key == 0u) return std::bit_cast<float>(0x7FC00000u);
  return std::bit_cast<float>((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// The usual order-preserving bits (sign flip) without NaN canonicalization: equal to
// float_key for every non-NaN, and >= float_key for every NaN (float_key gives NaN 0). A
// filter on ordered_bits >= t keeps every value whose float_key is >= t.
FI_HD constexpr uint32_t ordered_bits(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  return b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) | 0x80000000u);
}

// Whether ordered_bits(x) came from a NaN: -inf .. +inf have ordered bits 0x007FFFFF ..
// 0xFF800000, which the wrapping add maps to 0 .. 0xFF000001; every NaN lands above.
FI_HD constexpr bool ordered_bits_nan(uint32_t ordered) { return ordered + 0xFF800001u > 0xFF000001u; }

// float_key from ordered_bits: the same key, NaN canonicalized to 0.
FI_HD constexpr uint32_t key_of_ordered_bits(uint32_t ordered) { return ordered_bits_nan(ordered) ? 0u : ordered; }

FI_HD constexpr uint64_t rank_key(float score, int32_t position) {
  return (uint64_t{float_key(score)} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(position));
}

FI_HD constexpr int32_t rank_key_position(uint64_t rk) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(rk));
}

FI_HD constexpr float rank_key_score(uint64_t rk) { return key_to_float(static_cast<uint32_t>(rk >> 32)); }

}  // namespace flashindexer
