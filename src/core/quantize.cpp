// Scalar codecs, vector quantizers and paged-pool accessors (CONTRACT §2).
#include "flashindexer/quantize.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace flashindexer {
namespace {

constexpr float kE2M1Grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
constexpr float kE4M3Max = 448.0f;

// Smallest e with 6 * 2^e >= amax, clamped to the UE8M0 range [-127, 127].
int mxfp4_block_exponent(double amax) {
  if (!(amax > 0.0)) return 0;
  if (std::isinf(amax)) return 127;
  int e = static_cast<int>(std::ceil(std::log2(amax / 6.0)));
  while (e < 127 && std::ldexp(6.0, e) < amax) ++e;
  while (e > -127 && std::ldexp(6.0, e - 1) >= amax) --e;
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

}  // namespace

float e4m3_to_float(uint8_t code) {
  const int sign = code >> 7, exp = (code >> 3) & 0xF, man = code & 0x7;
  if (exp == 0xF && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + man / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= kE4M3Max) return sign | 0x7E;
  int ex = 0;
  std::frexp(a, &ex);  // a = f * 2^ex, f in [0.5, 1)
  const int e = a < std::ldexp(1.0, -6) ? -6 : ex - 1;
  const double step = std::ldexp(1.0, e - 3);
  const double v = std::nearbyint(a / step) * step;  // round to nearest even
  if (v == 0.0) return sign;
  std::frexp(v, &ex);
  const int ev = ex - 1;
  if (ev < -6) return sign | static_cast<uint8_t>(v / std::ldexp(1.0, -9));
  const int man = static_cast<int>(v / std::ldexp(1.0, ev) * 8.0) - 8;
  return sign | static_cast<uint8_t>(((ev + 7) << 3) | man);
}

float e2m1_to_float(uint8_t nibble) {
  const float mag = kE2M1Grid[nibble & 0x7];
  return (nibble & 0x8) ? -mag : mag;
}

uint8_t float_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  int best = 0;
  float best_d = a;
  for (int i = 1; i < 8; ++i) {
    const float d = std::fabs(a - kE2M1Grid[i]);
    if (d < best_d || (d == best_d && (i & 1) == 0)) {
      best = i;
      best_d = d;
    }
  }
  return sign | static_cast<uint8_t>(best);
}

