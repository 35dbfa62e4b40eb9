// One plan per call: can_implement, workspace_size and the run read the plan that make_plan
// made once; a run under a plan decides nothing again and refuses a plan of another call.
#include "core/backend.h"
#include "test_util.h"
#if FLASHINDEXER_WITH_CUDA
#include "cuda/plan/call_plan.h"
#endif

namespace fit {
namespace {

struct Fused {
  HostProblem h = make(small_spec());
  IndexerProblem p = h.view();
  HostResults out;
  std::vector<uint8_t> ws;
  Launch l = cpu(2);
  Fused() { out.reset(p.rows.rows(), p.k, true); }
  void give_workspace(size_t bytes) {
    ws.assign(bytes + 64, 0xCD);
    l.workspace = ws.data();
    l.workspace_bytes = bytes;
  }
};

TEST(Plan, EachEntryPointPlansOnceAndTheRunUnderAPlanNotAgain) {
  Fused f;
  uint64_t before = plans_made();
  ASSERT_TRUE(can_implement(f.p, Operator::kFusedTopK, f.l).is_ok());
  EXPECT_EQ(plans_made() - before, 1u) << "can_implement";
  size_t bytes = 0;
  before = plans_made();
  ASSERT_TRUE(workspace_size(f.p, Operator::kFusedTopK, f.l, &bytes).is_ok());
  EXPECT_EQ(plans_made() - before, 1u) << "workspace_size";
  f.give_workspace(bytes);
  before = plans_made();
  ASSERT_TRUE(fused_topk(f.p, f.out.outputs(), f.l).is_ok());
  EXPECT_EQ(plans_made() - before, 1u) << "a run without a plan makes one, once";
  const HostResults unplanned = f.out;

  // The caller's plan: support, workspace and the run from the same value.
  Plan plan;
  before = plans_made();
  ASSERT_TRUE(make_plan(f.p, Operator::kFusedTopK, f.l, &plan).is_ok());
  EXPECT_EQ(plans_made() - before, 1u);
  EXPECT_EQ(plan.backend, Backend::kCpu);
  EXPECT_EQ(plan.op, Operator::kFusedTopK);
  EXPECT_EQ(plan.workspace_bytes, bytes);
  f.out.reset(f.p.rows.rows(), f.p.k, true);
  before = plans_made();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fused_topk(plan, f.p, f.out.outputs(), f.l).is_ok());
  EXPECT_EQ(plans_made() - before, 0u) << "runs under a plan plan nothing";
  EXPECT_EQ(first_difference(f.out, unplanned), "");
  const std::string d = describe(plan);
  EXPECT_NE(d.find("backend cpu"), std::string::npos) << d;
  EXPECT_NE(d.find("fused_topk"), std::string::npos) << d;
}

TEST(Plan, ARunRefusesAPlanOfAnotherCall) {
  Fused f;
  Plan plan;
  ASSERT_TRUE(make_plan(f.p, Operator::kFusedTopK, f.l, &plan).is_ok());
  f.give_workspace(plan.workspace_bytes);
  IndexerProblem other = f.p;
  other.k = f.p.k / 2;  // another shape
  Status s = fused_topk(plan, other, f.out.outputs(), f.l);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("plan"), std::string::npos) << s.to_string();
  // Another operator.
  std::vector<float> logits(size_t(f.p.rows.rows() * f.p.rows.max_context));
  s = dense_logits(plan, f.p, LogitsOutput{logits.data(), f.p.rows.max_context, nullptr}, f.l);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("plan.op"), std::string::npos) << s.to_string();
  // Less workspace than the plan asks for.
  Launch small = f.l;
  small.workspace_bytes = plan.workspace_bytes - 1;
  EXPECT_EQ(fused_topk(plan, f.p, f.out.outputs(), small).code(), StatusCode::kWorkspaceTooSmall);
  // Device data may change under the same plan: other windows of the same shape.
  ASSERT_TRUE(fused_topk(plan, f.p, f.out.outputs(), f.l).is_ok());
}

