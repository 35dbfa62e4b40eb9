// flashindexer: enumerations shared by the problem description and the operators.
#pragma once

#include <cstdint>

namespace flashindexer {

// Indexer KV-cache formats (CONTRACT §2.1).
enum class CacheFormat : int {
  kFp8E4M3 = 0,  // 128 B e4m3 values + 4 B fp32 scale per token
  kMxfp4 = 1,    // 64 B packed E2M1 + 4 B UE8M0 scales per token
};

enum class WeightType : int { kF32 = 0, kBF16 = 1 };

// How query rows are described (CONTRACT §2.3).
enum class RowForm : int {
  kRagged = 0,  // row_batch / window_start / window_end per row
  kDecode = 1,  // num_requests x next_n rows, windows from context_lens
};

// Order of the first count[r] output entries (CONTRACT §3).
enum class OutputOrder : int {
  kPosition = 0,  // ascending logical position
  kRank = 1,      // descending rank (best first)
};

// Score accuracy (CONTRACT §4), with M = sum_h |w_eff| * sum_d |q̂ k̂| per score:
//   kProduction (default): |score - exact| <= 2^-8 * M, the FP8 tensor-core numerics the
//     models are served with (on sm_90a one FP8 WGMMA chain over D with Hopper's FP8
//     accumulator, an fp32 epilogue).
//   kExact (opt-in): <= 2e-4 * M on any input (exact products, fp32 accumulation).
// The CPU backend computes in fp32 and meets kExact's bound in both modes.
enum class ScoreAccuracy : int {
  kExact = 0,
  kProduction = 1,
};
// The mode's bound on |score - exact| / M.
constexpr double score_error_bound(ScoreAccuracy a) { return a == ScoreAccuracy::kProduction ? 1.0 / 256 : 2e-4; }

enum class Backend : int {
  kAuto = 0,  // the best backend compiled in and usable for the problem
  kCpu = 1,   // reference backend, host pointers
  kCuda = 2,  // sm_90a backend, device pointers
};

enum class Operator : int {
  kDenseLogits = 0,     // scores -> fp32 [rows, max_context]
  kTopKOverLogits = 1,  // fp32 logits -> TopK
  kFusedTopK = 2,       // scores -> TopK, no logits materialized
};

// Per-row status bits (CONTRACT §5). A row with any of the kRowFail* bits set
// has count 0 and is all padding.
namespace row_status {
inline constexpr uint32_t kOk = 0u;
inline constexpr uint32_t kFailWindow = 1u << 0;    // start < 0, end < start or end > max_context
inline constexpr uint32_t kFailRequest = 1u << 1;   // request id outside [0, num_requests)
inline constexpr uint32_t kFailPage = 1u << 2;      // page index past the table / pool, or entry outside [0, num_pages)
inline constexpr uint32_t kFailSlot = 1u << 3;      // physical slot above INT32_MAX
inline constexpr uint32_t kFailMask = kFailWindow | kFailRequest | kFailPage | kFailSlot;
inline constexpr uint32_t kHasNaN = 1u << 8;        // informational: a NaN score in the window
}  // namespace row_status

const char* to_string(CacheFormat f);
const char* to_string(Backend b);
const char* to_string(Operator op);
const char* to_string(ScoreAccuracy a);  // "production" | "exact"
bool parse_accuracy(const char* name, ScoreAccuracy* out);

}  // namespace flashindexer
