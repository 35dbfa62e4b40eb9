// flashindexer sm_90a: the dense operator's sink, the scoring core's store epilogue: every
// in-window score to logits[row, position] (kernels/dense_logits.cu).
// Included by dense_logits.cu alone: its definitions keep the kernel's internal linkage.
#pragma once

#include <cstdint>

#include "cuda/sm90/common/diagnostics.h"

namespace flashindexer::sm90 {
namespace {  // NOLINT(google-build-namespaces): one includer, the kernel's translation unit

// kRegKeyPairs is read by a concept (paged_scorer.cuh, AsksRegKeyPairs), which nvcc's front end
// does not count as a use (warning 177).
#pragma nv_diag_suppress 177
struct LogitsSink {
  static constexpr bool kLockstep = false;
  // Register-key groups of N <= 64 take their tiles in pairs (consume_tiles_reg_pairs): V4-Pro
  // decode B64 x 65,536 and B32 x 131,072 2-3% faster (docs/experiments.md, 2026-12-04).
  static constexpr bool kRegKeyPairs = true;
  float* logits;
  int64_t row_stride;
  // put's `row` is the row's element offset (paged_scorer.cuh, sink_row), computed once per consumer.
  __device__ int64_t row_key(int64_t row) const { return row * row_stride; }
  __device__ void put(int, int64_t row_offset, int64_t pos, float v) const {
    if constexpr (FI_DENSE_STORES != 0) {
      logits[row_offset + pos] = v;
    } else {
      asm volatile("" ::"f"(v));  // kept alive, not stored
    }
  }
};
#pragma nv_diag_default 177

}  // namespace
}  // namespace flashindexer::sm90
