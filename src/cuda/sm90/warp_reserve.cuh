// flashindexer sm_90a: warp-aggregated slot reservation for append-only lists.
//
// Purpose: the selectors append the keys that pass a filter to a list (a shared-memory
//   candidate buffer, block_select.cuh; a global selected or tie list, grid_radix_select.cuh)
//   with one atomic per warp instead of one per key.
// Algorithm: each lane has up to four keys; four ballots give each key's slot: the warp's
//   base (lane 0 adds the warp's total to the list's counter) + the passing keys of lower
//   index j in the whole warp + the lanes below with key j passing. No shuffle scan.
// Threads: all 32 lanes of a warp call it together. Shared memory: none.
#pragma once

#include <cstdint>

namespace flashindexer::sm90 {

// Reserves one slot of the list whose length is *counter (shared or global) for each
// take[j]; slot[j] is its index (undefined where !take[j]). Returns false, with no slot
// and no atomic, when no lane of the warp takes a key. Slots beyond a list's capacity are
// the caller's to drop.
__device__ __forceinline__ bool warp_reserve(const bool (&take)[4], uint32_t* counter, uint32_t (&slot)[4]) {
  uint32_t votes[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) votes[j] = __ballot_sync(0xffffffffu, take[j]);
  if ((votes[0] | votes[1] | votes[2] | votes[3]) == 0) return false;
  const uint32_t lane = threadIdx.x & 31, below = (1u << lane) - 1;
  uint32_t before[4], total = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    before[j] = total;
    total += __popc(votes[j]);
  }
  uint32_t base = 0;
  if (lane == 0) base = atomicAdd(counter, total);
  base = __shfl_sync(0xffffffffu, base, 0);
#pragma unroll
  for (int j = 0; j < 4; ++j) slot[j] = base + before[j] + __popc(votes[j] & below);
  return true;
}

}  // namespace flashindexer::sm90
