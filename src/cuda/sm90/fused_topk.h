// flashindexer sm_90a: host entry of the fused indexer TopK (fused_topk.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "../heuristics.h"
#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

struct FusedTopKArgs {
  const IndexerProblem* problem;
  TopKOutputs out;
  cuda::ScorerPlan plan;      // the dense-logits operator's plan: the same scores, bit for bit
  void* workspace;            // plan.splits > 1: fused_topk_workspace_bytes()
  size_t smem_limit;          // the device's opt-in shared memory per block
};

// Candidate keys per row that the fused kernel of this shape holds within smem_limit;
// 0 when the shape has no kernel.
int32_t fused_topk_capacity(CacheFormat format, int32_t heads, int32_t rows_per_group, size_t smem_limit);

// The least capacity that K needs with this group shape: room for K plus two steps of
// appends, and for the final sort (a power of two >= K).
int32_t fused_topk_min_capacity(int32_t k, int32_t heads, int32_t rows_per_group);

// Caller-owned scratch: room for the splits' local top K (rows x plan.max_splits x K rank
// keys) when rows can be split, else 0. Independent of max_context: plan_scorer bounds the
// splits by the SM count over the groups.
size_t fused_topk_workspace_bytes(const IndexerProblem& p, const cuda::ScorerPlan& plan);

// Enqueues the fused operator on `stream`; returns the first CUDA error, if any.
cudaError_t fused_topk(const FusedTopKArgs& args, cudaStream_t stream);

}  // namespace flashindexer::sm90
