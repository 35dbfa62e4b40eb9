// Codecs, quantizers, the paged pool layout: quantize -> pack -> dequantize round trips.
#include <cstring>
#include <limits>

#include "oracle/fp64_oracle.h"
#include "test_util.h"

namespace fit {
namespace {

TEST(Quantize, E2M1DecodesAllSixteenCodes) {
  const float expect[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(bits(e2m1_to_float(uint8_t(c))), bits(expect[c])) << c;
    EXPECT_EQ(e2m1_to_float(uint8_t(c)), static_cast<float>(oracle::e2m1(uint8_t(c))));
  }
}

TEST(Quantize, E2M1RoundsToNearestEven) {
  struct Case { float x; uint8_t code; } cases[] = {
      {0.25f, 0x0}, {0.26f, 0x1}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4}, {2.5f, 0x4},
      {3.5f, 0x6},  {5.0f, 0x6},  {5.1f, 0x7},  {7.0f, 0x7},  {-0.0f, 0x8}, {-2.9f, 0xD}};
  for (const auto& c : cases) EXPECT_EQ(float_to_e2m1(c.x), c.code) << c.x;
}

TEST(Quantize, E4M3DecodeMatchesIndependentDecoderForAll256Codes) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_float(uint8_t(c));
    const double o = oracle::e4m3(uint8_t(c));
    if (std::isnan(o)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    EXPECT_EQ(double(v), o) << c;
    EXPECT_EQ(float_to_e4m3(v), uint8_t(c)) << "encode(decode(code)) for code " << c;
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(Quantize, E4M3RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.0f + 1.0f / 16)), 1.0f);    // tie -> even mantissa 0
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1.0f + 3.0f / 16)), 1.25f);   // tie -> even mantissa 2
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(1000.0f)), 448.0f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(-std::numeric_limits<float>::infinity())), -448.0f);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(std::ldexp(1.0f, -10))), 0.0f);  // half the smallest subnormal
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(std::ldexp(1.5f, -10))), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_float(float_to_e4m3(std::nanf("")))));
}

TEST(Quantize, Ue8m0AndBf16) {
  EXPECT_EQ(ue8m0_to_float(127), 1.0f);
  EXPECT_EQ(ue8m0_to_float(130), 8.0f);
  EXPECT_EQ(ue8m0_to_float(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(ue8m0_to_float(0xFF)));
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_float(uint16_t{0x3F80}), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);         // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);     // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Quantize, Mxfp4BlockScaleIsCeilLog2OfAmaxOverSix) {
  struct Case { float amax; int exponent; } cases[] = {
      {6.0f, 0}, {6.0001f, 1}, {3.0f, -1}, {3.0001f, 0}, {12.0f, 1}, {0.75f, -3}, {0.0f, 0}, {1e-30f, -102}};
  for (const auto& c : cases) {
    float x[32] = {};
    x[7] = c.amax;
    x[8] = -c.amax / 2;
    uint8_t packed[16], scale;
    quantize_mxfp4(x, 32, packed, &scale);
    EXPECT_EQ(int(scale) - 127, c.exponent) << c.amax;
  }
}

TEST(Quantize, Mxfp4RoundTripIsNearestGridPoint) {
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = std::sin(1.7f * i + 0.3f) * (i < 32 ? 5.0f : 0.01f);
  uint8_t packed[32], scales[2];
  quantize_mxfp4(x, 64, packed, scales);
  float back[64];
  dequantize_mxfp4(packed, scales, 64, back);
  for (int i = 0; i < 64; ++i) {
    const double scale = oracle::ue8m0(scales[i / 32]);
    double best = 1e30;
    for (int c = 0; c < 16; ++c) best = std::min(best, std::fabs(oracle::e2m1(uint8_t(c)) * scale - x[i]));
    EXPECT_EQ(std::fabs(double(back[i]) - x[i]), best) << i;
  }
  // Values already on the grid come back exactly.
  float on_grid[32];
  for (int i = 0; i < 32; ++i) on_grid[i] = e2m1_to_float(uint8_t(i % 16)) * 0.25f;
  quantize_mxfp4(on_grid, 32, packed, scales);
  dequantize_mxfp4(packed, scales, 32, back);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(bits(back[i]), bits(on_grid[i])) << i;
}

TEST(Quantize, RoundTripsThroughPagedPoolBothFormats) {
  for (CacheFormat f : {CacheFormat::kMxfp4, CacheFormat::kFp8E4M3}) {
    KvCache c;
    c.format = f;
    c.pages.page_size = 64;
    c.pages.num_pages = 4;
    c.page_stride = page_payload_bytes(f, 64) + 48;  // stride larger than the payload
    std::vector<uint8_t> pool(size_t(c.pages.num_pages * c.page_stride), 0xAB);
    c.pool = pool.data();
    float key[kHeadDim], back[kHeadDim];
    for (int d = 0; d < kHeadDim; ++d) key[d] = std::sin(0.37f * d) * (1 + d % 5);
    store_key(c, pool.data(), 2, 63, key);
    load_key(c, 2, 63, back);
    uint8_t values[kHeadDim], scales[4];
    float expect[kHeadDim];
    if (f == CacheFormat::kMxfp4) {
      quantize_mxfp4(key, kHeadDim, values, scales);
      dequantize_mxfp4(values, scales, kHeadDim, expect);
    } else {
      float s;
      quantize_fp8(key, kHeadDim, values, &s);
      dequantize_fp8(values, s, kHeadDim, expect);
      std::memcpy(scales, &s, 4);
    }
    for (int d = 0; d < kHeadDim; ++d) {
      EXPECT_EQ(bits(back[d]), bits(expect[d])) << to_string(f) << " d=" << d;
      // Quantization error bounds: fp8 relative 2^-4 (normals); mxfp4 half the widest grid gap.
      const float tol = f == CacheFormat::kFp8E4M3 ? std::fabs(key[d]) * 0.0625f + 1e-3f
                                                   : std::ldexp(1.0f, int(scales[d / 32]) - 127);
      EXPECT_LE(std::fabs(back[d] - key[d]), tol) << to_string(f) << " d=" << d;
    }
    // Structure of arrays: values of token 63, then the scales after all values.
    const int64_t vb = value_bytes_per_token(f);
    const uint8_t* page = pool.data() + 2 * c.page_stride;
    EXPECT_EQ(std::memcmp(page + 63 * vb, values, size_t(vb)), 0);
    EXPECT_EQ(std::memcmp(page + 64 * vb + 63 * 4, scales, 4), 0);
    EXPECT_EQ(page[page_payload_bytes(f, 64)], 0xAB) << "padding between pages untouched";
    EXPECT_EQ(pool[size_t(3 * c.page_stride)], 0xAB) << "next page untouched";
  }
}

}  // namespace
}  // namespace fit
