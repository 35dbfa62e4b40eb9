// flashindexer sm_90a: warp-aggregated slot reservation for append-only lists.
//
// Purpose: the grid select appends the keys that pass a filter to a global list (the
//   selected or the tie list, grid_radix_select.cuh) with one atomic per warp instead of one
//   per key. (block_select.cuh gives each warp its own slots instead: no atomic at all.)
// Algorithm: an inclusive scan of the lanes' counts (shuffles); lane 31 adds the warp's total
//   to the list's counter; each lane's first slot = the old counter + its exclusive prefix.
// Threads: all 32 lanes of a warp call it together. Shared memory: none.
#pragma once

#include <cstdint>

#include "cuda/sm90/select/warp_scan.cuh"

namespace flashindexer::sm90 {

// Reserves `mine` consecutive slots of the list whose length is *counter (shared or global)
// for each lane; returns the lane's first slot. Slots beyond a list's capacity are the
// caller's to drop.
__device__ __forceinline__ uint32_t warp_reserve(uint32_t mine, uint32_t* counter) {
  const int lane = threadIdx.x & 31;
  const uint32_t incl = warp_inclusive_sum(mine, lane);
  uint32_t base = 0;
  if (lane == 31) base = atomicAdd(counter, incl);
  return __shfl_sync(0xffffffffu, base, 31) + incl - mine;
}

}  // namespace flashindexer::sm90
