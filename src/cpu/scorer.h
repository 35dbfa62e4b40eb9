// flashindexer CPU reference: the scoring core shared by dense logits and fused TopK.
//
// score[r, s] = sum_h w_eff[r,h] * relu(sum_d q̂[r,h,d] * k̂[s,d])   (CONTRACT §1)
// Order of operations (fixed, so both consumers see the same bits):
//   k̂ dequantized to fp32 per token (exact for mxfp4; one rounding for fp8's scale);
//   the dot over d in fp32 with 8 interleaved partial sums, reduced pairwise;
//   relu(x) = x > 0 ? x : 0, except that NaN stays NaN; heads summed in order h = 0..H-1.
// score_window() walks a validated window tile by tile and hands each tile of
// scores to a consumer: dense logits writes it out, the fused operator streams it
// into a StreamSelector. That single seam makes fused == dense + TopK bit for bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../core/row_window.h"
#include "flashindexer/problem.h"
#include "flashindexer/quantize.h"

namespace flashindexer::cpu {

inline constexpr int kScoreTile = 64;  // positions per scoring tile

// Per-worker scratch, carved out of the caller's workspace.
struct ScoreScratch {
  float* q;       // [H, D] dequantized query heads of the current row
  float* w;       // [H] effective weights
  float* k;       // [kScoreTile, D] dequantized keys of the current tile
  float* scores;  // [kScoreTile]
};

size_t score_scratch_floats(int num_heads);
ScoreScratch carve_score_scratch(float* base, int num_heads);

void load_row_query(const IndexerProblem& p, int64_t row, const ScoreScratch& sc);
// Scores n <= kScoreTile positions [s0, s0 + n) of `request` (pages already validated).
void score_tile(const IndexerProblem& p, int32_t request, int64_t s0, int n, const ScoreScratch& sc);

// consume(int64_t first_position, const float* scores, int n) for each tile of the window.
template <typename Consumer>
void score_window(const IndexerProblem& p, int64_t row, const RowWindow& w, const ScoreScratch& sc,
                  Consumer&& consume) {
  if (w.length() <= 0) return;
  load_row_query(p, row, sc);
  for (int64_t s0 = w.start; s0 < w.end; s0 += kScoreTile) {
    const int n = static_cast<int>(std::min<int64_t>(kScoreTile, w.end - s0));
    score_tile(p, w.request, s0, n, sc);
    consume(s0, static_cast<const float*>(sc.scores), n);
  }
}

}  // namespace flashindexer::cpu
