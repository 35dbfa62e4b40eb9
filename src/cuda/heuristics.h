// flashindexer CUDA: launch heuristics as pure functions of host-known shapes
// (tested on the CPU in CI; never read device data).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace flashindexer::cuda {

inline constexpr int32_t kTopKMaxK = 2048;      // largest K of the sm_90a selectors
inline constexpr int kTopKMaxSplits = 64;

// TopK over logits: how many CTAs share one row. Rows are split only when there are
// too few rows to fill the GPU; every split covers at least max(4K, 16384) positions
// so its local top-K is a real reduction and the merge (splits x K keys) stays small.
struct TopKPlan {
  int splits = 1;
  size_t workspace_bytes = 0;  // split candidates + counts + NaN flags (0 when splits == 1)
};

inline TopKPlan plan_topk(int64_t rows, int64_t max_context, int32_t k, int num_sms) {
  TopKPlan plan;
  const int64_t target_ctas = 2 * int64_t(std::max(num_sms, 1));
  if (rows <= 0 || rows >= target_ctas) return plan;
  const int64_t min_chunk = std::max<int64_t>(4 * int64_t(k), 16384);
  const int64_t by_rows = (target_ctas + rows - 1) / rows;
  const int64_t by_width = std::max<int64_t>(1, max_context / min_chunk);
  plan.splits = int(std::clamp<int64_t>(std::min(by_rows, by_width), 1, kTopKMaxSplits));
  if (plan.splits > 1)
    plan.workspace_bytes = size_t(rows) * size_t(plan.splits) * (size_t(k) * 8 + 8);
  return plan;
}

}  // namespace flashindexer::cuda
