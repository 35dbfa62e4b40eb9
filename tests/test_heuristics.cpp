// Launch heuristics are pure functions of host-known shapes (CPU-tested).
#include <gtest/gtest.h>

#include "cuda/plan/heuristics.h"

namespace {
using flashindexer::cuda::plan_scorer;
using flashindexer::cuda::plan_topk;

using flashindexer::cuda::TopKPath;

TEST(Heuristics, ManyRowsUseOneCtaPerRowAndNoWorkspace) {
  const auto plan = plan_topk(8192, 196608, 1024, 132);
  EXPECT_EQ(plan.path, TopKPath::kRows);
  EXPECT_EQ(plan.ctas_per_row, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan_topk(264, 65536, 2048, 132).path, TopKPath::kRows);  // 2 CTAs per SM already
}

// (Without clusters: with them these rows take kStaged, tested below.)
constexpr flashindexer::cuda::ClusterCapacity kNoClusters{-1, -1, -1};

TEST(Heuristics, AFewLongRowsTakeTheGridSelectWithBoundedWorkspace) {
  using flashindexer::cuda::kTopKMinChunk;
  const auto b8 = plan_topk(8, 262144, 2048, 132, kNoClusters);
  EXPECT_EQ(b8.path, TopKPath::kGrid);
  EXPECT_EQ(b8.ctas_per_row, 4 * 132 / 8);  // about 4 CTAs per SM
  EXPECT_EQ(plan_topk(4, 65536, 2048, 132, kNoClusters).ctas_per_row, 65536 / kTopKMinChunk);
  // Two 4096-bin histograms and a 32-byte state per row (zeroed), then K + 4096 keys.
  EXPECT_EQ(flashindexer::cuda::topk_zeroed_bytes(8), size_t(8) * (2 * 4096 * 4 + 32));
  EXPECT_EQ(b8.workspace_bytes, size_t(8) * (2 * 4096 * 4 + 32) + size_t(8) * (2048 + 4096) * 8);
  const auto b1 = plan_topk(1, 262144, 2048, 132, kNoClusters);
  EXPECT_EQ(b1.path, TopKPath::kGrid);
  EXPECT_EQ(b1.ctas_per_row, 262144 / kTopKMinChunk);  // every chunk >= 2048 positions
  // The workspace does not depend on the context; the chunk count is capped.
  const auto huge = plan_topk(1, int64_t(1) << 30, 2048, 132);
  EXPECT_EQ(huge.ctas_per_row, flashindexer::cuda::kTopKMaxChunks);
  EXPECT_EQ(huge.workspace_bytes, b1.workspace_bytes);
}

TEST(Heuristics, MoreRowsOfModestWidthTakeOneCtaPerRow) {
  using flashindexer::cuda::kTopKRowsMaxWidth;
  for (int64_t rows : {67, 128, 263}) {
    const auto plan = plan_topk(rows, kTopKRowsMaxWidth, 2048, 132);
    EXPECT_EQ(plan.path, TopKPath::kRows) << rows;
    EXPECT_EQ(plan.workspace_bytes, 0u) << rows;
  }
  // Up to SMs / 2 such rows: two CTAs per row, one per SM, no workspace (without clusters;
  // with them the rows below 34 take kStaged).
  for (int64_t rows : {5, 9, 64, 66}) {
    const auto plan = plan_topk(rows, kTopKRowsMaxWidth, 2048, 132, kNoClusters);
    EXPECT_EQ(plan.path, TopKPath::kPair) << rows;
    EXPECT_EQ(plan.ctas_per_row, 2) << rows;
    EXPECT_LE(plan.ctas_per_row * rows, 132) << rows;
    EXPECT_EQ(plan.workspace_bytes, 0u) << rows;
  }
  EXPECT_EQ(plan_topk(64, kTopKRowsMaxWidth, 2048, 114).path, TopKPath::kRows);  // an H100 PCIe
  EXPECT_EQ(plan_topk(64, flashindexer::cuda::kTopKPairMinWidth - 1, 2048, 132).path, TopKPath::kRows);
  EXPECT_EQ(plan_topk(4, 65536, 2048, 132, kNoClusters).path, TopKPath::kGrid);
  EXPECT_EQ(plan_topk(8, 65536, 2048, 132, kNoClusters).path, TopKPath::kPair);  // 5 .. 8 rows too
  EXPECT_EQ(plan_topk(8, 20000, 2048, 132).path, TopKPath::kGrid);
  EXPECT_EQ(plan_topk(64, kTopKRowsMaxWidth + 1, 2048, 132).path, TopKPath::kSplit);
}

// Rows that C = 2, 4 or 8 CTAs per row cover in chunks of at most 32,768
// positions, with every row's cluster on the GPU at once (the H200 holds 66, 30 and 15
// clusters of 2, 4 and 8 such CTAs): a cluster per row, no workspace.
TEST(Heuristics, FewRowsByPositionTakeStagedClusters) {
  using flashindexer::cuda::ClusterCapacity;
  using flashindexer::cuda::kTopKStagedMaxChunk;
  const ClusterCapacity h200{66, 30, 15};
  struct Case {
    int64_t rows, width;
    int ctas;  // 0: not kStaged
  };
  for (const Case c : {Case{64, 65536, 2}, Case{66, 65536, 2}, Case{64, 65537, 0}, Case{67, 65536, 0},
                       Case{30, 131072, 4}, Case{31, 131072, 0}, Case{32, 65536, 2}, Case{17, 40000, 4},
                       Case{15, 262144, 8}, Case{16, 262144, 0}, Case{16, 131072, 4}, Case{1, 262144, 8},
                       Case{1, 262145, 0}, Case{8, 32768, 8}, Case{8, 32767, 0}}) {
    const auto plan = plan_topk(c.rows, c.width, 2048, 132, h200);
    EXPECT_EQ(plan.path == TopKPath::kStaged ? plan.ctas_per_row : 0, c.ctas) << c.rows << " x " << c.width;
    if (c.ctas == 0) continue;
    EXPECT_LE(c.rows, h200.at(c.ctas, 132));
    EXPECT_LE(c.width, c.ctas * kTopKStagedMaxChunk);
    EXPECT_EQ(plan.workspace_bytes, 0u);
  }
  // Without a count from the runtime: SMs / C clusters; a negative count: none of that size.
  EXPECT_EQ(plan_topk(33, 131072, 2048, 132).ctas_per_row, 4);
  EXPECT_NE(plan_topk(1, 262144, 2048, 132, ClusterCapacity{66, 30, -1}).path, TopKPath::kStaged);
  EXPECT_EQ(plan_topk(1, 131072, 2048, 132, ClusterCapacity{66, 30, -1}).ctas_per_row, 4);
  EXPECT_EQ(plan_topk(64, 65536, 2048, 114).path, TopKPath::kRows);  // an H100 PCIe: 128 CTAs > 114 SMs
  EXPECT_EQ(plan_topk(64, 65537, 2048, 132, h200).path, TopKPath::kPair);
}

TEST(Heuristics, MoreRowsOfWideRowsAreSplitWithBoundedWorkspace) {
  const auto b64 = plan_topk(64, 262144, 2048, 132);
  EXPECT_EQ(b64.path, TopKPath::kSplit);
  EXPECT_GT(b64.ctas_per_row, 1);
  EXPECT_LE(b64.ctas_per_row * 16384, 262144);  // every split covers >= 16384 positions
  EXPECT_EQ(b64.workspace_bytes, size_t(64) * b64.ctas_per_row * (2048 * 8 + 8));
  // Bounded by the rows, not the context.
  EXPECT_EQ(plan_topk(9, int64_t(1) << 30, 2048, 132).ctas_per_row, (2 * 132 + 8) / 9);
  EXPECT_EQ(plan_topk(9, int64_t(1) << 30, 2048, 132).workspace_bytes,
            plan_topk(9, int64_t(1) << 24, 2048, 132).workspace_bytes);
}

TEST(Heuristics, ShortRowsAreNeverSpread) {
  EXPECT_EQ(plan_topk(1, 4000, 512, 132).ctas_per_row, 1);
  EXPECT_EQ(plan_topk(1, 2048, 2048, 132).ctas_per_row, 1);
  EXPECT_EQ(plan_topk(20, 16000, 2048, 132).ctas_per_row, 1);
  EXPECT_EQ(plan_topk(0, 100000, 512, 132).ctas_per_row, 1);
}

// Every split plan covers [0, max_context) in 64-aligned chunks, each split non-empty.
void expect_covering(const flashindexer::cuda::ScorerPlan& p, int64_t max_context) {
  EXPECT_EQ(p.chunk % 64, 0);
  EXPECT_GE(p.chunk * p.splits, max_context);
  EXPECT_LT(p.chunk * (p.splits - 1), max_context);
}

TEST(Heuristics, PrefillScorerGroupsFillTheMmaWidth) {
  const auto h64 = plan_scorer(false, 8192, 1, 1, 64, 65536, 132);
  EXPECT_EQ(h64.rows_per_group, 4);  // N = 4 x 64 = 256
  EXPECT_EQ(h64.group_stride, 4);
  EXPECT_EQ(h64.groups, 2048);
  EXPECT_EQ(h64.splits, 1);
  const auto h32 = plan_scorer(false, 13, 1, 1, 32, 900, 132);
  EXPECT_EQ(h32.rows_per_group, 8);
  EXPECT_EQ(h32.groups, 2);  // 13 rows: a full group and a partial one
  expect_covering(h32, 900);
}

TEST(Heuristics, DenseFp8ScoresPairsOfRows) {
  using flashindexer::cuda::dense_prefill_rows;
  EXPECT_EQ(dense_prefill_rows(true, true, 64), 2);    // fp8, FP16 chain: N = 128, three consumer warpgroups
  EXPECT_EQ(dense_prefill_rows(true, false, 64), 4);   // fp8, kProduction: N = 256, four consumer warpgroups
  EXPECT_EQ(dense_prefill_rows(true, false, 32), 0);   // kProduction at H = 32: 256 / H
  EXPECT_EQ(dense_prefill_rows(false, false, 64), 0);  // mxfp4: 256 / H
  EXPECT_EQ(dense_prefill_rows(false, true, 64), 0);
  EXPECT_EQ(dense_prefill_rows(true, true, 32), 4);    // H = 32: N = 128 too
  EXPECT_EQ(dense_prefill_rows(true, true, 16), 0);    // other head counts: 256 / H
  const auto pairs = plan_scorer(false, 8191, 1, 1, 64, 65536, 132, flashindexer::cuda::kScorerMinChunkDense, 2);
  EXPECT_EQ(pairs.rows_per_group, 2);
  EXPECT_EQ(pairs.group_stride, 2);
  EXPECT_EQ(pairs.groups, 4096);  // 8,191 rows: the last group holds one
  EXPECT_EQ(pairs.splits, 1);
  EXPECT_EQ(plan_scorer(false, 8192, 1, 1, 64, 65536, 132, flashindexer::cuda::kScorerMinChunkDense, 0).rows_per_group, 4);
}

TEST(Heuristics, FusedFp8TakesPairsOfRowsAtH64) {
  using flashindexer::cuda::fused_prefill_rows;
  EXPECT_EQ(fused_prefill_rows(true, true, 64), 2);    // V3.2, exact mode: N = 128 on three consumer warpgroups
  EXPECT_EQ(fused_prefill_rows(true, false, 64), 0);   // V3.2, kProduction: 256 / H, four warpgroups share tiles
  EXPECT_EQ(fused_prefill_rows(false, true, 64), 0);   // mxfp4: 256 / H
  EXPECT_EQ(fused_prefill_rows(false, false, 64), 0);
  EXPECT_EQ(fused_prefill_rows(true, true, 32), 0);    // H = 32: the fit rule halves the groups where K needs it
  EXPECT_EQ(fused_prefill_rows(true, false, 32), 0);
}

TEST(Heuristics, DecodeScorerSplitsFewRequestsAcrossTheGpu) {
  const auto b64 = plan_scorer(true, 64, 1, 64, 64, 65536, 132);
  EXPECT_EQ(b64.rows_per_group, 1);
  EXPECT_EQ(b64.groups, 64);
  EXPECT_GE(b64.ctas(), 2 * 132);
  EXPECT_EQ(b64.splits, 6);  // 384 CTAs: 2.91 waves of 132 (5 splits: 2.42 waves)
  expect_covering(b64, 65536);
  const auto b1 = plan_scorer(true, 1, 1, 1, 64, 65536, 132);
  EXPECT_EQ(b1.splits, 65536 / flashindexer::cuda::kScorerMinChunk);  // capped by the minimum chunk
  expect_covering(b1, 65536);
  using flashindexer::cuda::kScorerMinChunkDense;
  const auto d1 = plan_scorer(true, 1, 1, 1, 64, 65536, 132, kScorerMinChunkDense);  // dense logits
  EXPECT_EQ(d1.splits, 65536 / kScorerMinChunkDense);
  expect_covering(d1, 65536);
  EXPECT_EQ(plan_scorer(true, 64, 1, 64, 64, 65536, 132, kScorerMinChunkDense).splits, b64.splits);
  const auto n3 = plan_scorer(true, 12, 3, 4, 64, 5000, 132);
  EXPECT_EQ(n3.rows_per_group, 4);  // next_n 3 rounded up
  EXPECT_EQ(n3.group_stride, 3);
  EXPECT_EQ(n3.groups, 4);
  expect_covering(n3, 5000);
  EXPECT_EQ(plan_scorer(true, 4, 1, 4, 64, 0, 132).splits, 1);
}

// Split counts fill the last wave of CTAs as well as any count up to twice the minimum.
TEST(Heuristics, ScorerSplitsBalanceTheLastWave) {
  using flashindexer::cuda::balanced_splits;
  for (const int64_t groups : {1, 3, 8, 32, 64, 100, 128}) {
    const int64_t lo = (264 + groups - 1) / groups;
    const int64_t s = balanced_splits(groups, lo, 1 << 16, 132);
    EXPECT_GE(s, lo);
    EXPECT_LE(s, 2 * lo);
    auto fill = [&](int64_t n) { return double(groups * n) / double((groups * n + 131) / 132 * 132); };
    for (int64_t n = lo; n <= 2 * lo; ++n) EXPECT_GE(fill(s), fill(n)) << groups << " groups, " << n << " splits";
  }
  EXPECT_EQ(balanced_splits(64, 5, 4, 132), 5);  // below the minimum: the minimum (the caller caps it)
  EXPECT_EQ(balanced_splits(8192, 1, 1 << 16, 132), 1);  // the groups fill the GPU: no splits
  EXPECT_EQ(balanced_splits(64, 5, 5, 132), 5);
}

// The fused operator's workspace is rows x max_splits x K keys: max_splits bounds the
// splits of every max_context and does not depend on it (CONTRACT §6).
TEST(Heuristics, ScorerMaxSplitsBoundsSplitsIndependentlyOfContext) {
  for (const int64_t rows : {1, 3, 64, 200, 1052, 8192}) {
    for (const bool decode : {false, true}) {
      const int32_t requests = decode ? int32_t(rows) : 1;
      const auto ref = plan_scorer(decode, rows, 1, requests, 64, 4096, 132);
      for (const int64_t ctx : {int64_t(0), int64_t(64), int64_t(8192), int64_t(262144), int64_t(1) << 22}) {
        const auto p = plan_scorer(decode, rows, 1, requests, 64, ctx, 132);
        EXPECT_LE(p.splits, p.max_splits) << rows << " rows, context " << ctx;
        EXPECT_EQ(p.max_splits, ref.max_splits) << rows << " rows, context " << ctx;
      }
      // 8 K + 8 bytes per (row, split) at K = 2048: within CONTRACT §6's 64 MiB.
      EXPECT_LE(ref.max_splits > 1 ? rows * ref.max_splits * (8 * 2048 + 8) : 0, int64_t(64) << 20) << rows;
    }
  }
  EXPECT_EQ(plan_scorer(false, 8192, 1, 1, 64, 262144, 132).max_splits, 1);  // prefill: no workspace
}

// Groups of N = 256 on alternate tiles: the dense operator's outside the FP16 chain (fp8 in the
// default mode); the fused operator's where a row's buffer holds 2 K keys (and a vote interval
// of pairs). Groups of N <= 128 take alternate tiles anyway (a step of two tiles).
TEST(Heuristics, AlternateTilesForGroupsOf256) {
  using flashindexer::cuda::dense_takes_alternate256;
  using flashindexer::cuda::fused_takes_alternate256;
  // (fp8, exact, H, R)
  EXPECT_TRUE(dense_takes_alternate256(false, false, 64, 4));  // mxfp4, either mode
  EXPECT_TRUE(dense_takes_alternate256(false, true, 64, 4));
  EXPECT_TRUE(dense_takes_alternate256(false, false, 32, 8));  // H = 32
  EXPECT_FALSE(dense_takes_alternate256(true, false, 32, 8));  // fp8 kProduction: linear columns past 128 columns
  EXPECT_FALSE(dense_takes_alternate256(true, false, 64, 4));  // fp8 kProduction at H = 64: four share tiles
  EXPECT_FALSE(dense_takes_alternate256(true, true, 64, 4));   // the FP16 chain shares tiles
  EXPECT_FALSE(dense_takes_alternate256(true, true, 32, 8));
  EXPECT_FALSE(dense_takes_alternate256(false, false, 64, 2));  // N = 128: not a group of 256
  static_assert(dense_takes_alternate256(false, false, 64, 4));  // usable in templates
  // The H200's capacities (H = 64, R = 4): mxfp4 2,458 (2,330 before the 2026-12-02 run's smaller raw
  // ring), fp8 2,746.
  EXPECT_TRUE(fused_takes_alternate256(64, 4, 512, 2458));    // V4-Flash
  EXPECT_TRUE(fused_takes_alternate256(64, 4, 1024, 2458));   // V4-Pro
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 2048, 2458));
  EXPECT_TRUE(fused_takes_alternate256(64, 4, 512, 2330));
  EXPECT_TRUE(fused_takes_alternate256(64, 4, 1024, 2330));   // V4-Pro
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 2048, 2330));  // measured 2.9x slower there
  EXPECT_TRUE(fused_takes_alternate256(64, 4, 512, 2746));
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 512, 2746, 4));  // four consumer warpgroups share tiles
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 512, 2746, 2, true));  // linear columns (fp8 kProduction)
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 2048, 2746));  // V3.2
  // H = 32, fp8 rows of 8: cap 1,372. K = 512 leaves 860 free keys: measured slower there.
  EXPECT_FALSE(fused_takes_alternate256(32, 8, 512, 1372));
  EXPECT_TRUE(fused_takes_alternate256(32, 8, 348, 1372));    // 1,024 free
  EXPECT_FALSE(fused_takes_alternate256(32, 8, 349, 1372));
  EXPECT_TRUE(fused_takes_alternate256(32, 8, 1024, 2048));   // 2 K = cap, 1,024 free
  EXPECT_FALSE(fused_takes_alternate256(32, 8, 1025, 2048));
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 1400, 2746));  // 1,346 free, but 2 K > cap
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 1200, 2200));  // 2 K <= cap, but 1,000 free
  EXPECT_FALSE(fused_takes_alternate256(64, 1, 512, 4096));   // decode next_n = 1: N = 64
  // Small K: the free room decides (it also holds the final sort's 512 keys, fused_min_capacity).
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 8, 1031));
  EXPECT_TRUE(fused_takes_alternate256(64, 4, 8, 1032));
  EXPECT_FALSE(fused_takes_alternate256(64, 4, 600, 1100));  // 2 K <= cap, 500 free
  for (int32_t k = 1; k <= 2048; k += 37)
    for (int32_t cap = 512; cap < 5000; cap += 97)
      if (fused_takes_alternate256(64, 4, k, cap)) {
        ASSERT_GE(cap, flashindexer::cuda::fused_min_capacity(k, 128)) << "k " << k << " cap " << cap;
        ASSERT_GE(cap, 2 * k) << "k " << k << " cap " << cap;
        ASSERT_GE(cap - k, flashindexer::cuda::kFusedAlternateFreeKeys) << "k " << k << " cap " << cap;
      }
}

