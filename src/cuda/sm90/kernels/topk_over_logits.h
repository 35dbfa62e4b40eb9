// flashindexer sm_90a: host entry of the exact TopK-over-logits kernels.
#pragma once

#include <cuda_runtime.h>

#include "cuda/plan/heuristics.h"
#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

struct TopKArgs {
  const float* logits;        // [rows, logits_row_stride] fp32
  int64_t logits_row_stride;  // elements
  Rows rows;
  PageMap pages;              // page_size 0: no page map
  int32_t k;                  // 1..2048
  OutputOrder order;
  TopKOutputs out;
  // CTAs per row (heuristics.h TopKPlan::ctas_per_row); topk_merge_splits: the local top-K
  // lists per row (SplitCandidates in the workspace).
  int splits;
  void* workspace;            // TopKPlan::workspace_bytes
  cuda::TopKPath path = cuda::TopKPath::kRows;
};

// The workspace of split rows: each (row, split) slot holds the split's exact local top K
// (or all of its positions when it has fewer), unsorted, as rank keys.
struct SplitCandidates {
  uint64_t* keys;    // [rows, splits, K]
  uint32_t* counts;  // [rows, splits]
  uint32_t* status;  // [rows, splits] row_status::kHasNaN if a score of the split was NaN; the fused
                     // decode clusters add their row's check bits (the same in every split)
  static size_t bytes(int64_t rows, int splits, int32_t k) {
    return size_t(rows) * size_t(splits) * (size_t(k) * 8 + 8);
  }
  static __host__ __device__ SplitCandidates in(void* workspace, int64_t rows, int splits, int32_t k) {
    const int64_t slots = rows * splits;
    auto* keys = static_cast<uint64_t*>(workspace);
    auto* counts = reinterpret_cast<uint32_t*>(keys + slots * k);
    return {keys, counts, counts + slots};
  }
};

// Enqueues the selection on `stream` (kGrid: five launches, the last four programmatic
// dependents; kSplit: two launches; all graph-capturable); returns the launch error, if any.
cudaError_t topk_over_logits(const TopKArgs& args, cudaStream_t stream);

// Clusters of `ctas` kStaged CTAs (one per SM) that the current device holds at once
// (cudaOccupancyMaxActiveClusters; H200: 66, 30, 15 for 2, 4, 8); 0 on error.
int staged_cluster_capacity(int ctas);
// The three sizes as the planners take them (ClusterCapacity: -1 where the runtime cannot say).
cuda::ClusterCapacity staged_cluster_capacities();

// Builds with -DFI_TOPK_PROFILE=1 (a diagnostic, common/diagnostics.h): per-phase sums of thread 0's clock64
// in the one-CTA-per-row kernel, the pair kernel's CTA 0 and the grid select's finish
// (whichever ran), over every CTA since the last reset. out[kTopKProfileCtas] counts the CTAs.
enum TopKProfile : int {
  kTopKProfileCtas,
  kTopKProfileCheck,   // row checks (window, page table)
  kTopKProfileWait,    // grid finish: waiting for the collect (programmatic dependent launch);
                       // rows and pair: the sample's loads; pair: also the merge of CTA 1's keys;
                       // kStaged: the bulk copies, after the guess
  kTopKProfileSample,  // rows and pair: the sampled threshold guess's select
  kTopKProfileSelect,  // rows, pair: the stream (and any fallback); grid finish: ties and selected keys
  kTopKProfileReduce,  // the last compaction to K keys (rows: the stream's)
  kTopKProfileOrder,   // ascending position (bitmap) or rank (sort); kStaged: CTA 0's gather
  kTopKProfileWrite,   // the output writes (kStaged: also the survivor counts)
  kTopKProfileSync,    // kStaged: the two cluster barriers
  kTopKProfileSlots
};
// Copies the counters (and zeroes them with reset); false in builds without the knob.
bool topk_profile(unsigned long long (&out)[kTopKProfileSlots], bool reset);

// Enqueues only the exact merge of args.splits local top-K lists per row (SplitCandidates
// in args.workspace) into the final outputs; args.logits is not read. The fused operator's
// split rows end here. ordered: every list is in position order and the lists cover
// increasing positions (the fused decode clusters), which the merge may use: cluster_ctas > 0
// (rows by position, the plan's FusedStagedPlan::merge_ctas) takes the cluster merge with that
// many CTAs per row, else one CTA per row.
cudaError_t topk_merge_splits(const TopKArgs& args, cudaStream_t stream, bool ordered = false, int cluster_ctas = 0);

}  // namespace flashindexer::sm90