TEST(Plan, TopKOverLogitsPlansOnce) {
  Fused f;
  const HostResults d = dense_topk(f.h, true);
  TopKProblem t;
  t.logits = d.logits.data();
  t.logits_row_stride = d.logits_width;
  t.rows = f.p.rows;
  t.pages = f.p.cache.pages;
  t.k = f.p.k;
  t.order = f.p.order;
  Plan plan;
  const uint64_t before = plans_made();
  ASSERT_TRUE(make_plan(t, f.l, &plan).is_ok());
  f.give_workspace(plan.workspace_bytes);
  HostResults out;
  out.reset(t.rows.rows(), t.k, true);
  ASSERT_TRUE(topk_over_logits(plan, t, out.outputs(), f.l).is_ok());
  EXPECT_EQ(plans_made() - before, 1u);
  EXPECT_EQ(first_difference(out, d), "");
}

#if FLASHINDEXER_WITH_CUDA
// The sm_90a planner is host code: its plans for the H200's limits, without a GPU.
flashindexer::cuda::DeviceLimits h200() { return {132, 232448, {}}; }

// V3.2 prefill shape (fp8, H = 64, K = 2048), 8,192 causal rows x 65,536: only host shapes
// are read, so no buffers are needed.
IndexerProblem v32_prefill_shape() {
  IndexerProblem p;
  p.cache.format = CacheFormat::kFp8E4M3;
  p.cache.pages.page_size = 64;
  p.queries.num_heads = 64;
  p.rows.num_rows = 8192;
  p.rows.num_requests = 1;
  p.rows.max_context = 65536;
  p.k = 2048;
  return p;
}

TEST(Plan, CudaPlannerDecidesOnceFromShapes) {
  using namespace flashindexer::cuda;
  IndexerProblem p = v32_prefill_shape();
  CallPlan a, b;
  ASSERT_TRUE(plan_indexer(p, Operator::kFusedTopK, h200(), &a).is_ok());
  ASSERT_TRUE(plan_indexer(p, Operator::kFusedTopK, h200(), &b).is_ok());
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "a pure function of shapes and limits";
  EXPECT_EQ(a.fused, FusedPath::kLockstep);
  EXPECT_GE(a.lockstep.cap, fused_topk_min_capacity(p.cache.format, p.accuracy, 64, a.scorer.rows_per_group, p.k));
  EXPECT_GE(a.lockstep.vote_limit, uint32_t(p.k));
  EXPECT_NE(describe(a).find("lockstep"), std::string::npos) << describe(a);
  // Decode, B = 64 x 65,536 (mxfp4, K = 512): the clusters, their workspace.
  p.cache.format = CacheFormat::kMxfp4;
  p.rows.form = RowForm::kDecode;
  p.rows.num_requests = 64;
  p.k = 512;
  ASSERT_TRUE(plan_indexer(p, Operator::kFusedTopK, h200(), &a).is_ok());
  EXPECT_EQ(a.fused, FusedPath::kCluster);
  EXPECT_EQ(a.workspace_bytes, fused_staged_workspace_bytes(p, a.staged));
  EXPECT_TRUE(fused_staged_applies(p, a.staged, h200().smem_optin));
  // Unsupported shapes say why, naming the argument.
  p.k = 4096;
  const Status s = plan_indexer(p, Operator::kFusedTopK, h200(), &a);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message().rfind("k: ", 0), 0u) << s.to_string();
  p.k = 512;
  p.queries.num_heads = 48;
  EXPECT_EQ(plan_indexer(p, Operator::kDenseLogits, h200(), &a).code(), StatusCode::kUnsupported);
}