// A step of the fused operator's lockstep sink: one tile per row when the two consumer
// warpgroups share the tiles of a group of N = H x R = 256 columns, one tile per consumer
// warpgroup otherwise (N <= 128, or N = 256 on alternate tiles): a pair, or a triple.
TEST(Heuristics, FusedStepPutsFollowTheTileSharing) {
  using flashindexer::cuda::fused_step_puts;
  EXPECT_EQ(fused_step_puts(64, 4), 64);
  EXPECT_EQ(fused_step_puts(32, 8), 64);
  EXPECT_EQ(fused_step_puts(64, 4, true), 128);
  EXPECT_EQ(fused_step_puts(32, 8, true), 128);
  EXPECT_EQ(fused_step_puts(64, 2), 128);
  EXPECT_EQ(fused_step_puts(64, 2, true), 128);  // N = 128 takes alternate tiles either way
  EXPECT_EQ(fused_step_puts(32, 1), 128);
  EXPECT_EQ(fused_step_puts(64, 2, false, 3), 192);  // three consumer warpgroups: a triple of tiles
  EXPECT_EQ(fused_step_puts(32, 4, false, 3), 192);
  EXPECT_EQ(fused_step_puts(64, 4, false, 3), 64);   // shared tiles: one tile per pair of warpgroups
  EXPECT_EQ(fused_step_puts(64, 4, false, 4), 128);  // four: two pairs, two tiles
  using flashindexer::cuda::fused_votes_per_warpgroup;
  EXPECT_TRUE(fused_votes_per_warpgroup(64, 4, false, 2));   // two warpgroups on shared tiles: own rows
  EXPECT_TRUE(fused_votes_per_warpgroup(32, 8, false, 2));
  EXPECT_FALSE(fused_votes_per_warpgroup(64, 4, false, 4));  // four on shared tiles: two on each row
  EXPECT_FALSE(fused_votes_per_warpgroup(64, 4, true, 2));   // alternate tiles: every warpgroup, every row
  EXPECT_FALSE(fused_votes_per_warpgroup(64, 2, false, 4));  // N = 128
}

