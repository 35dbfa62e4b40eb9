// flashindexer: the fused operator's sampled start, callable on the host too
// (tests/test_heuristics.cpp checks it in CI, without a GPU).
//
// A fused CTA with one pass over long rows visits `sample` tiles spread evenly over its
// tile sequence first (tile j * stride, j < sample), then the others in order. After the
// sample, each long row's m-th best key g (m from guess_rank: a count that exceeds, with
// a margin of 6 standard deviations, the number of sample keys expected above the row's
// K-th key) becomes its threshold, so the stream appends ~m L / n keys instead of
// ~K (1 + ln(L / cap)) and rarely compacts. Only a guess: a row that ends with fewer than K
// keys >= g is flagged and the repair launch scores its group again without the guess
// (fused_topk.cu), so the result is exact whatever the data.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace flashindexer::sm90 {

struct SampleOrder {
  int32_t sample = 0;  // tiles visited first (0: the plain order)
  int32_t stride = 1;  // sample j is tile j * stride
  uint32_t magic = 0;  // ceil(2^32 / (stride - 1)): u / (stride - 1) by a multiply-high

  // The order for a CTA of num_tiles tiles, sampling up to max_sample tiles: none unless
  // every sample tile stands for at least 4 tiles (and num_tiles <= 65,536, where the
  // multiply-high division is exact: u (stride - 1) < 2^32).
  FI_HD static SampleOrder plan(int32_t num_tiles, int32_t max_sample) {
    SampleOrder o;
    if (max_sample <= 0 || num_tiles < 4 * max_sample || num_tiles > 65536) return o;
    o.sample = max_sample;
    o.stride = num_tiles / max_sample;
    o.magic = uint32_t(((uint64_t{1} << 32) + uint64_t(o.stride - 2)) / uint64_t(o.stride - 1));
    return o;
  }

  // The tile visited at step i of [0, num_tiles): a bijection. Per step a compare or two
  // and a multiply-high (the producer maps every tile it copies, the consumers every tile
  // they score).
  FI_HD int32_t tile(int32_t i) const {
    if (i < sample) return i * stride;
    const uint32_t u = uint32_t(i - sample), per = uint32_t(stride - 1);  // per: non-sample tiles of a block
    if (u >= uint32_t(sample) * per) return i;  // past the sampled blocks: u + sample
    const uint32_t b = uint32_t((uint64_t(u) * magic) >> 32);
    return int32_t(b * uint32_t(stride) + (u - b * per) + 1);
  }
};

// The rank m of a row's guess among its n sample keys (window length L, top K), or 0 for
// no guess. The sample keys above the K-th number ~ Poisson(K n / L); m exceeds that mean
// by 6 standard deviations + 1 (a failure rate near 1e-7 per row for means >= 8, where
// the tail is still close to normal). No guess for a smaller mean, nor when m >= K or
// m > n / 2 (the guess would keep too much to help).
FI_HD int32_t guess_rank(int32_t k, int64_t n, int64_t window) {
  if (n <= 0 || window <= 0) return 0;
  const float mean = float(k) * float(n) / float(window);
  if (mean < 8.0f) return 0;
  const int32_t m = int32_t(ceilf(mean + 6.0f * sqrtf(mean))) + 1;
  return m < k && int64_t(m) * 2 <= n ? m : 0;
}

// Whether a fused scorer group of n columns (one split) may start with a sample: shared
// tiles (N = 256) in steps of one tile; alternate tiles (N = 256 where the buffers hold 2 K
// keys, and every N < 256) in steps of one tile per consumer warpgroup, where `pairs`
// lets them. The host (the repair flags, max_sample) and the kernel's tile order
// (PagedScorer::kSampledOrder) both ask it. GLM-5 prefill (H = 32, groups of 4: N = 128)
// 14.22 -> 13.11 ms with a sample (docs/experiments.md, 2026-12-03).
FI_HD constexpr bool group_samples(int n, bool alternate256, bool pairs) {
  return (n == 256 && (!alternate256 || pairs)) || (n < 256 && pairs);
}

}  // namespace flashindexer::sm90
