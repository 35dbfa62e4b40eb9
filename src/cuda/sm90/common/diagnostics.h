// flashindexer sm_90a: the diagnostic build knobs, all of them (set in CMAKE_CUDA_FLAGS,
// e.g. -DFI_FUSED_PROFILE=1). Schedules are not knobs: the planner chooses them
// (src/cuda/plan/). A build with a non-default value is for measurement or checking only;
// those marked "timing" compute wrong results on purpose.
#pragma once

#ifndef FI_FUSED_PROFILE
#define FI_FUSED_PROFILE 0  // 1: per-phase clock64 sums of the fused kernels (fused_topk_profile, fused_staged_profile)
#endif
#ifndef FI_TOPK_PROFILE
#define FI_TOPK_PROFILE 0  // 1: per-phase clock64 sums of the TopK kernels (topk_profile)
#endif
#ifndef FI_CHECK_BARRIER_PHASES
#define FI_CHECK_BARRIER_PHASES 0  // 1: counts lockstep consumer warps that meet barrier 1 at skewed instances
#endif
#ifndef FI_BARRIER_FUZZ
#define FI_BARRIER_FUZZ 0  // 1: sleeps 0-2 us around each lockstep consumer barrier (schedule fuzzing)
#endif
#ifndef FI_SCORER_SPLIT_REGS
#define FI_SCORER_SPLIT_REGS 1  // 0: no setmaxnreg in the scorer (compute-sanitizer runs of the same code)
#endif
#ifndef FI_STAGED_SETMAXNREG
#define FI_STAGED_SETMAXNREG 1  // 0: no setmaxnreg in the decode clusters (compute-sanitizer runs)
#endif
#ifndef FI_SCORER_MMA
#define FI_SCORER_MMA 1  // timing, 0: the tiles' MMAs (register keys: also conversions and partial adds) skipped
#endif
#ifndef FI_SCORER_EPILOGUE
#define FI_SCORER_EPILOGUE 1  // timing, 0: no relu and weights, each score the plain sum of its accumulators
#endif
#ifndef FI_SCORER_LINEAR_HELD_PAIRS
#define FI_SCORER_LINEAR_HELD_PAIRS 6  // four consumers with linear columns: weight pairs (float4) held in registers, of 8
#endif
#ifndef FI_SCORER_PRODUCER_CONVERT
#define FI_SCORER_PRODUCER_CONVERT 1  // timing, 0: the mxfp4 producer of N = 256 copies and waits but stores nothing
#endif
#ifndef FI_DENSE_STORES
#define FI_DENSE_STORES 1  // timing, 0: the dense operator computes its scores but stores none
#endif
#ifndef FI_FUSED_PUTS
#define FI_FUSED_PUTS 1  // timing, 0: the fused sink drops every score; 2: compares with tau, never appends
#endif
#ifndef FI_FUSED_VOTES
#define FI_FUSED_VOTES 1  // timing, 0: no compaction votes (only with FI_FUSED_PUTS 0 or 2)
#endif
#ifndef FI_FUSED_WARP_PUTS
#define FI_FUSED_WARP_PUTS 0  // 1: gated puts a warp at a time (float gate, one vote, one atomic per row and warp); same results, unmeasured
#endif
#ifndef FI_FUSED_WIDE_SELECT
#define FI_FUSED_WIDE_SELECT 0  // 1: four consumer warpgroups select on all 512 threads (WideSelect); same results, unmeasured
#endif
#ifndef FI_TOPK_DIAG_VOTE_ONLY
#define FI_TOPK_DIAG_VOTE_ONLY 0  // timing, 1: the TopK stream's pushes end after the vote
#endif