// The dense operator's prefill groups are its own for fp8 (scores do not depend on them), in
// each mode and at every K: a change of the fused operator's groups must not move them.
TEST(Plan, DenseFp8PrefillGroupsIgnoreTheFusedOnes) {
  using namespace flashindexer::cuda;
  IndexerProblem p = v32_prefill_shape();
  for (const ScoreAccuracy mode : {ScoreAccuracy::kProduction, ScoreAccuracy::kExact}) {
    for (const int32_t k : {512, 1024, 2048}) {
      p.accuracy = mode;
      p.k = k;
      CallPlan dense;
      ASSERT_TRUE(plan_indexer(p, Operator::kDenseLogits, h200(), &dense).is_ok());
      EXPECT_EQ(dense.scorer.rows_per_group, dense_prefill_rows(true, mode == ScoreAccuracy::kExact, 64))
          << "mode " << int(mode) << " k " << k;
      // exact: N = 128 on three consumer warpgroups; production: N = 256 on four (shared tiles)
      EXPECT_EQ(dense.scorer.rows_per_group, mode == ScoreAccuracy::kExact ? 2 : 4);
    }
  }
}

// The fused operator's fp8 prefill at H = 64: production takes the dense kernel's groups (4
// rows, four consumer warpgroups on shared tiles: a step is two tiles, 128 keys per row, and
// the votes are deferred), at every K; exact mode pairs of rows on three warpgroups. Without
// the f16 query room a production group of 4 rows holds K plus twice three deferred intervals
// of two steps at K = 2,048 (2 x 3 x 2 x 128 keys), so it votes every two steps.
TEST(Plan, FusedFp8PrefillGroups) {
  using namespace flashindexer::cuda;
  auto plan_of = [](ScoreAccuracy mode, int32_t k, Operator op) {
    IndexerProblem p = v32_prefill_shape();
    p.accuracy = mode;
    p.k = k;
    CallPlan c;
    EXPECT_TRUE(plan_indexer(p, op, h200(), &c).is_ok());
    return c;
  };
  const int32_t ks[] = {512, 1024, 2048};
  for (const int32_t k : ks) {
    const CallPlan prod = plan_of(ScoreAccuracy::kProduction, k, Operator::kFusedTopK);
    const CallPlan exact = plan_of(ScoreAccuracy::kExact, k, Operator::kFusedTopK);
    EXPECT_EQ(prod.scorer.rows_per_group,
              plan_of(ScoreAccuracy::kProduction, k, Operator::kDenseLogits).scorer.rows_per_group)
        << k;
    EXPECT_EQ(prod.lockstep.consumer_wgs, 4) << k;
    EXPECT_FALSE(prod.lockstep.alternate256) << k;
    EXPECT_EQ(prod.lockstep.step_puts, 128) << k;
    EXPECT_EQ(exact.scorer.rows_per_group, 2) << k;
    EXPECT_EQ(exact.lockstep.consumer_wgs, 3) << k;
    EXPECT_EQ(exact.lockstep.step_puts, 192) << k;
    for (const CallPlan* c : {&prod, &exact}) {
      const FusedLockstepPlan& l = c->lockstep;
      EXPECT_EQ(c->fused, FusedPath::kLockstep) << k;
      EXPECT_EQ(c->scorer.splits, 1) << k;
      EXPECT_GT(l.max_sample, 0) << k;
      EXPECT_EQ(l.max_sample % (l.step_puts / 64), 0) << k << ": whole steps of tiles";
      EXPECT_GE(int64_t(l.cap), int64_t(l.vote_limit) + 3 * int64_t(l.vote_every) * l.step_puts) << k;
    }
  }
  const CallPlan v32 = plan_of(ScoreAccuracy::kProduction, 2048, Operator::kFusedTopK);
  EXPECT_GE(v32.lockstep.cap, 2048 + 2 * 3 * 2 * 128);
  EXPECT_EQ(v32.lockstep.vote_every, 2);
}
#endif

}  // namespace
}  // namespace fit
