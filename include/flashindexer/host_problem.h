// flashindexer: an IndexerProblem that owns its host buffers, its results,
// problem files (CONTRACT §7, safetensors) and seeded synthetic generators.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashindexer/problem.h"
#include "flashindexer/status.h"

namespace flashindexer {

struct HostProblem {
  CacheFormat format = CacheFormat::kMxfp4;
  int32_t num_heads = 64;
  int32_t page_size = 64;
  int64_t page_stride = 0;   // bytes
  int64_t num_pages = 0;
  int32_t k = 512;
  OutputOrder order = OutputOrder::kPosition;
  ScoreAccuracy accuracy = ScoreAccuracy::kProduction;
  float weight_scale = 1.0f;
  WeightType weight_type = WeightType::kF32;
  RowForm form = RowForm::kRagged;
  int32_t num_requests = 0;
  int32_t next_n = 1;
  int64_t num_rows = 0;      // ragged only
  int64_t max_context = 0;
  int64_t table_width = 0;   // 0: contiguous cache (no table)

  std::vector<uint8_t> pool;        // [num_pages, page_stride]
  std::vector<uint8_t> q;           // [rows, H, D] or [rows, H, D/2], packed (no padding)
  std::vector<uint8_t> q_scale;     // [rows, H, D/32] (mxfp4)
  std::vector<uint8_t> weights;     // [rows, H] fp32 or bf16 bytes
  std::vector<int32_t> page_table;  // [num_requests, table_width]
  std::vector<int32_t> row_batch, window_start, window_end;  // [rows] ragged
  std::vector<int32_t> context_lens;                          // [num_requests] decode

  int64_t rows() const { return form == RowForm::kDecode ? int64_t{num_requests} * next_n : num_rows; }
  // A view of the buffers; valid while this object lives and is not resized.
  IndexerProblem view() const;
};

// Host buffers for every output of CONTRACT §3, plus optional dense logits.
struct HostResults {
  int64_t rows = 0;
  int32_t k = 0;
  std::vector<int32_t> positions, slots;  // [rows, k]
  std::vector<float> scores;              // [rows, k]
  std::vector<int32_t> counts;            // [rows]
  std::vector<uint32_t> status;           // [rows]
  int64_t logits_width = 0;
  std::vector<float> logits;              // [rows, logits_width], empty unless requested
  size_t workspace_bytes = 0;             // the workspace the runner gave the operator (run_fused)
  std::string plan;                       // run_fused: describe() of the call's plan

  // Sizes the buffers and fills them with a poison pattern (detects unwritten entries).
  void reset(int64_t rows, int32_t k, bool with_slots);
  TopKOutputs outputs();
};

// ---- host conveniences (allocate; for tools and tests, not for the run path) ----
// With launch.backend == kCuda and a usable device they copy the problem to the device and
// the results back (then synchronize launch.stream); otherwise they run on the host buffers.
// fused_topk with a workspace sized by workspace_size(); results poisoned first.
Status run_fused(const HostProblem& p, const Launch& launch, HostResults* out);
// dense_logits then topk_over_logits; keeps the logits in out->logits when asked.
Status run_dense_then_topk(const HostProblem& p, const Launch& launch, HostResults* out, bool keep_logits);
// "" when every output matches bit for bit; else a description of the first difference.
std::string first_difference(const HostResults& a, const HostResults& b);

// Up to `max_rows` rows of p spread evenly over it, as a problem of their own for checking a
// sample (decode problems: the requests of those rows, each with all its next_n rows, so that
// the rows keep their row form). On the CPU backend each row's scores and TopK depend on that
// row alone, so the sample's results equal those rows of p's (the CUDA kernels choose
// exact-mode operands per group of rows, so there they need not). The sample takes p's pool (moved, not
// copied): give it back with p.pool = std::move(sample.pool). *rows gets the rows of p it holds.
HostProblem take_row_sample(HostProblem& p, int64_t max_rows, std::vector<int64_t>* rows);
// The given rows of r, in that order.
HostResults select_rows(const HostResults& r, const std::vector<int64_t>& rows);

// ---- problem files (safetensors) ---------------------------------------------
Status read_problem_file(const std::string& path, HostProblem* out);
Status parse_problem(const uint8_t* data, size_t size, HostProblem* out);
Status write_problem_file(const std::string& path, const HostProblem& p);
Status write_result_file(const std::string& path, const HostResults& r);
Status read_result_file(const std::string& path, HostResults* out);

// ---- synthetic problems ----------------------------------------------------------
enum class Generator : int {
  kGaussian = 0,  // Hadamard-like Gaussian q and k, quantized as the model does
  kStructured,    // a few hot positions, recency ramp, adjacent rows correlated
  kPlateau,       // most keys exactly zero: plateaus of +0 scores
  kTies,          // keys drawn from 8 vectors: massive runs of equal scores
  kUlp,           // scores a few ulps apart
  kAscending,     // scores non-decreasing along the position
  kDescending,    // scores non-increasing along the position
  kSpecials,      // +-0, +-inf, NaN through weights and NaN keys
  kWideRange,     // fp8: per 32-element block one dominant product and 31 below 2^-13 of it
};
inline constexpr Generator kAllGenerators[] = {
    Generator::kGaussian,   Generator::kStructured, Generator::kPlateau,
    Generator::kTies,       Generator::kUlp,        Generator::kAscending,
    Generator::kDescending, Generator::kSpecials,   Generator::kWideRange};
const char* to_string(Generator g);
bool parse_generator(const std::string& name, Generator* out);

struct SyntheticSpec {
  CacheFormat format = CacheFormat::kMxfp4;
  int32_t num_heads = 64;
  int32_t page_size = 64;
  int64_t page_stride = 0;       // 0: the payload rounded up to 16 bytes
  int32_t k = 512;
  OutputOrder order = OutputOrder::kPosition;
  ScoreAccuracy accuracy = ScoreAccuracy::kProduction;
  WeightType weight_type = WeightType::kF32;
  RowForm form = RowForm::kRagged;
  // ragged: `rows` rows split evenly over `requests` requests; row i of a request
  // with R rows is raw token 4*context - R + i of a prompt whose C4 length is
  // `context`, so its causal window ends at (p + 1) / 4 (at least 1).
  int64_t rows = 64;
  int32_t requests = 1;
  int64_t sliding_window = 0;    // > 0: windows start at max(0, end - sliding_window)
  // decode: `requests` requests of context lengths in [context/2, context], next_n rows each
  int32_t next_n = 1;
  int64_t context = 8192;        // max_context (C4 positions)
  bool contiguous = false;       // no page table (requires requests == 1)
  bool shuffle_pages = true;     // random physical page order
  Generator generator = Generator::kGaussian;
  uint64_t seed = 1;
};

// Presets of REFERENCE §5: v4-flash, v4-pro, v32, glm5 (format, H, K, page size).
bool apply_preset(const std::string& name, SyntheticSpec* spec);
Status make_synthetic(const SyntheticSpec& spec, HostProblem* out);

}  // namespace flashindexer
