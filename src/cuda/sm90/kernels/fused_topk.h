// flashindexer sm_90a: host entry of the fused indexer TopK (fused_topk.cu, fused_staged.cu).
// The launchers take the planner's decisions as they are (src/cuda/plan/call_plan.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/plan/call_plan.h"
#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

struct FusedTopKArgs {
  const IndexerProblem* problem;
  TopKOutputs out;
  cuda::ScorerPlan plan;          // the dense-logits operator's plan: the same scores, bit for bit
  cuda::FusedLockstepPlan lockstep;  // the lockstep kernel's buffers, votes and sampled start
  cuda::FusedStagedPlan staged;   // cluster > 0: decode rows take the cluster path (fused_staged.cu)
  void* workspace;                // CallPlan::workspace_bytes
};

// Kernel facts for the planner (src/cuda/plan/call_plan.cpp), from the kernels' shared-memory
// layouts: candidate keys per row that the lockstep kernel of this shape holds within
// smem_limit (0: no kernel for the shape), and the bytes of shared memory of the cluster path
// for this group shape and chunk (SIZE_MAX: no kernel for the shape).
int32_t fused_topk_capacity(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                            size_t smem_limit);
size_t fused_staged_smem_bytes(CacheFormat format, int32_t heads, int32_t rows_per_cta, int64_t chunk);

// Enqueues the cluster path (and the merge when rows have several segments).
cudaError_t fused_staged_topk(const IndexerProblem& p, const TopKOutputs& out, const cuda::FusedStagedPlan& plan,
                              void* workspace, cudaStream_t stream);

// Builds with -DFI_FUSED_PROFILE=1 (a diagnostic, common/diagnostics.h): per-phase sums of consumer thread
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
