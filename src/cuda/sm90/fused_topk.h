// flashindexer sm_90a: host entry of the fused indexer TopK (fused_topk.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../heuristics.h"
#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

struct FusedTopKArgs {
  const IndexerProblem* problem;
  TopKOutputs out;
  cuda::ScorerPlan plan;      // the dense-logits operator's plan: the same scores, bit for bit
  void* workspace;            // fused_topk_workspace_bytes()
  size_t smem_limit;          // the device's opt-in shared memory per block
  cuda::FusedStagedPlan staged;  // decode rows that fused_staged_applies() to take fused_staged.cu
};

// The cluster path's plan for a decode problem (cluster 0 for other rows): heuristics.h
// plan_fused_staged with its rows, order and pairing (fused_staged_rows_per_cta). The backend,
// the bench and the tests take it from here.
inline cuda::FusedStagedPlan fused_staged_plan(const IndexerProblem& p, int num_sms, const cuda::ClusterCapacity& cap) {
  if (p.rows.form != RowForm::kDecode) return {};
  return cuda::plan_fused_staged(
      p.rows.rows(), p.rows.max_context, p.k, num_sms, cap, p.rows.next_n, p.order == OutputOrder::kPosition,
      cuda::fused_staged_rows_per_cta(p.cache.format == CacheFormat::kFp8E4M3, p.rows.next_n));
}

// Whether the plan's cluster path (fused_staged.cu) serves this problem: decode rows (any
// next_n: one row per segment), mxfp4 or fp8, H 64 or 32, a plan with clusters, and its shared
// memory within smem_limit.
bool fused_staged_applies(const IndexerProblem& p, const cuda::FusedStagedPlan& plan, size_t smem_limit);
// Its workspace: the segments' local top K when a row has several (SplitCandidates).
size_t fused_staged_workspace_bytes(const IndexerProblem& p, const cuda::FusedStagedPlan& plan);
// Enqueues the cluster path (and the merge when rows have several segments).
cudaError_t fused_staged_topk(const IndexerProblem& p, const TopKOutputs& out, const cuda::FusedStagedPlan& plan,
                              void* workspace, cudaStream_t stream);

// Candidate keys per row that the fused kernel of this shape holds within smem_limit;
// 0 when the shape has no kernel.
int32_t fused_topk_capacity(CacheFormat format, int32_t heads, int32_t rows_per_group, size_t smem_limit);

// Consumer warpgroups of the fused lockstep kernel of this shape (cuda::fused_consumer_wgs):
// 2, or 3 (512 threads).
int32_t fused_topk_consumer_wgs(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group);

// The votes of a launch of this shape (cuda::fused_vote_plan: a step of one tile per consumer
// warpgroup, or of one shared tile; deferred where every warpgroup scores every row).
cuda::FusedVotePlan fused_topk_vote_plan(CacheFormat format, ScoreAccuracy accuracy, int32_t heads,
                                         int32_t rows_per_group, bool alternate256, int32_t cap, int32_t k);

// The least capacity that K needs with this group shape: room for K plus the appends of the
// votes' interval of one step (one shared tile for groups of N = 256; three steps where votes
// are deferred), and for the final sort (a power of two >= K, 512 at least).
int32_t fused_topk_min_capacity(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                                int32_t k);

// Caller-owned scratch: room for the splits' local top K (rows x plan.max_splits x K rank
// keys) when rows can be split, and the sampled start's repair flags (rows x 4 bytes) when
// groups of 256 query columns share tiles (cuda::fused_takes_alternate256 false); the larger
// of the two (one split uses the flags, several the keys). Independent of max_context: plan_scorer bounds the splits by the SM count. Rows
// that take the cluster path: fused_staged_workspace_bytes (at most 16 segments per row).
size_t fused_topk_workspace_bytes(const IndexerProblem& p, const cuda::ScorerPlan& plan,
                                  const cuda::FusedStagedPlan& staged, size_t smem_limit);

// Builds with -DFI_FUSED_PROFILE=1 (an experiment knob): per-phase sums of consumer thread
// 0's clock64 over every CTA since the last reset. out[kProfileCtas] counts the CTAs.
enum FusedProfile : int {
  kProfileCtas,
  kProfileConsume,         // cycles from the first tile to the end of the last (votes included)
  kProfileVotes,           // cycles in compaction votes (barrier waits + compactions)
  kProfileCompactCycles,   // cycles in compactions (the final ones included)
  kProfileCompactions,
  kProfileCompactedKeys,   // candidates the compactions read
  kProfileFinish,          // cycles of the finish: final compactions, sort, output writes
  kProfileSortCycles,      // of which the final sorts
  kProfileGuessesHeld,     // rows (not cycles): a sampled start's guess held (at least K keys >= it)
  kProfileRepairs,         // rows: the guess was above the K-th key, so the repair launch scored them again
  kProfileGuessCycles,     // of kProfileVotes: the sampled start's guess
  kProfileVoteWaitCycles,  // of kProfileVotes: deferred votes' waits for the previous vote's arrivals
  kFusedProfileSlots
};
// Copies the counters (and zeroes them with reset); false in builds without the knob.
bool fused_topk_profile(unsigned long long (&out)[kFusedProfileSlots], bool reset);

// Builds with -DFI_CHECK_BARRIER_PHASES=1 (a diagnostic knob): how many times a consumer
// warp of the lockstep kernel met barrier 1 at another instance than the other warps (0 when
// the barriers pair up as written). Copies the counter (and zeroes it with reset); false in
// builds without the knob.
bool fused_barrier_phase_errors(uint32_t* errors, bool reset);

// The same knob for the decode clusters (fused_staged.cu): thread 0 of every CTA; the
// finish is CTA 0's alone (one per row segment).
enum FusedStagedProfile : int {
  kStagedProfileCtas,
  kStagedProfileScore,    // set-up and scoring, to the barrier after the last tile
  kStagedProfileGuess,    // the first cluster barrier and the sampled guess
  kStagedProfilePasses,   // the two passes over the stage
  kStagedProfileGather,   // the second cluster barrier, the counts, CTA 0's gather or fallback stream, the third barrier
  kStagedProfileFinish,   // CTA 0: the K-th key and the writes (outputs or workspace slot)
  kFusedStagedProfileSlots
};
bool fused_staged_profile(unsigned long long (&out)[kFusedStagedProfileSlots], bool reset);

// Enqueues the fused operator on `stream`; returns the first CUDA error, if any.
cudaError_t fused_topk(const FusedTopKArgs& args, cudaStream_t stream);

}  // namespace flashindexer::sm90