float ue8m0_to_float(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((b >> 16) | 0x40);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

void quantize_mxfp4(const float* x, int64_t n, uint8_t* packed, uint8_t* scales) {
  for (int64_t blk = 0; blk < n / 32; ++blk) {
    const float* v = x + blk * 32;
    double amax = 0.0;
    bool has_nan = false;
    for (int i = 0; i < 32; ++i) {
      has_nan |= std::isnan(v[i]);
      if (!std::isnan(v[i])) amax = std::fmax(amax, std::fabs(static_cast<double>(v[i])));
    }
    const int e = mxfp4_block_exponent(amax);
    scales[blk] = has_nan ? 0xFF : static_cast<uint8_t>(e + 127);
    for (int i = 0; i < 32; i += 2) {
      const uint8_t lo = float_to_e2m1(static_cast<float>(std::ldexp(static_cast<double>(v[i]), -e)));
      const uint8_t hi = float_to_e2m1(static_cast<float>(std::ldexp(static_cast<double>(v[i + 1]), -e)));
      packed[blk * 16 + i / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = packed[i / 2];
    const uint8_t nib = (i & 1) ? (byte >> 4) : (byte & 0xF);
    out[i] = e2m1_to_float(nib) * ue8m0_to_float(scales[i / 32]);
  }
}

void quantize_fp8(const float* x, int64_t n, uint8_t* values, float* scale) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) amax = std::fmax(amax, std::fabs(x[i]));
  const float s = amax > 0.0f ? amax / kE4M3Max : 1.0f;
  for (int64_t i = 0; i < n; ++i) values[i] = float_to_e4m3(x[i] / s);
  *scale = s;
}

void dequantize_fp8(const uint8_t* values, float scale, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_float(values[i]) * scale;
}

void bf16_to_float(const uint16_t* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(x[i]);
}

int64_t token_value_offset(CacheFormat f, int64_t page_stride, int32_t, int64_t page, int32_t token) {
  return page * page_stride + int64_t{token} * value_bytes_per_token(f);
}

int64_t token_scale_offset(CacheFormat f, int64_t page_stride, int32_t page_size, int64_t page,
                           int32_t token) {
  return page * page_stride + int64_t{page_size} * value_bytes_per_token(f) +
         int64_t{token} * scale_bytes_per_token(f);
}

void store_key_bytes(const KvCache& c, void* pool, int64_t page, int32_t token, const uint8_t* values,
                     const uint8_t* scale4) {
  auto* base = static_cast<uint8_t*>(pool);
  const int32_t ps = c.pages.page_size;
  std::memcpy(base + token_value_offset(c.format, c.page_stride, ps, page, token), values,
              value_bytes_per_token(c.format));
  std::memcpy(base + token_scale_offset(c.format, c.page_stride, ps, page, token), scale4, 4);
}

void store_key(const KvCache& c, void* pool, int64_t page, int32_t token, const float* key) {
  uint8_t values[kHeadDim];
  uint8_t scale4[4];
  if (c.format == CacheFormat::kMxfp4) {
    quantize_mxfp4(key, kHeadDim, values, scale4);
  } else {
    float s = 1.0f;
    quantize_fp8(key, kHeadDim, values, &s);
    std::memcpy(scale4, &s, 4);
  }
  store_key_bytes(c, pool, page, token, values, scale4);
}

void load_key(const KvCache& c, int64_t page, int32_t token, float* out) {
  const auto* base = static_cast<const uint8_t*>(c.pool);
  const int32_t ps = c.pages.page_size;
  const uint8_t* values = base + token_value_offset(c.format, c.page_stride, ps, page, token);
  const uint8_t* scale4 = base + token_scale_offset(c.format, c.page_stride, ps, page, token);
  if (c.format == CacheFormat::kMxfp4) {
    dequantize_mxfp4(values, scale4, kHeadDim, out);
  } else {
    float s;
    std::memcpy(&s, scale4, 4);
    dequantize_fp8(values, s, kHeadDim, out);
  }
}

PageToken locate(const PageMap& pages, int32_t request, int64_t position) {
  const int64_t index = position / pages.page_size;
  const auto token = static_cast<int32_t>(position % pages.page_size);
  if (pages.table == nullptr) return {index, token};
  if (index >= pages.table_width) return {-1, token};
  return {pages.table[int64_t{request} * pages.table_row_stride + index], token};
}

float quantize_query_head(CacheFormat format, const float* x, uint8_t* values, uint8_t* scales) {
  if (format == CacheFormat::kMxfp4) {
    quantize_mxfp4(x, kHeadDim, values, scales);
    return 1.0f;
  }
  float s = 1.0f;
  quantize_fp8(x, kHeadDim, values, &s);
  return s;
}

void load_query_head(const IndexerProblem& p, int64_t row, int32_t head, float* out) {
  const Queries& q = p.queries;
  const auto* values = static_cast<const uint8_t*>(q.q) + row * q.q_row_stride + head * q.q_head_stride;
  if (p.cache.format == CacheFormat::kMxfp4) {
    const uint8_t* scales = q.q_scale + row * q.q_scale_row_stride + head * q.q_scale_head_stride;
    dequantize_mxfp4(values, scales, kHeadDim, out);
  } else {
    dequantize_fp8(values, 1.0f, kHeadDim, out);
  }
}

float effective_weight(const Queries& q, int64_t row, int32_t head) {
  const int64_t i = row * q.weights_row_stride + head;
  const float w = q.weight_type == WeightType::kF32 ? static_cast<const float*>(q.weights)[i]
                                                    : bf16_to_float(static_cast<const uint16_t*>(q.weights)[i]);
  return w * q.weight_scale;
}

}  // namespace flashindexer
