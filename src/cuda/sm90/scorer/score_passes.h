// flashindexer: the scorer's per-CTA pass plan (paged_scorer.cuh), callable on the host too
// (tests/test_score_passes.cpp checks it on random groups in CI, without a GPU).
//
// A CTA scores a group of up to 8 rows over the positions [c0, c1) of its split. Rows that
// share a request are scored together in one pass over the union of their windows (each
// row masked to its own window later); rows of another request take another pass. Absent
// rows, failed rows and empty windows take no pass. Tiles are 64-aligned, so a tile lies in
// one page (page sizes are multiples of 64).
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "cuda/plan/heuristics.h"

#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

namespace flashindexer::sm90 {

// Per-row state of a group (shared memory on the GPU).
struct GroupRow {
  int64_t row;     // global row index, -1 if absent
  int32_t request;
  int32_t start, end;
  uint32_t status;
  uint32_t nan;    // set-up: OR of the page-check bits; then 1 once a score is NaN
};

struct ScorePass {
  uint32_t mask;       // rows of the group scored in this pass
  int32_t request;
  int64_t first;       // first tile position (64-aligned)
  int32_t tiles;
  int32_t tile_begin;  // index of the pass's first tile in the CTA's tile sequence
};

FI_HD int lowest_clear_bit(uint32_t done) {
#if defined(__CUDA_ARCH__)
  return __ffs(~done) - 1;
#else
  return std::countr_zero(~done);
#endif
}

// Fills passes[0, *num_passes) (at most kRows) and the CTA's tile count.
template <int kRows>
FI_HD void plan_score_passes(const GroupRow* rows, int64_t c0, int64_t c1, ScorePass* passes, int32_t* num_passes,
                             int32_t* num_tiles) {
  uint32_t done = 0;
  for (int r = 0; r < kRows; ++r)
    if (rows[r].row < 0 || rows[r].status != 0 || rows[r].end <= rows[r].start) done |= 1u << r;
  int np = 0, tiles = 0;
  while (done != (1u << kRows) - 1) {
    const int first = lowest_clear_bit(done);
    ScorePass ps{0, rows[first].request, 0, 0, tiles};
    int64_t lo = INT64_MAX, hi = 0;
    for (int r = first; r < kRows; ++r) {
      if ((done >> r) & 1 || rows[r].request != ps.request) continue;
      ps.mask |= 1u << r;
      lo = int64_t(rows[r].start) < lo ? int64_t(rows[r].start) : lo;
      hi = int64_t(rows[r].end) > hi ? int64_t(rows[r].end) : hi;
    }
    done |= ps.mask;
    lo = c0 > lo ? c0 : lo;
    hi = c1 < hi ? c1 : hi;
    if (lo < hi) {
      ps.first = lo / cuda::kScorerTile * cuda::kScorerTile;
      ps.tiles = int32_t((hi - ps.first + cuda::kScorerTile - 1) / cuda::kScorerTile);
    }
    tiles += ps.tiles;
    passes[np++] = ps;
  }
  *num_passes = np;
  *num_tiles = tiles;
}

}  // namespace flashindexer::sm90
