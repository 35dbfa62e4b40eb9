// flashindexer sm_90a: the warp's inclusive prefix sum (Kogge-Stone over shuffles), shared by
// the selectors' scans: RadixSelect::exclusive_sum, warp_reserve, the staged passes, the
// split merges.
// Threads: all 32 lanes of a warp call it together. Shared memory: none.
#pragma once

#include <cstdint>

namespace flashindexer::sm90 {

// The sum of x over lanes 0..lane of the calling warp (lane = the caller's lane index).
__device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t x, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += u;
  }
  return x;
}

}  // namespace flashindexer::sm90
