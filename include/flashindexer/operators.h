// flashindexer: the three operators, in the CUTLASS/CUB shape:
//   can_implement(problem, launch)  -> is it supported, and if not, why
//   workspace_size(problem, launch) -> caller-owned scratch bytes
//   run(problem, outputs, launch)   -> enqueue; returns a Status, never throws
// Each of them makes the call's Plan once (make_plan) and reads it; a caller may also make
// the plan itself and pass it to the run, which then decides nothing again.
//
// Invariant: fused_topk(p) is bit-identical to
//   topk_over_logits({dense_logits(p), p.rows, p.cache.pages, p.k, p.order})
// on the same backend, outputs and status bits included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flashindexer/problem.h"
#include "flashindexer/status.h"

namespace flashindexer {

// The decisions of one call: the backend, its paths, tiles and splits, and the workspace.
// A fixed-size value (no allocation): copy it, keep it beside a captured graph, describe() it.
struct Plan {
  Backend backend = Backend::kCpu;                // resolved (never kAuto)
  Operator op = Operator::kDenseLogits;
  size_t workspace_bytes = 0;                     // what the run needs in launch.workspace
  uint64_t shape = 0;                             // the problem's host shape, checked by the run
  alignas(8) unsigned char decisions[192] = {};   // the backend's own record
};

// Validates the problem, resolves launch.backend, and plans (a Status saying why not when the
// backend cannot run it). op: kDenseLogits or kFusedTopK for an IndexerProblem.
Status make_plan(const IndexerProblem& p, Operator op, const Launch& launch, Plan* plan);
Status make_plan(const TopKProblem& p, const Launch& launch, Plan* plan);
// One line per decision.
std::string describe(const Plan& plan);

// Support checks (host-checkable parts of CONTRACT §5 plus backend limits).
Status can_implement(const IndexerProblem& p, Operator op, const Launch& launch);
Status can_implement(const TopKProblem& p, const Launch& launch);

// Workspace bytes. Depends on rows, K, formats and host bounds, never on device data.
Status workspace_size(const IndexerProblem& p, Operator op, const Launch& launch, size_t* bytes);
Status workspace_size(const TopKProblem& p, const Launch& launch, size_t* bytes);

// Dense logits: score[r, s] of CONTRACT §1 into out.logits[r, 0..max_context).
Status dense_logits(const IndexerProblem& p, const LogitsOutput& out, const Launch& launch);

// Exact TopK over fp32 logits (CONTRACT §3) for any fp32 input.
Status topk_over_logits(const TopKProblem& p, const TopKOutputs& out, const Launch& launch);

// Fused scoring + exact TopK; never writes the [rows, context] score matrix.
Status fused_topk(const IndexerProblem& p, const TopKOutputs& out, const Launch& launch);

// The runs under a plan made for this problem's shape (device data may differ: lengths,
// tables, pointers); a plan of another shape, operator or backend is refused.
Status dense_logits(const Plan& plan, const IndexerProblem& p, const LogitsOutput& out, const Launch& launch);
Status topk_over_logits(const Plan& plan, const TopKProblem& p, const TopKOutputs& out, const Launch& launch);
Status fused_topk(const Plan& plan, const IndexerProblem& p, const TopKOutputs& out, const Launch& launch);

// The backend launch.backend resolves to for this problem (kAuto: cuda when it is
// compiled, a device is present, it supports the problem and the pool / logits
// pointer is device memory; cpu otherwise), or an error saying why none can run it.
Status resolve_backend(const IndexerProblem& p, Operator op, const Launch& launch, Backend* resolved);
Status resolve_backend(const TopKProblem& p, const Launch& launch, Backend* resolved);

// Human-readable capability report of every compiled backend on this machine.
struct BackendInfo {
  Backend backend;
  bool compiled;
  bool usable;
  std::string detail;  // e.g. "NVIDIA H200 (sm_90)", or why it is unusable
};
std::vector<BackendInfo> list_backends();

}  // namespace flashindexer
