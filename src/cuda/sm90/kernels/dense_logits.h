// flashindexer sm_90a: host entry of the dense-logits operator (paged_scorer.cuh).
#pragma once

#include <cuda_runtime.h>

#include "cuda/plan/heuristics.h"
#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

struct DenseLogitsArgs {
  const IndexerProblem* problem;
  LogitsOutput out;   // logits [rows, row_stride] fp32; status [rows] (optional)
  cuda::ScorerPlan plan;
};

// True if the sm_90a scorer has a kernel for this shape (format, H, rows per group).
bool dense_logits_instantiated(CacheFormat format, int32_t heads, int32_t rows_per_group);

// Enqueues the scoring on `stream`; returns the first CUDA error, if any.
cudaError_t dense_logits(const DenseLogitsArgs& args, cudaStream_t stream);

}  // namespace flashindexer::sm90
