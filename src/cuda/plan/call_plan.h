// flashindexer CUDA: the plan of one call, made once from host-known shapes and the device's
// limits; support, workspace and the launch all read it, and nothing below it decides again.
//
//   CallPlan plan;
//   Status s = plan_indexer(problem, op, limits, &plan);  // support: s; scratch: plan.workspace_bytes
//   ... the launchers (src/cuda/sm90/kernels/) take plan.scorer, plan.lockstep, plan.staged, plan.topk
//
// Host code only (no device code); the kernels' shared-memory facts come from
// sm90/kernels/fused_topk.h. The rules themselves are pure functions in heuristics.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/plan/heuristics.h"
#include "flashindexer/problem.h"
#include "flashindexer/status.h"

namespace flashindexer::cuda {

// What the planner needs to know of the device.
struct DeviceLimits {
  int num_sms = 0;
  size_t smem_optin = 0;     // opt-in shared memory per block (bytes)
  ClusterCapacity clusters;  // clusters of 2, 4, 8 one-SM CTAs that fit at once
};

// The fused lockstep kernel's decisions (fused_topk.cu).
struct FusedLockstepPlan {
  int32_t cap = 0;            // candidate keys per row in shared memory
  bool alternate256 = false;  // groups of N = 256 on alternate tiles (both warpgroups score every row)
  int32_t consumer_wgs = 2;   // consumer warpgroups (3: 512 threads, 4: 640)
  int32_t step_puts = 0;      // appends per row and step
  int32_t vote_every = 1;     // steps between compaction votes
  uint32_t vote_limit = 0;    // a row past it compacts at the next vote
  int32_t max_sample = 0;     // tiles sampled first (0: the plain order); needs one split
};

enum class FusedPath : uint8_t { kNone, kLockstep, kCluster };

struct CallPlan {
  Operator op = Operator::kDenseLogits;
  ScorerPlan scorer;          // dense logits and the fused lockstep kernel: groups, splits, chunk
  FusedPath fused = FusedPath::kNone;
  FusedLockstepPlan lockstep;  // fused == kLockstep
  FusedStagedPlan staged;     // fused == kCluster (decode clusters, fused_staged.cu)
  TopKPlan topk;              // topk_over_logits
  size_t workspace_bytes = 0;
};

// The plan of dense_logits / fused_topk for this problem, or why the sm_90a kernels cannot
// run it (kUnsupported, naming the argument, what is supported and what was given).
// clusters = false keeps decode rows on the lockstep kernel (the tests force it).
Status plan_indexer(const IndexerProblem& p, Operator op, const DeviceLimits& limits, CallPlan* plan,
                    bool clusters = true);
// The plan of topk_over_logits.
Status plan_topk(const TopKProblem& p, const DeviceLimits& limits, CallPlan* plan);

// One line per decision, e.g. "fused_topk: lockstep, groups 2048 x 4 rows, 1 split, ...".
std::string describe(const CallPlan& plan);

// The pieces, for the bench and the tests.
// Rows per ragged prefill group of this operator (0: 256 / H); decode groups are a request's rows.
int32_t prefill_rows(const IndexerProblem& p, Operator op, const DeviceLimits& limits);
// The cluster path's plan for a decode problem (cluster 0 for other rows or where it does not apply).
FusedStagedPlan fused_staged_plan(const IndexerProblem& p, const DeviceLimits& limits);
// The merge of a plan's segments (FusedStagedPlan::merge_ctas) for these rows and this order.
FusedStagedPlan with_merge(const IndexerProblem& p, FusedStagedPlan plan, int num_sms);
// Whether `plan` of the cluster path can serve this problem within smem_limit.
bool fused_staged_applies(const IndexerProblem& p, const FusedStagedPlan& plan, size_t smem_limit);
size_t fused_staged_workspace_bytes(const IndexerProblem& p, const FusedStagedPlan& plan);
// The lockstep kernel of this shape: consumer warpgroups, the least capacity K needs (shared
// tiles where N = 256), and the votes of a launch.
int32_t fused_consumer_wgs(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group);
int32_t fused_topk_min_capacity(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                                int32_t k);
FusedVotePlan fused_topk_vote_plan(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                                   bool alternate256, int32_t cap, int32_t k);

}  // namespace flashindexer::cuda