// More consumer warpgroups on fp8 groups of N = 128 (V3.2 pairs of rows, GLM-5 groups of 4,
// decode next_n = 2 at H = 64): three in the FP16 chain, four in the FP8 chain at H = 64;
// never for mxfp4 or other group sizes.
TEST(Heuristics, FusedConsumerWarpgroupsOnFp8GroupsOf128) {
  using flashindexer::cuda::fused_consumer_wgs;
  EXPECT_EQ(fused_consumer_wgs(true, true, 64, 2), 3);    // fp8, exact mode: FP16 chain
  EXPECT_EQ(fused_consumer_wgs(true, true, 32, 4), 3);
  EXPECT_EQ(fused_consumer_wgs(true, false, 64, 2), 4);   // fp8, kProduction: FP8 chain
  EXPECT_EQ(fused_consumer_wgs(true, false, 32, 4), 2);   // H = 32 (GLM-5): two
  EXPECT_EQ(fused_consumer_wgs(false, true, 64, 2), 2);   // mxfp4
  EXPECT_EQ(fused_consumer_wgs(false, false, 64, 2), 2);
  EXPECT_EQ(fused_consumer_wgs(true, true, 64, 4), 2);    // N = 256
  EXPECT_EQ(fused_consumer_wgs(true, false, 64, 4), 4);   // kProduction at H = 64: four share tiles, as the dense kernel
  for (const bool exact : {false, true})  // fp8: the dense kernel's warpgroups
    for (const int32_t h : {32, 64})
      for (int32_t rows = 1; h * rows <= 256; rows *= 2)
        EXPECT_EQ(fused_consumer_wgs(true, exact, h, rows), flashindexer::cuda::dense_consumer_wgs(true, exact, h, rows));
  EXPECT_EQ(fused_consumer_wgs(true, true, 64, 1), 2);    // N = 64
  EXPECT_EQ(fused_consumer_wgs(true, true, 32, 8), 2);
  EXPECT_EQ(fused_consumer_wgs(true, true, 32, 2), 2);
}

