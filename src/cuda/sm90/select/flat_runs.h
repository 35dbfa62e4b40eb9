// flashindexer: which run of a flat array of runs holds element i, callable on the host too
// (tests/test_flat_runs.cpp checks it in CI, without a GPU).
//
// Runs q = 0..n-1 start at first[q] (first[0] = 0, nondecreasing; a run may be empty): the
// cluster gather's CTAs (staged_select.cuh) and the split merge's splits (topk_over_logits.cu)
// read their peers' keys as one flat array. run_of finds the last q < n with first[q] <= i
// by binary lifting over kMax (a power of two >= n) in log2(kMax) steps with no branch: every
// step loads an in-bounds entry and adds its step by a select, so the compiler unrolls the
// steps and a thread's searches for several i overlap. (With `q + step < n && ...` each step
// was a branch around its load, and the split merge's flat copy of 10,240 keys took 13-16K
// cycles: docs/experiments.md, 2026-11-30.)
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace flashindexer::sm90 {

template <uint32_t kMax>
FI_HD uint32_t run_of(const uint32_t* first, uint32_t n, uint32_t i) {
  static_assert(kMax > 0 && (kMax & (kMax - 1)) == 0, "kMax is a power of two");
  uint32_t q = 0;
  for (uint32_t step = kMax / 2; step > 0; step /= 2) {
    const uint32_t at = q + step < n ? q + step : n - 1;  // in bounds (n >= 1)
    q += (q + step < n) & (first[at] <= i) ? step : 0u;
  }
  return q;
}

}  // namespace flashindexer::sm90
