// flashindexer CUDA: launch heuristics as pure functions of host-known shapes
// (tested on the CPU in CI; never read device data).
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace flashindexer::cuda {

inline constexpr int32_t kTopKMaxK = 2048;      // largest K of the sm_90a selectors

// TopK over logits, five ways (topk_over_logits.cu):
// - kStaged: rows that a cluster of C = 2, 4 or 8 CTAs per row (the most
//   whose clusters all fit at once, one CTA per SM) covers in chunks of at most
//   kTopKStagedMaxChunk positions, from kTopKStagedMinWidth on: each CTA stages its chunk in
//   shared memory with bulk copies while the row's sampled guess is taken and keeps the
//   chunk's candidates in position order; CTA 0 gathers them, selects the K-th and writes
//   the row (by rank after a block radix sort of the K keys). No workspace. H200,
//   K = 2048, graph-timed (docs/experiments.md, 2026-11-30): 64 x 65,536 24.4 us (pair 34.6),
//   32 x 65,536 24.0 (34.0), 8 x 65,536 20.7 (33.9), 1 x 262,144 21.3 (grid 29.9),
//   4 x 262,144 23.3 (43.3).
// - kRows: one CTA per row, when the rows alone fill the GPU twice over, or when there
//   are more than SMs / 2 rows of at most kTopKRowsMaxWidth positions.
// - kPair: more than kTopKPairMinRows and at most SMs / 2 rows of kTopKPairMinWidth to
//   kTopKRowsMaxWidth positions: a cluster of two CTAs per row (ctas_per_row = 2), one per
//   SM, each streaming half of the row; no workspace. H200, K = 2048, graph-timed
//   (docs/experiments.md, 2026-11-30): 64 x 65,536 36.0 us vs rows 42.0; 32 x 65,536 35.4 vs
//   40.4; 8 x 65,536 35.0 vs grid 42.0 (all with the pair at 64 registers; at 128 since:
//   34.9 us at 64 rows). Two CTAs per SM (128 x 131,072) were slower than one CTA per row:
//   70.4 vs 62.7 us.
// - kGrid: at most kTopKGridMaxRows rows that kPair does not take. A grid-wide radix select
//   (grid_radix_select.cuh), `ctas_per_row` CTAs per row (about 4 per SM in all), each
//   counting and collecting at least kTopKMinChunk positions, then one CTA per row
//   finishing. Workspace: per row, two 4096-bin histograms and a 32-byte state (zeroed by
//   the launch), then K selected and kTopKTieCap tied keys of 8 bytes.
// - kSplit: the other rows between (wider rows). Each row splits over `ctas_per_row` CTAs of
//   at least max(4K, 16384) positions, each keeping its exact local top K in the workspace
//   (rows x splits x (8 K + 8) bytes), merged by one CTA per row.
// Measured on the H200, K = 2048, graph-timed (docs/experiments.md, 2026-11-29): 8 x 65,536 grid
// 42 us vs rows 45; 32 x 65,536 split 49 vs rows 46; 64 x 65,536 split 60 vs rows 47;
// 128 x 131,072 split 112 vs rows 72; 4 x 262,144 grid 55 vs rows 113 (one CTA per SM reads
// a wide row slowly). Rows wider than 131,072 between 9 and 2 x SMs rows were not measured
// against kRows.
enum class TopKPath { kRows, kPair, kSplit, kGrid, kStaged };
inline constexpr int64_t kTopKStagedMaxChunk = 32768;  // positions per CTA: 128 KiB of fp32
inline constexpr int64_t kTopKStagedMinWidth = 32768;
inline constexpr int kTopKStagedMaxCluster = 8;        // the portable cluster size
inline constexpr int kTopKGridMaxRows = 8;  // the largest row count for kGrid
inline constexpr int64_t kTopKRowsMaxWidth = 131072;
// kPair from this width on: below it, half a row's stream (~0.3 cycles per position saved)
// would not pay for the merge of the halves (~6K cycles; estimated, not measured).
inline constexpr int64_t kTopKPairMinWidth = 32768;
// kPair above this many rows (fewer take kGrid): 8 x 65,536 pair 35.0 us vs grid 42.0
// (docs/experiments.md, 2026-11-30); 2 .. 7 rows were not measured.
inline constexpr int64_t kTopKPairMinRows = 4;
inline constexpr int kTopKMaxChunks = 256;
inline constexpr int64_t kTopKMinChunk = 2048;
inline constexpr int kTopKMaxSplits = 64;
inline constexpr int kTopKBins = 4096;       // 12-bit digits, two rounds: the top 24 key bits
inline constexpr int32_t kTopKTieCap = 4096;  // keys sharing the threshold's 24-bit prefix
inline constexpr size_t kTopKRowStateBytes = 32;

struct TopKPlan {
  TopKPath path = TopKPath::kRows;
  int ctas_per_row = 1;
  size_t workspace_bytes = 0;  // 0 for kRows
};

// The leading part of the kGrid workspace that each call zeroes (grid_zero_kernel, in
// 32-bit words; the selected keys after it stay 8-byte aligned).
static_assert((2 * kTopKBins * 4 + kTopKRowStateBytes) % 8 == 0);
inline size_t topk_zeroed_bytes(int64_t rows) {
  return size_t(rows) * (2 * kTopKBins * 4 + kTopKRowStateBytes);
}

// Clusters of 2, 4 and 8 one-SM CTAs that the GPU holds at once: clusters stay inside a
// GPC, so fewer than SMs / C (H200, 132 SMs: 66, 30, 15; the backend asks the runtime).
// 0 stands for SMs / C, a negative count for none.
struct ClusterCapacity {
  int of2 = 0, of4 = 0, of8 = 0;
  int at(int c, int num_sms) const {
    const int v = c == 2 ? of2 : c == 4 ? of4 : of8;
    return v > 0 ? v : v == 0 ? num_sms / c : 0;
  }
};

// kStaged's cluster size for these rows (0: not kStaged): the most CTAs per row whose
// clusters all run at once.
inline int staged_cluster(int64_t rows, int64_t max_context, int num_sms, const ClusterCapacity& cap) {
  if (rows <= 0 || max_context < kTopKStagedMinWidth) return 0;
  int c = kTopKStagedMaxCluster;
  while (c >= 2 && rows > int64_t(cap.at(c, num_sms))) c /= 2;
  return c >= 2 && max_context <= c * kTopKStagedMaxChunk ? c : 0;
}

inline TopKPlan plan_topk(int64_t rows, int64_t max_context, int32_t k, int num_sms,
                          const ClusterCapacity& clusters = {}) {
  TopKPlan plan;
  const int64_t target_ctas = 2 * int64_t(std::max(num_sms, 1));
  if (rows <= 0 || rows >= target_ctas) return plan;  // kRows from 2 x SMs rows on
  if (const int c = staged_cluster(rows, max_context, num_sms, clusters); c > 0) {
    plan.path = TopKPath::kStaged;
    plan.ctas_per_row = c;
    return plan;
  }
  if (rows > kTopKPairMinRows && 2 * rows <= int64_t(std::max(num_sms, 1)) && max_context >= kTopKPairMinWidth &&
      max_context <= kTopKRowsMaxWidth) {
    plan.path = TopKPath::kPair;
    plan.ctas_per_row = 2;
    return plan;
  }
  if (rows > kTopKGridMaxRows && max_context <= kTopKRowsMaxWidth) return plan;
  if (rows <= kTopKGridMaxRows) {
    if (max_context <= std::max<int64_t>(k, kTopKMinChunk)) return plan;
    const int64_t by_rows = (2 * target_ctas + rows - 1) / rows;
    const int64_t by_width = std::max<int64_t>(1, max_context / kTopKMinChunk);
    plan.ctas_per_row = int(std::clamp<int64_t>(std::min(by_rows, by_width), 1, kTopKMaxChunks));
    if (plan.ctas_per_row > 1) {
      plan.path = TopKPath::kGrid;
      plan.workspace_bytes = topk_zeroed_bytes(rows) + size_t(rows) * (size_t(k) + kTopKTieCap) * 8;
    }
    return plan;
  }
  const int64_t min_chunk = std::max<int64_t>(4 * int64_t(k), 16384);
  const int64_t by_rows = (target_ctas + rows - 1) / rows;
  const int64_t by_width = std::max<int64_t>(1, max_context / min_chunk);
  plan.ctas_per_row = int(std::clamp<int64_t>(std::min(by_rows, by_width), 1, kTopKMaxSplits));
  if (plan.ctas_per_row > 1) {
    plan.path = TopKPath::kSplit;
    plan.workspace_bytes = size_t(rows) * size_t(plan.ctas_per_row) * (size_t(k) * 8 + 8);
  }
  return plan;
}

// Scoring (dense logits, and the fused operator's scoring core): rows form groups that
// share the key tiles of one request (ragged: R = 256 / H consecutive rows, so that the
// WGMMA N = R * H = 256; decode: the next_n rows of one request, R = next_n rounded up to
// a power of two); each group's positions split over CTAs when the groups alone would
// not fill the GPU twice over, every split at least kScorerMinChunk positions (the fused
// operator: each split hands K keys to the merge, so short splits make long merges) or
// kScorerMinChunkDense (dense logits: splits only cost their set-up).
inline constexpr int64_t kScorerTile = 64;
inline constexpr int64_t kScorerMinChunk = 2048;
inline constexpr int64_t kScorerMinChunkDense = 512;

struct ScorerPlan {
  int32_t rows_per_group = 1;  // R (a template parameter of the kernel)
  int32_t group_stride = 1;    // rows between the first rows of consecutive groups
  int64_t groups = 0;
  int32_t splits = 1;          // CTAs per group
  int32_t max_splits = 1;      // splits for any max_context (sizes the fused workspace)
  int64_t chunk = kScorerTile; // positions per split, a multiple of kScorerTile
  int64_t ctas() const { return groups * splits; }
};

// Splits per group, from `lo` to min(2 lo, hi): the count whose last wave of CTAs (one scorer
// CTA per SM) is fullest, ties to fewer; `lo` when hi < lo or lo = 1 (the groups alone fill
// the GPU twice: splitting buys nothing). 64 decode requests on 132 SMs: 6 splits (384 CTAs,
// 2.91 waves) rather than 5 (320, 2.42: a third of the last wave idle).
inline int64_t balanced_splits(int64_t groups, int64_t lo, int64_t hi, int num_sms) {
  const int64_t sms = std::max(num_sms, 1);
  if (lo <= 1) return lo;
  int64_t best = lo, best_ctas = 0, best_waves = 1;
  for (int64_t s = lo; s <= std::min(2 * lo, hi); ++s) {
    const int64_t ctas = groups * s, waves = (ctas + sms - 1) / sms;
    if (ctas * best_waves > best_ctas * waves) {  // ctas / (waves * sms) is higher
      best = s;
      best_ctas = ctas;
      best_waves = waves;
    }
  }
  return best;
}

// prefill_rows: rows per ragged group, 0 for 256 / H (N = 256: both consumer warpgroups on
// every tile).
inline ScorerPlan plan_scorer(bool decode, int64_t rows, int32_t next_n, int32_t num_requests, int32_t heads,
                              int64_t max_context, int num_sms, int64_t min_chunk = kScorerMinChunk,
                              int32_t prefill_rows = 0) {
  ScorerPlan plan;
  if (decode) {
    plan.rows_per_group = next_n <= 1 ? 1 : next_n <= 2 ? 2 : 4;
    plan.group_stride = std::max(next_n, 1);
    plan.groups = num_requests;
  } else {
    plan.rows_per_group = prefill_rows > 0 ? prefill_rows : heads > 0 ? 256 / heads : 1;
    plan.group_stride = plan.rows_per_group;
    plan.groups = (rows + plan.rows_per_group - 1) / plan.rows_per_group;
  }
  if (plan.groups <= 0) return plan;
  const int64_t target = 2 * int64_t(std::max(num_sms, 1));
  const int64_t by_groups = (target + plan.groups - 1) / plan.groups;
  // The splits of any max_context are at most this (the width cap only lowers them).
  plan.max_splits = int32_t(std::clamp<int64_t>(balanced_splits(plan.groups, by_groups, 1 << 16, num_sms), 1, 1 << 16));
  if (max_context <= 0) return plan;
  const int64_t by_width = std::max<int64_t>(1, max_context / std::max<int64_t>(min_chunk, kScorerTile));
  const int64_t splits =
      std::clamp<int64_t>(std::min(balanced_splits(plan.groups, by_groups, by_width, num_sms), by_width), 1, 1 << 16);
  const int64_t per = (max_context + splits - 1) / splits;
  plan.chunk = (per + kScorerTile - 1) / kScorerTile * kScorerTile;
  plan.splits = int32_t((max_context + plan.chunk - 1) / plan.chunk);
  return plan;
}

// plan_scorer's prefill_rows for the dense operator (0: 256 / H; fp8 scores do not depend on
// the groups, so the fused operator keeps its own, fused_prefill_rows):
// - fp8 in exact mode, H = 64 and 32: N = 128 (128 / H rows), three consumer warpgroups on
//   alternate tiles (dense_logits.cu), 4.7% faster than N = 256 in ping-pong at H = 64 (V3.2
//   prefill 8,192 x 65,536: 15.89 against 16.68 ms; docs/experiments.md, 2026-12-01);
// - fp8 in kProduction at H = 64: 4 rows (N = 256) on four consumer warpgroups, two on every
//   other tile with 128 columns each, so a key tile read from L2 serves 256 columns and each
//   scheduler has four consumer warps: V3.2 8.93 ms against 10.06 for pairs of rows on four
//   warpgroups, whose consumers wait for key tiles a third of the time (H100, one call,
//   2026-12-07; docs/experiments.md). Any other case returns 0 and takes the fused operator's
//   groups (call_plan.cpp).
inline int32_t dense_prefill_rows(bool fp8, bool exact, int32_t heads) {
  if (!fp8) return 0;
  if (exact) return heads == 64 || heads == 32 ? 128 / heads : 0;
  return heads == 64 ? 4 : 0;
}

// The fused operator's preferred rows per ragged group where they fit (0: 256 / H, or half
// that where its candidates do not fit; plan/call_plan.cpp prefill_rows). fp8 at H = 64 in
// exact mode: 2 rows (N = 128 on alternate tiles, three consumer warpgroups, deferred votes)
// instead of 4 on shared tiles, at every K: V3.2 prefill 8,192 x 65,536 (docs/experiments.md,
// 2026-12-03): K = 2,048 20.22 -> 17.66 ms; K = 1,024 18.77 -> 17.56, K = 512 18.43 -> 17.45.
// kProduction takes 4 rows, as the dense operator (dense_prefill_rows): four consumer
// warpgroups share tiles (fused_consumer_wgs), so a key tile read from L2 serves 256 columns.
// V3.2 K = 2,048: 12.12 -> 11.36 ms against pairs of rows on four warpgroups (H100, one call,
// 2026-12-07; 12.61 while the queries kept the f16 room: 2,744 candidates, a vote every step).
inline int32_t fused_prefill_rows(bool fp8, bool exact, int32_t heads) {
  return fp8 && exact && heads == 64 ? 2 : 0;
}

// The production FP8 chain of fp8 caches takes the linear part of its head sums on the tensor
// cores: 2 relu(x) = x + |x|, and sum_h w_h x_h is the key's dot product with the row's
// weighted query, three more MMA columns per row (paged_scorer.cuh, linear_columns.h).
inline constexpr bool takes_linear_columns(bool fp8, bool exact) { return fp8 && !exact; }

// Consumer warpgroups of the dense kernel (dense_logits.cu), each on every third (fourth) tile
// where there are three (four), so the schedulers get more warps to issue from; else two:
// - mxfp4 groups of N <= 64 (the register-key path: decode with next_n = 1 at H = 64,
//   next_n <= 2 at H = 32): v4-pro decode B=64 236 -> 214 us (docs/experiments.md, 2026-11-30);
// - fp8 groups of N = 128 in exact mode (FP16 chain: the prefill groups of that mode,
//   and decode with next_n = 2 at H = 64, 3-4 at H = 32): V3.2 prefill 8,192 x 65,536
//   16.7 -> 15.9 ms against groups of N = 256 in ping-pong (docs/experiments.md, 2026-12-01);
// - four: fp8 at H = 64 in kProduction (setmaxnreg 32 / 112, 128 columns each): groups of
//   N = 256 (prefill, dense_prefill_rows) on shared tiles, two warpgroups on every other
//   tile; groups of N = 128 (decode with next_n = 2) on every fourth tile. V3.2 prefill
//   8,192 x 65,536: 8.93 ms against 10.06 (N = 128, four) and 10.7-11.0 (N = 128, two)
//   (H100, 2026-12-07).
inline constexpr int32_t dense_consumer_wgs(bool fp8, bool exact, int32_t heads, int32_t rows_per_group) {
  const int32_t n = heads * rows_per_group;
  if (!fp8) return n <= 64 ? 3 : 2;
  if (exact) return n == 128 ? 3 : 2;
  return heads == 64 && n >= 128 ? 4 : 2;
}

// Groups of N = H x R = 256 query columns on alternate tiles (paged_scorer.cuh's kAlternate256):
// each consumer warpgroup takes every other key tile with all 256 columns (one chain of four
// m64n256 MMAs), so one warpgroup's epilogue runs under the other's MMAs; else both take every
// tile with 128 columns each. Measured on an H200, 8,192 x 65,536 (docs/experiments.md,
// 2026-12-01; the fused operator's rule is fused_takes_alternate256). The dense operator takes them
// on two consumer warpgroups outside the FP16 chain (fp8 in exact mode): V4-Pro 17.14 -> 14.87
// ms, V3.2 kProduction 11.08 -> 10.53; four consumer warpgroups share tiles instead. fp8 in
// kProduction never takes them: each warpgroup's MMA carries linear columns past its head
// columns (takes_linear_columns), and m64n256 has no room for them.
inline constexpr bool dense_takes_alternate256(bool fp8, bool exact, int32_t heads, int32_t rows_per_group) {
  return heads * rows_per_group == 256 && !fp8 && dense_consumer_wgs(fp8, exact, heads, rows_per_group) == 2;
}

// Fused operator (fused_topk.cu): each row of a group keeps `cap` candidate keys in shared
// memory; between two compaction votes a row gains at most vote_every x step_puts keys
// (step_puts: one 64-position tile per step when two consumer warpgroups share tiles,
// N = H x R = 256 unless `alternate256`, two when four do; otherwise one tile per consumer
// warpgroup, each warpgroup on every consumer_wgs-th tile: a pair, three or four).
inline constexpr int32_t fused_step_puts(int32_t heads, int32_t rows_per_group, bool alternate256 = false,
                                         int32_t consumer_wgs = 2) {
  return heads * rows_per_group == 256 && !alternate256 ? 64 * (consumer_wgs / 2) : 64 * consumer_wgs;
}

// The fused lockstep kernel's consumer warpgroups: fp8 takes the dense kernel's
// (dense_consumer_wgs), mxfp4 two. So fp8 groups of N = 128 in the FP16 chain (exact mode:
// V3.2 pairs of rows, GLM-5 groups of 4) run three, each on every third tile (512 threads,
// 40 / 152 registers): 8,192 x 65,536 (docs/experiments.md, 2026-12-03) V3.2 19.21 -> 17.66
// ms, GLM-5 11.84 -> 11.07. fp8 at H = 64 in kProduction runs four (640 threads, 32 / 112):
// groups of N = 128 (decode with next_n = 2) each on every fourth tile, groups of N = 256
// (prefill) on shared tiles, two warpgroups on each column half of every other tile, with
// deferred votes (a step: two tiles, 128 keys per row). GLM-5's groups of 4 rows (H = 32)
// spill 54 bytes at 112 registers and were not measured that way: they keep two.
inline constexpr int32_t fused_consumer_wgs(bool fp8, bool exact, int32_t heads, int32_t rows_per_group) {
  return fp8 ? dense_consumer_wgs(fp8, exact, heads, rows_per_group) : 2;
}

// Whether each consumer warpgroup of the fused lockstep kernel owns rows and votes alone (two
// warpgroups on shared tiles of N = 256); else the votes are deferred (fused_vote_plan): every
// warpgroup scores every row, or four share tiles, two on each row.
inline constexpr bool fused_votes_per_warpgroup(int32_t heads, int32_t rows_per_group, bool alternate256,
                                                int32_t consumer_wgs) {
  return heads * rows_per_group == 256 && !alternate256 && consumer_wgs == 2;
}

// The least capacity for K: K plus one vote interval of one step (the vote is exact: it asks
// whether an append crossed the limit, fused_topk.cu), and the final sort's power of two >= K,
// 512 at least (its network sorts 8 keys per thread on at least two warps: bitonic_sort.cuh).
inline int32_t fused_min_capacity(int32_t k, int32_t step_puts) {
  int32_t p = 512;
  while (p < k) p <<= 1;
  return std::max(p, k + step_puts);
}

// The fused operator's groups of N = 256 take alternate tiles where a row's `cap` candidate
// keys hold at least 2 K and leave at least kFusedAlternateFreeKeys above K. There both
// warpgroups score every row, a step appends up to 128 keys per row, and there is no sampled
// start: a row climbs from tau = 0 by compactions, each freeing cap - K slots, so little room
// above K makes them many. Measured (fused, shared -> alternate tiles, 8,192 x 65,536; free
// keys cap - K in brackets): H = 64 mxfp4 (cap 2,330) K = 512 [1,818] 18.04 -> 15.90 ms,
// K = 1024 [1,306] 18.27 -> 16.79, K = 2048 [282] 20.84 -> 59.94; fp8 (cap 2,746) K = 512
// [2,234] 20.18 -> 18.59, K = 2048 [698] 20.89 -> 23.70 (kProduction 16.47 -> 18.64); H = 32 fp8
// (rows of 8, cap 1,372) K = 512 [860] 11.41 -> 11.93. And cap >= fused_min_capacity(k, 128):
// a vote interval of pairs fits. Only with two consumer warpgroups: four share tiles. Never
// with linear columns (fp8 in kProduction: dense_takes_alternate256).
inline constexpr int32_t kFusedAlternateFreeKeys = 1024;  // between the measured 860 (slower) and 1,306 (faster)
inline bool fused_takes_alternate256(int32_t heads, int32_t rows_per_group, int32_t k, int32_t cap,
                                     int32_t consumer_wgs = 2, bool linear_columns = false) {
  return heads * rows_per_group == 256 && consumer_wgs == 2 && !linear_columns && int64_t(2) * k <= cap &&
         int64_t(cap) - k >= kFusedAlternateFreeKeys && cap >= fused_min_capacity(k, 128);
}

// Steps between compaction votes: the largest power of two in [2, max_every] that keeps at
// least as much room free as it reserves (cap >= K + 2 x every x step), else the largest that
// fits (cap >= K + every x step), 1 at least (fused_min_capacity guarantees 1 fits). A row
// compacts once its count passes the vote limit cap - every x step (fused_vote_limit).
// The first search does not take 1: a vote every step (more room, fewer compactions)
// measured 4.7% slower at GLM-5 and V4-Pro prefill, whose plans it would change (docs/experiments.md,
// 2026-12-03: the votes cost more than the compactions they save).
inline int32_t fused_vote_interval(int32_t cap, int32_t k, int32_t step_puts, int32_t max_every = 8) {
  auto fits = [&](int32_t every, int64_t reserve) { return int64_t(k) + reserve * every * step_puts <= cap; };
  int32_t every = max_every;
  while (every > 1 && !fits(every, 2)) every /= 2;
  if (every > 1) return every;
  every = max_every;
  while (every > 1 && !fits(every, 1)) every /= 2;
  return every;
}

// The count above which a row compacts at a vote: between two votes a row gains at most
// vote_every x step_puts keys, so a row at or below it keeps its appends in bounds.
inline int64_t fused_vote_limit(int32_t cap, int32_t step_puts, int32_t vote_every) {
  return int64_t(cap) - int64_t(vote_every) * step_puts;
}

// Fused operator, sampled start (sm90/scorer/sampled_start.h): with one split, the steps sampled
// first, at most: a multiple of vote_every (the guess takes a vote step) whose appends stay
// within the vote limit, so the sample phase never compacts; 0 for no sampling.
// fused_sample_tiles: the same under plain votes (fused_vote_plan's, deferred = false).
inline int32_t fused_sample_steps(int64_t limit, int32_t k, int32_t step_puts, int32_t vote_every) {
  if (step_puts <= 0 || vote_every <= 0 || limit <= k) return 0;
  return int32_t(limit / step_puts / vote_every * vote_every);
}
inline int32_t fused_sample_tiles(int32_t cap, int32_t k, int32_t step_puts, int32_t vote_every) {
  return fused_sample_steps(fused_vote_limit(cap, step_puts, vote_every), k, step_puts, vote_every);
}

// One launch's votes: the interval, the limit and the sampled start's steps. Deferred votes
// (fused_topk.cu, where both warpgroups score every row) act at vote
// v + 2 on a crossing before vote v + 1, while the warpgroups may be up to two intervals
// apart, so a row may gain three intervals of keys past the limit before it compacts: the
// room is reserved for them.
struct FusedVotePlan {
  int32_t every;         // steps between votes
  int64_t limit;         // a row past it compacts
  int32_t sample_steps;  // the sampled start's steps at most (appends within the limit)
};
inline FusedVotePlan fused_vote_plan(int32_t cap, int32_t k, int32_t step_puts, bool deferred, int32_t max_every = 8) {
  const int32_t room = deferred ? 3 * step_puts : step_puts;
  FusedVotePlan p;
  p.every = fused_vote_interval(cap, k, room, max_every);
  p.limit = fused_vote_limit(cap, room, p.every);
  p.sample_steps = fused_sample_steps(p.limit, k, step_puts, p.every);
  return p;
}

// Fused operator, decode rows, mxfp4 or fp8 keys (fused_staged.cu): each row on its own, or
// (fused_staged_rows_per_cta) a request's two speculative rows together, scored by one CTA in
// one pass over the keys (its stage holds both rows' scores). A row's positions split into
// `segments` of `cluster`
// chunks of `chunk` positions (<= kTopKStagedMaxChunk: one CTA's stage of fp32 scores in
// shared memory); a cluster of `cluster` CTAs scores a segment and selects its top K as
// kStaged does; with several segments their top K go to the workspace and the merge kernel
// (rows x segments x (8 K + 8) bytes: at most kFusedStagedMaxSegments per row). Chosen by a
// cost in positions per CTA: the waves of clusters (cap.at: clusters at once) times the chunk
// plus the finish (plus kFusedStagedClusterCost for clusters of 4 or 8, kFusedStagedPairCost
// for pairs), plus the merge when there are segments (fused_staged_merge_cost: the cluster
// merge 1,536 + its S x K keys / 36; the ordered merge 1,024 + its keys / 16, / 8 and / 2 as
// they fill its buffers).
// Fitted to `flashindexer bench --plan-sweep` on the H200 (docs/experiments.md, 2026-11-30): every
// plan of 13 decode points, B 1-32, K 512-2048, mxfp4 and fp8; the picks are within 1.4% of
// each point's fastest plan (the model before, a merge of 4,096 whatever S x K, lost up to
// 29%: B = 1 took 13-15 segments, whose S x K keys overflowed the merge's buffer). Refitted
// in the 2026-12-04 run on 86 points (V3.2 and V4-Pro, B 1-128, next_n 1-2, 8,192-262,144, by
// position), where the kernels of 2026-11-30 to 2026-12-04 had left some B1 and B8 picks up to 19%
// behind: a costlier cluster merge, a per-wave cost for clusters of 4 or 8 and for pairs. The
// picks' excess over each point's fastest plan, summed: 1.38 -> 0.96, no point more than 2.6%
// slower than under the old constants (V4-Pro B1 x 32,768). B1 x 8,192 still takes 8 x 1,
// 17-19% behind 4 x 8: constants that fixed it (a merge of S x K / 32 and no fixed part) cost
// V3.2 B1 x 65,536 4% (graph-replayed 1.04x -> 0.99x dense + TopK; docs/experiments.md, 2026-12-04).
// cluster 0: not this path.
inline constexpr int kFusedStagedMaxSegments = 16;
// The ordered merge's flat buffers of keys (topk_over_logits.cu): the selector's own
// (RowSelector::kCap), and the larger one it launches with when splits x K exceed that
// (kOrderedMergeLargeKeys). Beyond both, the keys go through the selector's pushes.
inline constexpr int64_t kFusedStagedSelectorKeys = 10240;
inline constexpr int64_t kFusedStagedMergeFlatKeys = 16384;
// The cost model's constants, in positions of one CTA's chunk.
inline constexpr int64_t kFusedStagedFinishCost = 2048;  // a CTA's finish
inline constexpr int64_t kFusedStagedMergeCost = 1024;   // the ordered merge, fixed part
// A wave of clusters of 4 or 8 CTAs against one of 2: their guess and gather span more CTAs
// (the 2026-12-04 run's sweep: at V3.2 B1 x 32,768 next_n 2, 2 x 16 rows alone ran 36.9 us against
// the 8 x 7 the model took without it, 43.9).
inline constexpr int64_t kFusedStagedClusterCost = 1024;
// A wave of pairs (two rows per CTA) against one of rows alone (2026-12-04: at V3.2 B8 x
// 8,192 next_n 2, 2 x 4 rows alone 38.3 us against 2 x 8 pairs' 43.5).
inline constexpr int64_t kFusedStagedPairCost = 512;
// The cluster merge: its fixed part, and its keys per position of cost (2026-11-30: 1,024 and
// 64; 2026-12-04: 1,536 and 36).
inline constexpr int64_t kFusedStagedClusterMergeCost = 1536;
inline constexpr int64_t kFusedStagedClusterMergeKeys = 36;

// Rows by position take the cluster merge (topk_over_logits.cu cluster_merge_kernel: a
// cluster of CTAs per row, no key list gathered); rows by rank the one-CTA ordered merge.

// The cluster merge's CTAs per row: a segment each (up to 8: two each beyond), or, with
// `paired`, two segments each (half the CTAs and their fixed work, each over twice the keys).
constexpr int cluster_merge_ctas(int segments, bool paired) {
  const int per = paired || segments > 8 ? 2 : 1;
  return (segments + per - 1) / per;
}
// Whether the merge pairs segments: when rows x segments CTAs would not fit one wave of
// two CTAs per SM. (At V3.2 B128 x 32,768 next_n = 2, 2 segments: 512 merge CTAs of ~24K
// cycles each after their wait, in two waves; docs/experiments.md, 2026-11-30.)
inline bool cluster_merge_pairs_segments(int segments, int64_t rows, int num_sms) {
  return segments > 1 && rows * segments > 2 * int64_t(num_sms);
}

// The merge's cost for `segments` x k keys (0 for one segment). The cluster merge: 1,536 +
// 1/36 per key (1,024 + 1/64 from the 2026-11-30 run's sweep of 13 decode points, B 1-128, K
// 512-2048: the picks within 3.3% of each point's fastest plan; refitted in the 2026-12-04 run). The ordered
// merge: per key 1/16 within the selector's own buffer (10,240 keys), 1/8 in the larger flat
// buffer, 1/2 beyond it (the selector's pushes). The larger buffer's 1/8: at V3.2 B1 x 65,536
// 8 x 8 segments (16,384 keys) ran 59.2 us against 8 x 5's 57.2; at V3.2 B1 x 262,144 8 x 8
// 86.9 against 95.3; V4-Pro B1 x 262,144 8 x 14 66.7 against 8 x 10's 68.2 (2026-11-30, fc3fa9f).
inline int64_t fused_staged_merge_cost(int segments, int32_t k, bool cluster_merge) {
  if (segments <= 1) return 0;
  const int64_t keys = int64_t(segments) * k;
  if (cluster_merge) return kFusedStagedClusterMergeCost + keys / kFusedStagedClusterMergeKeys;
  const int64_t own = std::min(keys, kFusedStagedSelectorKeys);
  const int64_t large = std::min(keys, kFusedStagedMergeFlatKeys) - own;
  const int64_t beyond = keys - own - large;
  return kFusedStagedMergeCost + own / 16 + large / 8 + beyond / 2;
}

struct FusedStagedPlan {
  int cluster = 0;   // CTAs per segment (2, 4 or 8); 0: not this path
  int segments = 1;  // per row
  int64_t chunk = 0; // positions per CTA, a multiple of kScorerTile
  int rows_per_cta = 1;  // 2: a CTA scores a request's two speculative rows together
  int merge_ctas = 0;    // segments > 1 by position: the cluster merge's CTAs per row (0: the ordered merge)
  int64_t ctas_per_row() const { return int64_t(cluster) * segments; }  // (per group of rows_per_cta rows)
};

// Rows per CTA of the cluster path: fp8 keys (V3.2, GLM-5) take a request's next_n = 2 rows
// together, in one pass over its keys: the scorer's three consumer warpgroups hold the
// group's 2 H columns in 152 registers each (setmaxnreg), none spilled. mxfp4 rows stay on
// their own: the register-key path spills 322 bytes at H = 64 and 76 at H = 32 there. So do
// next_n 3 and 4 (bounded by kFusedStagedMaxSpeculativePositions).
constexpr int fused_staged_rows_per_cta(bool fp8, int32_t next_n) {
  return fp8 && next_n == 2 ? 2 : 1;
}
// Pairs in clusters of two CTAs: each CTA selects and finishes one row of the pair, reading
// both CTAs' stages, so the two rows' selections run side by side (fused_staged.cu
// select_own_row). In larger clusters CTA 0 finishes both rows in turn.
// The finishes a CTA runs one after the other: a group's rows, but one in a pair's cluster of two.
constexpr int fused_staged_serial_finishes(int cluster, int rows_per_cta) {
  return rows_per_cta == 2 && cluster == 2 ? 1 : rows_per_cta;
}
// Positions per CTA of a pair: two stages of 64 KiB beside the scorer's 91 KiB (fp8, 128
// columns: its f16 queries take 32 KiB, its ring 7 key tiles) within Hopper's 227 KiB, so
// that 2 x 16,384 positions cover a row of 32,768 in one segment (no merge).
inline constexpr int64_t kFusedStagedPairMaxChunk = 16384;

// Calls f(plan) for every plan with `cluster` CTAs per segment that covers max_context in
// chunks a CTA's stages hold (rows_per_cta of them: kFusedStagedPairMaxChunk for pairs), with
// no empty segment, in increasing segments.
template <class F>
inline void for_each_fused_staged_plan(int64_t max_context, int cluster, F&& f, int rows_per_cta = 1) {
  for (int s = 1; s <= kFusedStagedMaxSegments; ++s) {
    const int64_t per = (max_context + int64_t(cluster) * s - 1) / (int64_t(cluster) * s);
    const int64_t chunk = (per + kScorerTile - 1) / kScorerTile * kScorerTile;
    if (chunk > (rows_per_cta > 1 ? kFusedStagedPairMaxChunk : kTopKStagedMaxChunk)) continue;
    if ((max_context + chunk - 1) / chunk <= int64_t(cluster) * (s - 1)) break;  // a segment would be empty
    f(FusedStagedPlan{cluster, s, chunk, rows_per_cta});
  }
}

// Speculative rows (next_n > 1) take the clusters while their requests' keys are at most
// this many positions (B x max_context): V3.2 (H200, 2026-11-30) B = 64 x 32,768 x 2 rows
// 264 us against the lockstep kernel's 321, B = 64 x 131,072 942 against 852; B = 1-8 at
// 32,768-131,072 1.25-2.9x faster. V4-Pro (2026-11-30): 8M positions tie, 16M 9-10% slower
// on the clusters (docs/experiments.md).
inline constexpr int64_t kFusedStagedMaxSpeculativePositions = int64_t{1} << 22;

// Pairs (rows_per_cta 2) take requests whose keys are at most this many positions (B x
// max_context): H200, V3.2 next_n = 2: B128 x 131,072 (16M) 1,357 us (2 x 4 pairs) against the
// lockstep kernel's 1,489 (docs/experiments.md, 2026-11-30; 1,714 against 1,491 in the 2026-11-30 run, before
// a pair's rows were selected side by side). Beyond 16M (B128 x 262,144) nothing was measured.
inline constexpr int64_t kFusedStagedMaxPairPositions = int64_t{1} << 24;

// The cheapest plan with `rows_per_cta` rows per CTA, and its cost (INT64_MAX: none). A CTA of
// two rows costs its chunk x 3 / 2 (one read of the keys, twice the MMA and epilogue work)
// plus the finishes it runs one after the other (fused_staged_serial_finishes).
inline std::pair<FusedStagedPlan, int64_t> cheapest_fused_staged_plan(int64_t rows, int64_t max_context, int32_t k,
                                                                      int num_sms, const ClusterCapacity& cap,
                                                                      bool by_position, int rows_per_cta) {
  FusedStagedPlan best;
  int64_t best_cost = INT64_MAX;
  const int64_t groups = rows / rows_per_cta;
  for (const int c : {2, 4, 8}) {
    const int64_t fit = cap.at(c, num_sms);
    if (fit <= 0) continue;
    for_each_fused_staged_plan(
        max_context, c,
        [&](const FusedStagedPlan& plan) {
          const int64_t waves = (groups * plan.segments + fit - 1) / fit;
          const int64_t cost =
              waves * (plan.chunk * (1 + rows_per_cta) / 2 +
                       fused_staged_serial_finishes(c, rows_per_cta) * kFusedStagedFinishCost +
                       (c > 2 ? kFusedStagedClusterCost : 0) + (rows_per_cta > 1 ? kFusedStagedPairCost : 0)) +
              fused_staged_merge_cost(plan.segments, k, by_position);
          if (cost < best_cost) {
            best_cost = cost;
            best = plan;
          }
        },
        rows_per_cta);
  }
  return {best, best_cost};
}

// by_position: the rows' outputs in position order (the cluster merge's). rows_per_cta:
// fused_staged_rows_per_cta (2: next_n = 2 rows may go in pairs, up to
// kFusedStagedMaxPairPositions; the cheaper of pairs and rows on their own, the latter within
// kFusedStagedMaxSpeculativePositions). On the H200's V3.2 sweep B1 keeps rows on their own (8
// CTAs a row: 58.7 us against pairs' 71.6 at 131,072) and B8 and up takes pairs.
inline FusedStagedPlan plan_fused_staged(int64_t rows, int64_t max_context, int32_t k, int num_sms,
                                         const ClusterCapacity& cap, int32_t next_n = 1, bool by_position = true,
                                         int rows_per_cta = 1) {
  if (rows <= 0 || max_context <= 0) return {};
  if (rows_per_cta < 1 || rows % rows_per_cta != 0 || (rows_per_cta > 1 && rows_per_cta != next_n)) return {};
  std::pair<FusedStagedPlan, int64_t> alone{FusedStagedPlan{}, INT64_MAX}, pairs = alone;
  if (next_n == 1 || rows / next_n * max_context <= kFusedStagedMaxSpeculativePositions)
    alone = cheapest_fused_staged_plan(rows, max_context, k, num_sms, cap, by_position, 1);
  if (rows_per_cta > 1 && rows / rows_per_cta * max_context <= kFusedStagedMaxPairPositions)
    pairs = cheapest_fused_staged_plan(rows, max_context, k, num_sms, cap, by_position, rows_per_cta);
  return pairs.second < alone.second ? pairs.first : alone.first;
}

}  // namespace flashindexer::cuda