// The dense kernel's consumer warpgroups (fp8, exact, H, R): three on register-key mxfp4 groups
// of N <= 64 and on fp8 groups of N = 128 in the FP16 chain; four on fp8 at H = 64 in
// kProduction (prefill groups of 4 rows, decode pairs); else two.
TEST(Heuristics, DenseConsumerWarpgroups) {
  using flashindexer::cuda::dense_consumer_wgs;
  EXPECT_EQ(dense_consumer_wgs(false, false, 64, 1), 3);  // mxfp4 decode, next_n = 1
  EXPECT_EQ(dense_consumer_wgs(false, true, 32, 2), 3);
  EXPECT_EQ(dense_consumer_wgs(false, false, 64, 2), 2);  // mxfp4 N = 128
  EXPECT_EQ(dense_consumer_wgs(false, true, 64, 4), 2);   // mxfp4 prefill
  EXPECT_EQ(dense_consumer_wgs(true, true, 64, 2), 3);    // fp8 exact: FP16 chain on N = 128
  EXPECT_EQ(dense_consumer_wgs(true, true, 32, 4), 3);
  EXPECT_EQ(dense_consumer_wgs(true, true, 64, 4), 2);
  EXPECT_EQ(dense_consumer_wgs(true, false, 64, 4), 4);   // V3.2 prefill, kProduction
  EXPECT_EQ(dense_consumer_wgs(true, false, 64, 2), 4);   // decode next_n = 2
  EXPECT_EQ(dense_consumer_wgs(true, false, 64, 1), 2);   // decode next_n = 1
  EXPECT_EQ(dense_consumer_wgs(true, false, 32, 8), 2);   // GLM-5
  static_assert(dense_consumer_wgs(true, false, 64, 4) == 4);  // usable in templates
}

