// flashindexer: quantizers, dequantizers and paged-pool writers (CONTRACT §2).
//
// Used by tests, the CLI and callers that build caches by hand. Host memory only.
#pragma once

#include <cstdint>

#include "flashindexer/problem.h"

namespace flashindexer {

// ---- scalar codecs ---------------------------------------------------------
float e4m3_to_float(uint8_t code);            // 0x7F / 0xFF -> NaN (e4m3fn has no inf)
uint8_t float_to_e4m3(float x);               // round to nearest even, saturate to +-448, NaN -> 0x7F
float e2m1_to_float(uint8_t nibble);          // low 4 bits: {0,.5,1,1.5,2,3,4,6}, bit 3 = sign
uint8_t float_to_e2m1(float x);               // round to nearest even on the E2M1 grid, saturate to +-6
float ue8m0_to_float(uint8_t code);           // 2^(code-127); 0xFF -> NaN
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float x);              // round to nearest even, NaN kept quiet

// ---- vectors -----------------------------------------------------------------
// mxfp4: n % 32 == 0. packed[n/2]: element 2i low nibble of byte i, 2i+1 high nibble.
// scales[n/32]: UE8M0 with scale = 2^ceil(log2(amax/6)) per 32-element block
// (amax == 0 -> 2^0), clamped to 2^-127..2^127.
void quantize_mxfp4(const float* x, int64_t n, uint8_t* packed, uint8_t* scales);
void dequantize_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out);

// fp8: one fp32 scale for the vector: scale = amax / 448 (1 when amax == 0).
void quantize_fp8(const float* x, int64_t n, uint8_t* values, float* scale);
void dequantize_fp8(const uint8_t* values, float scale, int64_t n, float* out);

// bf16 inputs: converted to fp32 exactly, then quantized as above.
void bf16_to_float(const uint16_t* x, int64_t n, float* out);

// ---- paged pool ----------------------------------------------------------------
// Byte offsets of a token's values and scale inside the pool (64-bit).
int64_t token_value_offset(CacheFormat f, int64_t page_stride, int32_t page_size,
                           int64_t page, int32_t token);
int64_t token_scale_offset(CacheFormat f, int64_t page_stride, int32_t page_size,
                           int64_t page, int32_t token);

// Quantizes one D=128 key vector and stores it at (page, token).
void store_key(const KvCache& cache, void* pool, int64_t page, int32_t token, const float* key);
// Stores already-quantized bytes: values (64 or 128 B) and 4 scale bytes.
void store_key_bytes(const KvCache& cache, void* pool, int64_t page, int32_t token,
                     const uint8_t* values, const uint8_t* scale4);
// Dequantizes the key at (page, token) into out[128].
void load_key(const KvCache& cache, int64_t page, int32_t token, float* out);

// Physical (page, token) of logical position s of request b; page = -1 if the
// table is too narrow. Reads exactly one table entry.
struct PageToken {
  int64_t page;
  int32_t token;
};
PageToken locate(const PageMap& pages, int32_t request, int64_t position);

// Quantizes one query head (D = 128) in the layout of `format`:
// fp8: 128 e4m3 bytes and the fp32 scale (to be folded into the weight);
// mxfp4: 64 packed bytes and 4 UE8M0 bytes (the returned scale is 1).
float quantize_query_head(CacheFormat format, const float* x, uint8_t* values, uint8_t* scales);
// Dequantizes one query head into out[128] (fp8: without its folded scale).
void load_query_head(const IndexerProblem& p, int64_t row, int32_t head, float* out);

// w_eff[r, h] = fp32(w[r, h]) * weight_scale.
float effective_weight(const Queries& q, int64_t row, int32_t head);

}  // namespace flashindexer
