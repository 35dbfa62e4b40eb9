// flashindexer: the problem description (CONTRACT §2) and the outputs (§3).
//
// Plain structs of raw pointers, sizes and strides. Pointers are host pointers
// for Backend::kCpu and device pointers for Backend::kCuda. Byte strides are
// int64 so that pools and logits beyond 4 GiB are addressable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashindexer/types.h"

namespace flashindexer {

inline constexpr int kHeadDim = 128;  // D: the only supported head dimension

// Maps a request's logical position to a physical slot (CONTRACT §2.1).
// table == nullptr: contiguous cache, slot == position, the pool holds
// num_pages * page_size positions shared by all requests.
struct PageMap {
  int32_t page_size = 64;             // tokens per page
  int64_t num_pages = 0;              // pages in the pool
  const int32_t* table = nullptr;     // [num_requests, table_width] int32 page ids, or nullptr
  int64_t table_width = 0;            // entries per request
  int64_t table_row_stride = 0;       // elements between requests (>= table_width)
};

// The paged KV pool: per page, page_size token values then page_size token scales.
struct KvCache {
  CacheFormat format = CacheFormat::kMxfp4;
  const void* pool = nullptr;         // [num_pages, page_stride] bytes, 16-byte aligned
  int64_t page_stride = 0;            // bytes between pages, multiple of 16, >= payload
  PageMap pages;
};

// Queries and head weights (CONTRACT §2.2).
struct Queries {
  int32_t num_heads = 64;             // H: 32 or 64
  const void* q = nullptr;            // fp8: [rows, H, D] e4m3; mxfp4: [rows, H, D/2] packed E2M1
  int64_t q_row_stride = 0;           // bytes
  int64_t q_head_stride = 0;          // bytes
  const uint8_t* q_scale = nullptr;   // mxfp4 only: [rows, H, D/32] UE8M0
  int64_t q_scale_row_stride = 0;     // bytes
  int64_t q_scale_head_stride = 0;    // bytes
  WeightType weight_type = WeightType::kF32;
  const void* weights = nullptr;      // [rows, H] fp32 or bf16
  int64_t weights_row_stride = 0;     // elements
  float weight_scale = 1.0f;          // w_eff = fp32(w) * weight_scale
};

// Which positions each row scores (CONTRACT §2.3).
struct Rows {
  RowForm form = RowForm::kRagged;
  int32_t num_requests = 0;           // requests addressed by row_batch / context_lens
  // ragged
  int64_t num_rows = 0;
  const int32_t* row_batch = nullptr;     // [rows] request of each row
  const int32_t* window_start = nullptr;  // [rows]
  const int32_t* window_end = nullptr;    // [rows] exclusive
  // decode: rows = num_requests * next_n, row b*next_n+n sees
  // [0, context_lens[b] - (next_n - 1 - n))
  int32_t next_n = 1;                     // 1..4
  const int32_t* context_lens = nullptr;  // [num_requests]
  // host bound on every window end; sizes logits and schedules
  int64_t max_context = 0;

  constexpr int64_t rows() const {
    return form == RowForm::kDecode ? int64_t{num_requests} * next_n : num_rows;
  }
};

// A full indexer call: scores of §1 for every row, then TopK k.
struct IndexerProblem {
  KvCache cache;
  Queries queries;
  Rows rows;
  int32_t k = 512;
  OutputOrder order = OutputOrder::kPosition;
  ScoreAccuracy accuracy = ScoreAccuracy::kProduction;  // CONTRACT §4: 2^-8 * M; kExact: 2e-4 * M
};

// TopK over materialized logits: logits[r, s] for s in the row's window.
// Slots come from `pages` (table may be nullptr = contiguous; page_size and
// num_pages still bound the positions, as for the fused operator).
struct TopKProblem {
  const float* logits = nullptr;      // [rows, max_context] fp32
  int64_t logits_row_stride = 0;      // elements (>= max_context)
  Rows rows;
  PageMap pages;
  int32_t k = 512;
  OutputOrder order = OutputOrder::kPosition;
};

// TopK outputs (CONTRACT §3). Only positions is required.
struct TopKOutputs {
  int32_t* positions = nullptr;       // [rows, K] logical positions, -1 padding
  int64_t positions_row_stride = 0;   // elements
  int32_t* slots = nullptr;           // [rows, K] physical slots, -1 padding (optional)
  int64_t slots_row_stride = 0;
  float* scores = nullptr;            // [rows, K] fp32, -inf padding (optional)
  int64_t scores_row_stride = 0;
  int32_t* counts = nullptr;          // [rows] min(K, L), 0 for failed rows (optional)
  uint32_t* status = nullptr;         // [rows] row_status bits (optional)
};

// Dense logits output: -inf outside each row's window; a failed row is all -inf.
struct LogitsOutput {
  float* logits = nullptr;            // [rows, max_context] fp32
  int64_t row_stride = 0;             // elements (>= max_context)
  uint32_t* status = nullptr;         // [rows] row_status bits (optional)
};

// Where and how an operator runs. The workspace is caller-owned.
struct Launch {
  Backend backend = Backend::kAuto;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* stream = nullptr;             // cudaStream_t for kCuda; ignored by kCpu
  int cpu_threads = 0;                // kCpu: worker threads, 0 = hardware concurrency
};

// Bytes per token of each cache format, and the page payload.
constexpr int value_bytes_per_token(CacheFormat f) { return f == CacheFormat::kMxfp4 ? 64 : 128; }
constexpr int scale_bytes_per_token(CacheFormat) { return 4; }
constexpr int64_t page_payload_bytes(CacheFormat f, int32_t page_size) {
  return int64_t{page_size} * (value_bytes_per_token(f) + scale_bytes_per_token(f));
}

}  // namespace flashindexer