// The sampled start on alternate tiles (fused_topk.cu) takes
// 2 x fused_sample_tiles(cap, K, 128, every) tiles: a whole number of vote intervals of
// pairs of tiles, whose appends (64 per tile and row) stay within the vote limit, so the
// sample phase never compacts, and an even count (the guess comes at a step boundary).
TEST(Heuristics, SampledPairsStayWithinTheVoteLimit) {
  using namespace flashindexer::cuda;
  for (const int32_t k : {512, 1024, 2048})
    for (int32_t cap = fused_min_capacity(k, 128); cap < 6000; cap += 53) {
      const int32_t every = fused_vote_interval(cap, k, 128);
      const int32_t steps = fused_sample_tiles(cap, k, 128, every);
      const int64_t tiles = 2 * int64_t(steps);
      ASSERT_EQ(steps % every, 0) << "k " << k << " cap " << cap;
      ASSERT_LE(tiles * 64, fused_vote_limit(cap, 128, every)) << "k " << k << " cap " << cap;
      ASSERT_EQ(tiles % 2, 0);
    }
  // mxfp4 prefill on the H200 until 2026-12-02 (cap 2,330, K = 512): votes every 4 steps, 2 x 12 = 24 sample
  // tiles, as many as shared tiles take (24 steps of one tile, votes every 8).
  EXPECT_EQ(fused_vote_interval(2330, 512, 128), 4);
  EXPECT_EQ(fused_sample_tiles(2330, 512, 128, 4), 12);
  EXPECT_EQ(fused_sample_tiles(2330, 512, 64, fused_vote_interval(2330, 512, 64)), 24);
}

