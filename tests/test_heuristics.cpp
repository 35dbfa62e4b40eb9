// Launch heuristics are pure functions of host-known shapes (CPU-tested).
#include <gtest/gtest.h>

#include "cuda/heuristics.h"

namespace {
using flashindexer::cuda::plan_topk;

TEST(Heuristics, ManyRowsUseOneCtaPerRowAndNoWorkspace) {
  const auto plan = plan_topk(8192, 196608, 1024, 132);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST(Heuristics, FewLongRowsAreSplitWithBoundedWorkspace) {
  const auto b64 = plan_topk(64, 65536, 2048, 132);
  EXPECT_GT(b64.splits, 1);
  EXPECT_LE(b64.splits * 16384, 65536);               // every split covers >= 16384 positions
  EXPECT_EQ(b64.workspace_bytes, size_t(64) * b64.splits * (2048 * 8 + 8));
  const auto b1 = plan_topk(1, 262144, 2048, 132);
  EXPECT_EQ(b1.splits, 262144 / 16384);
  EXPECT_LE(b1.splits, flashindexer::cuda::kTopKMaxSplits);
  // The workspace depends on the host bound only through the split count, which is capped.
  EXPECT_EQ(plan_topk(1, int64_t(1) << 30, 2048, 132).splits, flashindexer::cuda::kTopKMaxSplits);
}

TEST(Heuristics, ShortRowsAreNeverSplit) {
  EXPECT_EQ(plan_topk(1, 4000, 512, 132).splits, 1);
  EXPECT_EQ(plan_topk(0, 100000, 512, 132).splits, 1);
}

}  // namespace
