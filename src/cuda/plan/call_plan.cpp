// flashindexer CUDA: the planner (call_plan.h). Every host decision of a call is made here,
// once; the rules are heuristics.h's pure functions, the shared-memory facts the kernels'.
#include "cuda/plan/call_plan.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "cuda/sm90/kernels/dense_logits.h"
#include "cuda/sm90/kernels/fused_topk.h"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "cuda/sm90/scorer/sampled_start.h"

namespace flashindexer::cuda {
namespace {

Status unsupported(const std::string& what) { return Status(StatusCode::kUnsupported, what); }

// A lockstep step's appends per row, and whether its votes are deferred (every warpgroup
// scores every row, or four share tiles; two that share tiles vote per warpgroup).
struct StepShape {
  int32_t puts;
  bool deferred;
};
StepShape step_shape(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                     bool alternate256) {
  const int32_t wgs = fused_consumer_wgs(format, accuracy, heads, rows_per_group);
  return {fused_step_puts(heads, rows_per_group, alternate256, wgs),
          !fused_votes_per_warpgroup(heads, rows_per_group, alternate256, wgs)};
}

constexpr int32_t kMaxVoteEvery = 8;  // steps between compaction votes, at most (1 measured slower)

ScorerPlan scorer_plan(const IndexerProblem& p, Operator op, const DeviceLimits& d) {
  return plan_scorer(p.rows.form == RowForm::kDecode, p.rows.rows(), p.rows.next_n, p.rows.num_requests,
                     p.queries.num_heads, p.rows.max_context, d.num_sms,
                     op == Operator::kDenseLogits ? kScorerMinChunkDense : kScorerMinChunk, prefill_rows(p, op, d));
}

}  // namespace

int32_t fused_consumer_wgs(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group) {
  return fused_consumer_wgs(format == CacheFormat::kFp8E4M3, accuracy == ScoreAccuracy::kExact, heads, rows_per_group);
}

FusedVotePlan fused_topk_vote_plan(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                                   bool alternate256, int32_t cap, int32_t k) {
  const StepShape s = step_shape(format, accuracy, heads, rows_per_group, alternate256);
  return fused_vote_plan(cap, k, s.puts, s.deferred, kMaxVoteEvery);
}

int32_t fused_topk_min_capacity(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                                int32_t k) {
  // Shared tiles where N = 256 (alternate tiles ask for more: fused_takes_alternate256).
  const StepShape s = step_shape(format, accuracy, heads, rows_per_group, false);
  return fused_min_capacity(k, s.deferred ? 3 * s.puts : s.puts);
}

// Rows per ragged group (0: 256 / H). The fused operator takes groups of N = 128 where the
// candidates of N = 256 do not fit beside the scorer (H = 32, K = 2048: 8 rows hold 1,372
// each, 4 rows 3,800), and where fused_prefill_rows prefers them (fp8 at H = 64, exact). The dense
// operator takes the same groups, since mxfp4 scores depend on them (the integer path is a
// CTA-wide choice), except fp8, whose scores do not (dense_prefill_rows: N = 128 on three
// consumer warpgroups in exact mode; N = 256 on four in kProduction at H = 64, two on every
// other tile). fp8 in kProduction at H = 32 (GLM-5) follows the fused operator's groups (4 or
// 8 rows by K).
int32_t prefill_rows(const IndexerProblem& p, Operator op, const DeviceLimits& d) {
  const int32_t h = p.queries.num_heads;
  if (p.rows.form == RowForm::kDecode) return 0;  // decode groups are a request's next_n rows
  if (op == Operator::kDenseLogits) {
    const bool fp8 = p.cache.format == CacheFormat::kFp8E4M3;
    if (const int32_t rows = dense_prefill_rows(fp8, p.accuracy == ScoreAccuracy::kExact, h); rows > 0) return rows;
  }
  if (h != 32 && h != 64) return 0;
  auto fits = [&](int32_t rows) {
    return sm90::fused_topk_capacity(p.cache.format, p.accuracy, h, rows, d.smem_optin) >=
           fused_topk_min_capacity(p.cache.format, p.accuracy, h, rows, p.k);
  };
  if (const int32_t rows = fused_prefill_rows(p.cache.format == CacheFormat::kFp8E4M3,
                                                p.accuracy == ScoreAccuracy::kExact, h);
      rows > 0 && fits(rows))
    return rows;
  const int32_t full = 256 / h;
  return !fits(full) && fits(full / 2) ? full / 2 : 0;
}

FusedStagedPlan fused_staged_plan(const IndexerProblem& p, const DeviceLimits& d) {
  if (p.rows.form != RowForm::kDecode) return {};
  const FusedStagedPlan plan = plan_fused_staged(
      p.rows.rows(), p.rows.max_context, p.k, d.num_sms, d.clusters, p.rows.next_n, p.order == OutputOrder::kPosition,
      fused_staged_rows_per_cta(p.cache.format == CacheFormat::kFp8E4M3, p.rows.next_n));
  return fused_staged_applies(p, plan, d.smem_optin) ? with_merge(p, plan, d.num_sms) : FusedStagedPlan{};
}

// Rows by position take the cluster merge (a cluster of CTAs per row, a segment or two each:
// cluster_merge_pairs_segments), rows by rank the one-CTA ordered merge.
FusedStagedPlan with_merge(const IndexerProblem& p, FusedStagedPlan plan, int num_sms) {
  plan.merge_ctas = 0;
  if (plan.segments >= 2 && plan.segments <= kFusedStagedMaxSegments && p.order == OutputOrder::kPosition)
    plan.merge_ctas =
        cluster_merge_ctas(plan.segments, cluster_merge_pairs_segments(plan.segments, p.rows.rows(), num_sms));
  return plan;
}

// Decode rows (any next_n: one row per segment), a plan with clusters, a kernel for the
// group shape, its shared memory within smem_limit, and one grid x index per CTA.
bool fused_staged_applies(const IndexerProblem& p, const FusedStagedPlan& plan, size_t smem_limit) {
  if (plan.cluster <= 0 || p.rows.form != RowForm::kDecode) return false;
  if (p.rows.rows() > INT32_MAX / plan.ctas_per_row()) return false;
  if (plan.rows_per_cta > 1 && plan.rows_per_cta != p.rows.next_n) return false;
  return sm90::fused_staged_smem_bytes(p.cache.format, p.queries.num_heads, plan.rows_per_cta, plan.chunk) <= smem_limit;
}

size_t fused_staged_workspace_bytes(const IndexerProblem& p, const FusedStagedPlan& plan) {
  return plan.segments > 1 ? sm90::SplitCandidates::bytes(p.rows.rows(), plan.segments, p.k) : 0;
}

Status plan_indexer(const IndexerProblem& p, Operator op, const DeviceLimits& d, CallPlan* out, bool clusters) {
  CallPlan plan;
  plan.op = op;
  if (p.cache.pages.page_size % kScorerTile != 0)
    return unsupported("cache.pages.page_size: expected a multiple of 64 on sm_90a, got " +
                       std::to_string(p.cache.pages.page_size));
  plan.scorer = scorer_plan(p, op, d);
  if (!sm90::dense_logits_instantiated(p.cache.format, p.queries.num_heads, plan.scorer.rows_per_group))
    return unsupported("queries.num_heads: expected 32 or 64 on sm_90a, got " + std::to_string(p.queries.num_heads));
  if (plan.scorer.ctas() > INT32_MAX)
    return unsupported("rows x splits: expected <= 2147483647 CTAs on sm_90a, got " +
                       std::to_string(plan.scorer.ctas()));
  if (op == Operator::kFusedTopK) {
    const int32_t h = p.queries.num_heads, rows = plan.scorer.rows_per_group;
    if (p.k > kTopKMaxK)
      return unsupported("k: expected 1.." + std::to_string(kTopKMaxK) + " for fused_topk on sm_90a, got " +
                         std::to_string(p.k));
    FusedLockstepPlan& lp = plan.lockstep;
    lp.cap = sm90::fused_topk_capacity(p.cache.format, p.accuracy, h, rows, d.smem_optin);
    const int32_t need = fused_topk_min_capacity(p.cache.format, p.accuracy, h, rows, p.k);
    if (lp.cap < need)
      return unsupported("k: fused_topk on sm_90a holds " + std::to_string(lp.cap) + " candidates per row for H = " +
                         std::to_string(h) + " with " + std::to_string(rows) + " rows per group in shared memory; k = " +
                         std::to_string(p.k) + " needs " + std::to_string(need));
    lp.consumer_wgs = fused_consumer_wgs(p.cache.format, p.accuracy, h, rows);
    lp.alternate256 = fused_takes_alternate256(
        h, rows, p.k, lp.cap, lp.consumer_wgs,
        takes_linear_columns(p.cache.format == CacheFormat::kFp8E4M3, p.accuracy == ScoreAccuracy::kExact));
    lp.step_puts = step_shape(p.cache.format, p.accuracy, h, rows, lp.alternate256).puts;
    const FusedVotePlan votes = fused_topk_vote_plan(p.cache.format, p.accuracy, h, rows, lp.alternate256, lp.cap, p.k);
    if (votes.limit < p.k)
      return unsupported("k: fused_topk on sm_90a leaves a vote limit of " + std::to_string(votes.limit) +
                         " candidates below k = " + std::to_string(p.k));
    lp.vote_every = votes.every;
    lp.vote_limit = uint32_t(votes.limit);
    // The sampled start needs one split (the vote plan's sample) and a group that samples;
    // the plan counts steps of step_puts / 64 tiles each.
    const bool samples = sm90::group_samples(h * rows, lp.alternate256, true);
    if (plan.scorer.splits == 1 && samples) lp.max_sample = votes.sample_steps * (lp.step_puts / 64);
    if (clusters) plan.staged = fused_staged_plan(p, d);
    plan.fused = plan.staged.cluster > 0 ? FusedPath::kCluster : FusedPath::kLockstep;
    if (plan.fused == FusedPath::kCluster) {
      plan.workspace_bytes = fused_staged_workspace_bytes(p, plan.staged);
    } else {
      // The splits' local top K (independent of max_context: plan_scorer bounds the splits by
      // the SM count), or the sampled start's repair flags (rows x 4 bytes); one split uses
      // the flags, several the keys.
      const size_t keys = plan.scorer.max_splits > 1
                              ? sm90::SplitCandidates::bytes(p.rows.rows(), plan.scorer.max_splits, p.k)
                              : 0;
      plan.workspace_bytes = std::max(keys, samples ? size_t(p.rows.rows()) * sizeof(uint32_t) : size_t{0});
    }
  }
  *out = plan;
  return Status::ok();
}

Status plan_topk(const TopKProblem& p, const DeviceLimits& d, CallPlan* out) {
  CallPlan plan;
  plan.op = Operator::kTopKOverLogits;
  if (p.rows.rows() > INT32_MAX)  // one CTA row per grid x index
    return unsupported("rows: expected <= 2147483647 on sm_90a, got " + std::to_string(p.rows.rows()));
  if (p.k > kTopKMaxK)
    return unsupported("k: expected 1.." + std::to_string(kTopKMaxK) + " on sm_90a, got " + std::to_string(p.k));
  plan.topk = plan_topk(p.rows.rows(), p.rows.max_context, p.k, d.num_sms, d.clusters);
  plan.workspace_bytes = plan.topk.workspace_bytes;
  *out = plan;
  return Status::ok();
}

std::string describe(const CallPlan& plan) {
  char buf[512];
  const ScorerPlan& g = plan.scorer;
  std::string s;
  auto line = [&](const char* fmt, auto... v) {
    std::snprintf(buf, sizeof buf, fmt, v...);
    s += buf;
  };
  if (plan.op == Operator::kTopKOverLogits) {
    static const char* const kPaths[] = {"rows", "pair", "split", "grid", "staged"};
    line("topk_over_logits: path %s, %d CTAs per row\n", kPaths[int(plan.topk.path)], plan.topk.ctas_per_row);
  } else if (plan.fused == FusedPath::kCluster) {
    const FusedStagedPlan& c = plan.staged;
    line("fused_topk: decode clusters of %d CTAs, %d segments per row, chunk %lld, %d rows per CTA\n", c.cluster,
         c.segments, static_cast<long long>(c.chunk), c.rows_per_cta);
  } else {
    line("%s: %lld groups of %d rows (stride %d), %d splits of %lld positions (at most %d)\n",
         plan.op == Operator::kFusedTopK ? "fused_topk" : "dense_logits", static_cast<long long>(g.groups),
         g.rows_per_group, g.group_stride, g.splits, static_cast<long long>(g.chunk), g.max_splits);
    if (plan.fused == FusedPath::kLockstep) {
      const FusedLockstepPlan& l = plan.lockstep;
      line("lockstep: %s tiles, %d consumer warpgroups, %d candidates per row, vote every %d steps at %u, %d tiles sampled\n",
           l.alternate256 ? "alternate" : "shared or alternate", l.consumer_wgs, l.cap, l.vote_every, l.vote_limit,
           l.max_sample);
    }
  }
  line("workspace: %zu bytes\n", plan.workspace_bytes);
  return s;
}

}  // namespace flashindexer::cuda