// The vote plan: plain votes keep one interval of a step's appends above the limit; deferred
// votes (acted on two votes later, the warpgroups up to two intervals apart) three; the
// sampled start's appends stay within the limit, in whole vote intervals.
TEST(Heuristics, VotePlanReservesRoomForTheIntervalsBeforeACompaction) {
  using flashindexer::cuda::fused_min_capacity;
  using flashindexer::cuda::fused_vote_plan;
  for (const int32_t step : {128, 192})  // a pair or a triple of tiles
    for (const bool deferred : {false, true})
      for (const int32_t k : {512, 1024, 2048})
        for (int32_t cap = fused_min_capacity(k, (deferred ? 3 : 1) * step); cap < 6000; cap += 41) {
          const auto p = fused_vote_plan(cap, k, step, deferred);
          const int64_t room = int64_t(deferred ? 3 : 1) * p.every * step;
          ASSERT_EQ(p.limit + room, cap) << "deferred " << deferred << " k " << k << " cap " << cap;
          ASSERT_GE(p.limit, k) << "deferred " << deferred << " k " << k << " cap " << cap;
          ASSERT_EQ(p.sample_steps % p.every, 0);
          ASSERT_LE(int64_t(p.sample_steps) * step, p.limit);
        }
  // V4-Pro prefill on the H200 (mxfp4, cap 2,458, K = 1024): plain votes every 4 pairs of
  // tiles below 1,946 keys; deferred every 2 below 1,690.
  EXPECT_EQ(fused_vote_plan(2458, 1024, 128, false).every, 4);
  EXPECT_EQ(fused_vote_plan(2458, 1024, 128, false).limit, 1946);
  EXPECT_EQ(fused_vote_plan(2458, 1024, 128, true).every, 2);
  EXPECT_EQ(fused_vote_plan(2458, 1024, 128, true).limit, 1690);
}

