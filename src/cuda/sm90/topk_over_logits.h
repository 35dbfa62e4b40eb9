// flashindexer sm_90a: host entry of the exact TopK-over-logits kernels.
#pragma once

#include <cuda_runtime.h>

#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

struct TopKArgs {
  const float* logits;        // [rows, logits_row_stride] fp32
  int64_t logits_row_stride;  // elements
  Rows rows;
  PageMap pages;              // page_size 0: no page map
  int32_t k;                  // 1..2048
  OutputOrder order;
  TopKOutputs out;
  int splits;                 // CTAs per row (heuristics.h); > 1 needs the workspace
  void* workspace;            // splits > 1: rows * splits * (8 K + 8) bytes
};

// Enqueues the selection on `stream`; returns the launch error, if any.
cudaError_t topk_over_logits(const TopKArgs& args, cudaStream_t stream);

}  // namespace flashindexer::sm90