// The fused operator's vote interval: a power of two that keeps appends in bounds
// (cap >= K + every x step: one interval of room above the vote limit) whenever the
// capacity meets the minimum, and prefers the longest interval that leaves as much room free
// as it reserves.
TEST(Heuristics, FusedVoteIntervalKeepsAppendsInBounds) {
  using flashindexer::cuda::fused_min_capacity;
  using flashindexer::cuda::fused_vote_interval;
  using flashindexer::cuda::fused_vote_limit;
  for (const int32_t step : {64, 128})
    for (const int32_t k : {1, 7, 512, 1000, 1024, 2048})
      for (int32_t cap = fused_min_capacity(k, step); cap < 9000; cap += 37) {
        const int32_t every = fused_vote_interval(cap, k, step);
        ASSERT_GE(every, 1);
        ASSERT_LE(every, 8);
        ASSERT_EQ(every & (every - 1), 0) << every;
        ASSERT_LE(int64_t(k) + int64_t(every) * step, cap) << "k " << k << " cap " << cap;
        ASSERT_GE(fused_vote_limit(cap, step, every), k) << "k " << k << " cap " << cap;
        ASSERT_EQ(fused_vote_limit(cap, step, every) + int64_t(every) * step, cap);
        if (every < 8 && int64_t(k) + 2 * int64_t(2 * every) * step <= cap) ADD_FAILURE() << "not the longest";
      }
  EXPECT_EQ(fused_min_capacity(2048, 64), 2048 + 64);
  EXPECT_EQ(fused_min_capacity(1000, 64), 1064);
  EXPECT_EQ(fused_min_capacity(1000, 128), 1128);
  EXPECT_EQ(fused_min_capacity(7, 128), 512);    // the final sort's least size
  EXPECT_EQ(fused_min_capacity(300, 64), 512);
  EXPECT_EQ(fused_min_capacity(513, 64), 1024);
  EXPECT_EQ(fused_vote_interval(2746, 2048, 64), 4);  // fp8 prefill, K = 2048 (H200: cap 2,746; was 2)
  EXPECT_EQ(fused_vote_interval(3800, 2048, 64), 8);
  EXPECT_EQ(fused_vote_interval(3000, 2048, 64), 4);  // 2,048 + 2 x 8 x 64 > 3,000
  EXPECT_EQ(fused_vote_interval(2330, 512, 64), 8);   // mxfp4 prefill, K = 512 (H200: cap 2,330)
  EXPECT_EQ(fused_vote_interval(2330, 1024, 64), 8);  // mxfp4 prefill, K = 1024
  EXPECT_EQ(fused_vote_interval(2048 + 64, 2048, 64), 1);  // the least capacity: one step of room
}

}  // namespace
// The fused decode cluster path (fused_staged.cu): every plan covers the context in chunks
// a CTA's stage holds, leaves no segment empty, and keeps the workspace's segments bounded;
// the H200's decode points take the shapes the cost model was built around.
TEST(Heuristics, FusedDecodeClustersCoverTheRowInBoundedChunks) {
  using flashindexer::cuda::ClusterCapacity;
  using flashindexer::cuda::kFusedStagedMaxSegments;
  using flashindexer::cuda::kFusedStagedMergeFlatKeys;
  using flashindexer::cuda::kScorerTile;
  using flashindexer::cuda::kTopKStagedMaxChunk;
  using flashindexer::cuda::plan_fused_staged;
  const ClusterCapacity h200{66, 30, 15};
  for (const bool by_position : {true, false})
  for (const int32_t k : {512, 1024, 2048})
    for (const int64_t rows : {1, 2, 5, 8, 16, 32, 64, 65, 128, 1000})
      for (const int64_t width : {1, 64, 100, 5000, 32768, 40000, 65536, 131072, 262144, 1000000}) {
        const auto plan = plan_fused_staged(rows, width, k, 132, h200, 1, by_position);
        const std::string what = std::to_string(rows) + " x " + std::to_string(width) + " k " + std::to_string(k) +
                                 (by_position ? " by position" : " by rank");
        ASSERT_TRUE(plan.cluster == 2 || plan.cluster == 4 || plan.cluster == 8) << what;
        EXPECT_GE(plan.segments, 1) << what;
        EXPECT_LE(plan.segments, kFusedStagedMaxSegments) << what;
        EXPECT_EQ(plan.chunk % kScorerTile, 0) << what;
        EXPECT_LE(plan.chunk, kTopKStagedMaxChunk) << what;
        EXPECT_GE(plan.ctas_per_row() * plan.chunk, width) << what;  // every position has a CTA
        // The last segment holds positions: its first chunk starts inside the row.
        EXPECT_LT(int64_t(plan.cluster) * (plan.segments - 1) * plan.chunk, width) << what;
        // By rank, up to the contract's longest rows (262,144 C4 positions), the segments' top K
        // fit the ordered merge's flat buffer (beyond it the merge pushes them through its
        // selector: on the H200, 8 x 13 segments at K = 2048 took 78 us against 8 x 5's 60,
        // docs/experiments.md). The cluster merge (by position) holds any segment count.
        if (!by_position && width <= 262144 && plan.segments > 1) {
          EXPECT_LE(int64_t(plan.segments) * k, kFusedStagedMergeFlatKeys) << what;
        }
      }
  // 64 x 65,536 (v4 decode B = 64): one segment, clusters of two, all at once on 132 SMs.
  auto plan = plan_fused_staged(64, 65536, 512, 132, h200);
  EXPECT_EQ(plan.cluster, 2);
  EXPECT_EQ(plan.segments, 1);
  EXPECT_EQ(plan.chunk, 32768);
  // One request: segments of clusters of 8 in one wave, as many as the merge takes cheaply.
  // By rank (the ordered merge; the fastest plans of the H200's sweeps at 65,536: K = 2048 5,
  // K = 1024 10, K = 512 11-13); by position (the cluster merge: 8 x 13 the fastest at every K
  // in 2026-11-30 and 2026-12-04).
  for (const int32_t k : {512, 1024, 2048}) {
    plan = plan_fused_staged(1, 65536, k, 132, h200, 1, false);
    EXPECT_EQ(plan.cluster, 8) << k;
    EXPECT_LE(plan.segments, int64_t(h200.at(8, 132))) << k;  // one wave of clusters
    EXPECT_EQ(plan.segments, k == 2048 ? 5 : k == 1024 ? 10 : 13) << k;
    plan = plan_fused_staged(1, 65536, k, 132, h200);
    EXPECT_EQ(plan.cluster, 8) << k;
    EXPECT_EQ(plan.segments, 13) << k;
  }
  // the 2026-12-04 run's sweep, by position: a request's two speculative rows of 32,768 take clusters
  // of two, 16 segments each (V3.2: 36.9 us against the old pick 8 x 7's 43.9; V4-Pro 37.2
  // against 41.9); B8 x 8,192 next_n 2 rows alone, 2 x 4 (V3.2 38.3 us against 4 x 1's 41.5
  // and 2 x 8 pairs' 43.5).
  for (const int32_t k : {1024, 2048}) {
    plan = plan_fused_staged(2, 32768, k, 132, h200, 2, true, 2);
    EXPECT_EQ(plan.rows_per_cta, 1) << k;
    EXPECT_EQ(plan.cluster, 2) << k;
    EXPECT_EQ(plan.segments, 16) << k;
  }
  plan = plan_fused_staged(16, 8192, 2048, 132, h200, 2, true, 2);
  EXPECT_EQ(plan.rows_per_cta, 1);
  EXPECT_EQ(plan.cluster, 2);
  EXPECT_EQ(plan.segments, 4);
  // Longer rows at K = 2048: by rank they fill the ordered merge's larger buffer (8 x 2,048
  // keys: at 262,144 positions 8 segments ran 87 us, 5 segments 95 us); by position one wave
  // of 8-CTA clusters (15 on the H200; 8 x 14 ran 60.9 us, 8 x 15 61.5, 8 x 8 71.2).
  EXPECT_EQ(plan_fused_staged(1, 262144, 2048, 132, h200, 1, false).segments, 8);
  EXPECT_EQ(plan_fused_staged(1, 262144, 2048, 132, h200).segments, 15);
  // Speculative rows (next_n 2): one row per segment too, up to B x context = 4M positions.
  EXPECT_EQ(plan_fused_staged(2, 131072, 2048, 132, h200, 2).cluster, 8);
  EXPECT_EQ(plan_fused_staged(128, 32768, 2048, 132, h200, 2).cluster, 2);
  EXPECT_EQ(plan_fused_staged(128, 131072, 2048, 132, h200, 2).cluster, 0);
  EXPECT_EQ(plan_fused_staged(128, 131072, 2048, 132, h200, 1).cluster, 2);
  // fp8 speculative rows in pairs (one CTA scores a request's two rows): half the chunk, up to
  // 8M positions of keys (B x context), where the cost model finds them cheaper than rows on
  // their own (those within 4M positions).
  using flashindexer::cuda::fused_staged_rows_per_cta;
  using flashindexer::cuda::kFusedStagedPairMaxChunk;
  EXPECT_EQ(fused_staged_rows_per_cta(true, 2), 2);
  EXPECT_EQ(fused_staged_rows_per_cta(false, 2), 1);  // mxfp4: its register-key path would spill
  EXPECT_EQ(fused_staged_rows_per_cta(true, 1), 1);
  EXPECT_EQ(fused_staged_rows_per_cta(true, 4), 1);
  for (const int64_t requests : {1, 3, 8, 64, 128})
    for (const int64_t width : {100, 32768, 65536, 131072, 262144}) {
      const auto spec_plan = plan_fused_staged(requests * 2, width, 2048, 132, h200, 2, true, 2);
      const std::string what = std::to_string(requests) + " x 2 x " + std::to_string(width);
      if (requests * width > (int64_t{1} << 24)) {
        EXPECT_EQ(spec_plan.cluster, 0) << what;  // the lockstep kernel's
        continue;
      }
      ASSERT_GT(spec_plan.cluster, 0) << what;
      EXPECT_LE(spec_plan.chunk, spec_plan.rows_per_cta == 2 ? kFusedStagedPairMaxChunk : kTopKStagedMaxChunk)
          << what;
      EXPECT_GE(spec_plan.ctas_per_row() * spec_plan.chunk, width) << what;
      EXPECT_LT(int64_t(spec_plan.cluster) * (spec_plan.segments - 1) * spec_plan.chunk, width) << what;
      if (requests * width > (int64_t{1} << 22)) {  // beyond rows alone
        EXPECT_EQ(spec_plan.rows_per_cta, 2) << what;
      }
    }
  // The H200's V3.2 sweep (docs/experiments.md, 2026-11-30): B1 rows alone, B8 and up pairs.
  EXPECT_EQ(plan_fused_staged(2, 131072, 2048, 132, h200, 2, true, 2).rows_per_cta, 1);
  EXPECT_EQ(plan_fused_staged(2, 32768, 2048, 132, h200, 2, true, 2).rows_per_cta, 1);
  EXPECT_EQ(plan_fused_staged(16, 131072, 2048, 132, h200, 2, true, 2).rows_per_cta, 2);
  EXPECT_EQ(plan_fused_staged(64, 131072, 2048, 132, h200, 2, true, 2).rows_per_cta, 2);
  EXPECT_EQ(plan_fused_staged(128, 32768, 2048, 132, h200, 2, true, 2).rows_per_cta, 2);
  EXPECT_EQ(plan_fused_staged(256, 32768, 2048, 132, h200, 2, true, 2).rows_per_cta, 2);
  // Pairs up to 16M positions (B128 x 131,072: 2 x 4 pairs, the fastest plan of the 2026-11-30 run's
  // sweep), the lockstep kernel beyond.
  const auto b128 = plan_fused_staged(256, 131072, 2048, 132, h200, 2, true, 2);
  EXPECT_EQ(b128.rows_per_cta, 2);
  EXPECT_EQ(b128.cluster, 2);
  EXPECT_EQ(b128.segments, 4);
  EXPECT_EQ(plan_fused_staged(256, 262144, 2048, 132, h200, 2, true, 2).cluster, 0);
  // The fastest plans of the 2026-11-30 run's sweeps (H200, V3.2 next_n = 2, 81fa74a): B8 x 32,768 2 x 8
  // pairs, B64 and B128 x 32,768 2 x 1 pairs (one segment: a pair's chunk of 16,384), B32 x
  // 131,072 2 x 4 pairs.
  const auto expect_pairs = [&](int64_t requests, int64_t width, int segments) {
    const auto pick = plan_fused_staged(2 * requests, width, 2048, 132, h200, 2, true, 2);
    const std::string what = std::to_string(requests) + " requests x " + std::to_string(width);
    EXPECT_EQ(pick.rows_per_cta, 2) << what;
    EXPECT_EQ(pick.cluster, 2) << what;
    EXPECT_EQ(pick.segments, segments) << what;
  };
  expect_pairs(8, 32768, 8);
  expect_pairs(64, 32768, 1);
  expect_pairs(128, 32768, 1);
  expect_pairs(32, 131072, 4);
  // Pairs only of next_n = 2 rows, whole requests.
  EXPECT_EQ(plan_fused_staged(3, 65536, 2048, 132, h200, 2, true, 2).cluster, 0);
  EXPECT_EQ(plan_fused_staged(4, 65536, 2048, 132, h200, 1, true, 2).cluster, 0);
  EXPECT_EQ(plan_fused_staged(8, 65536, 2048, 132, h200, 4, true, 2).cluster, 0);
  // Rows on their own keep their plans (rows_per_cta 1 is the default).
  EXPECT_EQ(plan_fused_staged(2, 131072, 2048, 132, h200, 2, true, 1).segments,
            plan_fused_staged(2, 131072, 2048, 132, h200, 2).segments);
  // Wider than 16 segments x 8 CTAs x 32,768 positions: none fits.
  EXPECT_EQ(plan_fused_staged(1, int64_t(kFusedStagedMaxSegments) * 8 * kTopKStagedMaxChunk + 1, 512, 132, h200).cluster, 0);
  // No cluster of any size: not this path.
  EXPECT_EQ(plan_fused_staged(64, 65536, 512, 132, ClusterCapacity{-1, -1, -1}).cluster, 0);
  EXPECT_EQ(plan_fused_staged(0, 65536, 512, 132, h200).cluster, 0);
}

// The cluster merge's layout: a CTA per segment while rows x segments CTAs fit one wave of two
// per SM, else two segments per CTA; never more than 8 CTAs or 2 segments a CTA, none empty.
TEST(Heuristics, ClusterMergePairsSegmentsBeyondOneWave) {
  using flashindexer::cuda::cluster_merge_ctas;
  using flashindexer::cuda::cluster_merge_pairs_segments;
  EXPECT_FALSE(cluster_merge_pairs_segments(1, 100000, 132));
  EXPECT_FALSE(cluster_merge_pairs_segments(2, 132, 132));  // 264 CTAs: one wave
  EXPECT_TRUE(cluster_merge_pairs_segments(2, 133, 132));
  EXPECT_TRUE(cluster_merge_pairs_segments(2, 256, 132));   // V3.2 B128 x 32,768, next_n = 2
  EXPECT_FALSE(cluster_merge_pairs_segments(13, 1, 132));   // B1
  for (int s = 2; s <= flashindexer::cuda::kFusedStagedMaxSegments; ++s)
    for (const bool paired : {false, true}) {
      const int ctas = cluster_merge_ctas(s, paired), per = (s + ctas - 1) / ctas;
      const std::string what = std::to_string(s) + (paired ? " paired" : "");
      EXPECT_GE(ctas, 1) << what;
      EXPECT_LE(ctas, 8) << what;
      EXPECT_LE(per, 2) << what;
      EXPECT_EQ(per, paired || s > 8 ? 2 : 1) << what;
      EXPECT_LT((ctas - 1) * per, s) << what;  // the last CTA holds a segment
    }
}
