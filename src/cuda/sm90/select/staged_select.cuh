// flashindexer sm_90a: the selection pieces that the row kernels share: the sampled guess's
// rank, the output writes, and the finish over a cluster's gathered candidates.
//
// Purpose: topk_over_logits.cu (every TopK path) and fused_staged.cu (the fused decode
//   path, which stages scores in shared memory as topk_staged_kernel stages logits) write
//   rows the same way, so the outputs agree by construction.
// Threads: kRowBlock (512) per CTA, all in every call (CTA barriers).
// Shared memory: the caller's RowSelector::Storage (~88 KiB) and small scratch.
#pragma once

#include <cstdint>

#include "core/rank_key.h"
#include "core/row_window.h"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "cuda/sm90/select/block_select.cuh"
#include "cuda/sm90/select/flat_runs.h"
#include "cuda/sm90/select/warp_scan.cuh"

namespace flashindexer::sm90 {

inline constexpr int kRowBlock = 512;  // threads of the one-row kernels
using RowSelector = BlockSelector<kRowBlock>;

// The sample rank of the guess for a window of len positions, 0 when none is taken: ~2K
// survivors from the (2K x 2048 / L)-th best of 2048 evenly spaced samples, taken only when
// that rank is >= 8 (a stable estimate).
template <int kThreads = kRowBlock>
__device__ inline int64_t guess_rank(int64_t len, int32_t k) {
  const int64_t rank = len > 0 ? 2 * int64_t(k) * BlockSelector<kThreads>::kTile / len : 0;
  return len >= 8192 && rank >= 8 ? rank : 0;
}

// The staged kernels' sample rank (0: no guess; the rows kernel's condition): about
// mu + 5 sigma, where mu = K x 2,048 / len is the mean number of the 2,048 samples above the
// row's K-th score (binomial, sigma ~ sqrt(mu)), and at most the rows kernel's 2 mu. The
// guess fails (the caller falls back) when more than that many samples beat the K-th score:
// p ~ 3e-7 for mu >= 25.
__device__ inline int64_t staged_guess_rank(int64_t len, int32_t k) {
  const int64_t rank = guess_rank(len, k);
  if (rank == 0) return 0;
  const float mu = float(k) * float(RowSelector::kTile) / float(len);
  return min(rank, int64_t(mu + 5.0f * sqrtf(mu)) + 1);
}

// Writes one row's outputs from a sorted blocked arrangement (n valid entries). Every
// page-table read is issued before the first store (a store may alias the table, so the
// compiler keeps them in program order: one read latency per row, not one per entry).
template <int kSortItems>
__device__ inline void write_row(const TopKArgs& a, int64_t row, const RowWindow& w, uint32_t status, int32_t n,
                                 const uint64_t (&sorted)[kSortItems]) {
  const TopKOutputs& o = a.out;
  const float kNegInf = -__int_as_float(0x7f800000);
  int32_t slot[kSortItems];
#pragma unroll
  for (int i = 0; i < kSortItems; ++i) {
    const int32_t idx = int32_t(threadIdx.x) * kSortItems + i;
    const bool real = idx < n && idx < a.k;
    slot[i] = real && o.slots ? int32_t(physical_slot(a.pages, w.request, rank_key_position(sorted[i]))) : -1;
  }
#pragma unroll
  for (int i = 0; i < kSortItems; ++i) {
    const int32_t idx = int32_t(threadIdx.x) * kSortItems + i;
    if (idx >= a.k) continue;
    const bool real = idx < n;
    o.positions[row * o.positions_row_stride + idx] = real ? rank_key_position(sorted[i]) : -1;
    if (o.slots) o.slots[row * o.slots_row_stride + idx] = slot[i];
    if (o.scores) o.scores[row * o.scores_row_stride + idx] = real ? rank_key_score(sorted[i]) : kNegInf;
  }
  if (threadIdx.x == 0) {
    if (o.counts) o.counts[row] = n;
    if (o.status) o.status[row] = status;
  }
}

// Bits that hold every position of the problem: positions < max_context < 2^bits, so the
// low word of a rank key (0xFFFFFFFF - position) is nonzero in them (BlockSelector::finish).
__device__ inline int position_bits(const TopKArgs& a) {
  const int64_t m = a.rows.max_context;
  return m >= (int64_t{1} << 31) ? 32 : 64 - __clzll(m) + (m == 0);
}

// Warp `warp` of kWarps takes the items [lo, hi) of [0, n): runs of per items, a whole
// multiple of 32 (the last warps' runs shorter or empty).
template <int kWarps, class T>
struct WarpRun {
  T per, lo, hi;
  __device__ WarpRun(T n, int warp)
      : per(((n + kWarps - 1) / kWarps + 31) / 32 * 32), lo(min(T(warp) * per, n)), hi(min(lo + per, n)) {}
};

// Pass 1 of the staged kernels: lane l owns float4 [l0, l1) of its warp's run [wv0, wv1)
// (n = wper / 32 of them, in position order, wper a multiple of 32), visited rotated by the
// lane (16-byte reads without bank conflicts for n = 8 or 16). Returns the lane's mask: bit
// 4 it + j is bit j of bits(stage[l0 + it], l0 + it), a 4-bit mask of the float4's passing
// components (n <= 16).
struct LaneRun {
  int32_t l0, l1, n, rot;
  __device__ LaneRun(int32_t wv0, int32_t wv1, int32_t wper, int lane) : n(wper / 32) {
    l0 = min(wv0 + lane * n, wv1);
    l1 = min(l0 + n, wv1);
    rot = n > 0 ? lane % n : 0;
  }
  template <class Bits>
  __device__ uint64_t pass(const float4* stage, Bits&& bits) const {
    uint64_t mask = 0;
#pragma unroll 1
    for (int32_t step = 0; step < n; ++step) {
      const int32_t it = step + rot < n ? step + rot : step + rot - n;
      if (l0 + it >= l1) continue;
      mask |= uint64_t(bits(stage[l0 + it], l0 + it)) << (4 * it);
    }
    return mask;
  }
};

// Pass 2 of the staged kernels (warp-wide): lane l's scores f[i] whose bit i of `pass` is
// set, as rank keys of positions pos0 + i, in position order from cand[base + the passing
// scores of the warp's lanes below l] on. Each lane starts at its bit `lane` (wrapping):
// lanes full of candidates (an ascending row's last warps) then read and write different
// banks at each step.
__device__ inline void put_passing(uint64_t* cand, uint32_t base, uint64_t pass, const float* f, int32_t pos0,
                                   int lane) {
  const uint32_t mine = uint32_t(__popcll(pass));
  const uint32_t at = base + warp_inclusive_sum(mine, lane) - mine;
  const uint64_t rotated = lane == 0 ? pass : (pass >> lane) | (pass << (64 - lane));
#pragma unroll 1
  for (uint64_t m = rotated; m != 0; m &= m - 1) {
    const int bit = (__ffsll(static_cast<long long>(m)) - 1 + lane) & 63;
    const uint32_t below = uint32_t(__popcll(pass & ((uint64_t{1} << bit) - 1)));
    cand[at + below] = rank_key(f[bit], pos0 + bit);
  }
}

// Over candidates cand[0, n) in position order (shared memory: st.cand, or the split merge's
// larger buffer): the K-th key (a radix select in st.select; none when n <= K), then
// emit(index, key) for every key at or above it, index its place among them in position
// order (warp w takes a run of the candidates; one scan over the warps' counts). Returns
// min(K, n). warp_count: kRowBlock / 32 words of shared scratch. No barrier follows its last
// reads of cand and warp_count: a caller that writes either afterwards needs one first.
template <class Clock, class Emit>
__device__ uint32_t keep_gathered(RowSelector::Storage& st, const uint64_t* cand, uint32_t n, uint32_t k,
                                  uint32_t* warp_count, Clock& clock, long long& t, Emit&& emit) {
  constexpr int kWarps = kRowBlock / 32;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const uint64_t kth = n > k ? RowSelector::Select::kth(st.select, cand, n, k, int(threadIdx.x)) : 0ull;
  clock.lap(kTopKProfileReduce, t);
  const WarpRun<kWarps, uint32_t> wr(n, warp);
  const uint32_t c0 = wr.lo, c1 = wr.hi;
  uint32_t mine = 0;
  for (uint32_t i = c0 + lane; i < c1; i += 32) mine += cand[i] >= kth;
  const uint32_t in_warp = __reduce_add_sync(0xffffffffu, mine);
  if (lane == 0) warp_count[warp] = in_warp;
  __syncthreads();
  uint32_t at = 0;
  for (int q = 0; q < warp; ++q) at += warp_count[q];
  const uint32_t lower = (1u << lane) - 1u;
  for (uint32_t i0 = c0; i0 < c1; i0 += 32) {  // warp-uniform
    const uint32_t i = i0 + uint32_t(lane);
    const uint64_t key = i < c1 ? cand[i] : 0ull;  // (rank keys are never 0)
    const bool keep = i < c1 && key >= kth;
    const uint32_t b = __ballot_sync(0xffffffffu, keep);
    if (keep) emit(at + uint32_t(__popc(b & lower)), key);
    at += uint32_t(__popc(b));
  }
  return min(n, k);
}

// A row's outputs from its gathered candidates cand[0, n) (keep_gathered). With a page table,
// or by rank: the kept keys to `ranked` ([K] keys of shared memory outside cand and
// st.select; it may alias st.cand when cand is elsewhere) in position order,
// by rank through a block radix sort, then write_row (each thread's page-table reads at
// once; emitting each kept key straight to the outputs cost a dependent page-table read
// per warp step: 12K cycles for 512 keys, docs/experiments.md 2026-11-30). By position with no
// table, each kept key goes straight to the outputs (the staging cost ~1 us at kStaged's
// S = 1 rows: docs/experiments.md, 2026-11-30).
template <class Clock>
__device__ void write_gathered_row(const TopKArgs& a, int64_t row, const RowWindow& w, uint32_t status,
                                   RowSelector::Storage& st, const uint64_t* cand, uint32_t n, uint64_t* ranked,
                                   uint32_t* warp_count, Clock& clock, long long& t) {
  if (a.order == OutputOrder::kPosition && a.pages.table == nullptr) {
    const TopKOutputs& o = a.out;
    const uint32_t kept = keep_gathered(st, cand, n, uint32_t(a.k), warp_count, clock, t, [&](uint32_t idx, uint64_t key) {
      const int32_t pos = rank_key_position(key);
      o.positions[row * o.positions_row_stride + idx] = pos;
      if (o.slots) o.slots[row * o.slots_row_stride + idx] = int32_t(physical_slot(a.pages, w.request, pos));
      if (o.scores) o.scores[row * o.scores_row_stride + idx] = rank_key_score(key);
    });
    const float kNegInf = -__int_as_float(0x7f800000);
    for (int32_t i = int32_t(kept) + int32_t(threadIdx.x); i < a.k; i += kRowBlock) {
      o.positions[row * o.positions_row_stride + i] = -1;
      if (o.slots) o.slots[row * o.slots_row_stride + i] = -1;
      if (o.scores) o.scores[row * o.scores_row_stride + i] = kNegInf;
    }
    if (threadIdx.x == 0) {
      if (o.counts) o.counts[row] = int32_t(kept);
      if (o.status) o.status[row] = status;
    }
    clock.lap(kTopKProfileWrite, t);
    return;
  }
  const uint32_t kept = keep_gathered(st, cand, n, uint32_t(a.k), warp_count, clock, t,
                                      [&](uint32_t idx, uint64_t key) { ranked[idx] = key; });
  __syncthreads();  // ranked is written; cand (which the sort's storage aliases) is read
  uint64_t keys[RowSelector::kSortItems];
#pragma unroll
  for (int i = 0; i < RowSelector::kSortItems; ++i) {
    const int idx = int(threadIdx.x) * RowSelector::kSortItems + i;
    keys[i] = uint32_t(idx) < kept ? ranked[idx] : 0ull;  // 0: no key, sorts last
  }
  if (a.order == OutputOrder::kRank) {
    __syncthreads();  // every thread holds its keys: ranked may alias the sort's storage
    RowSelector::Storage::Sort sorter(st.sort);
    sorter.SortDescending(keys);
  }
  write_row(a, row, w, status, int32_t(kept), keys);
  clock.lap(kTopKProfileWrite, t);
}

// CTA 0 of a cluster: appends the other CTAs' candidates to its own (cand[0, first[1])), in
// CTA order: candidate i (first[1] <= i < n) is CTA q's cand[i - first[q]], q the last CTA
// with first[q] <= i (first[0] = 0, nondecreasing; ctas <= kTopKStagedMaxCluster). Four
// distributed-shared-memory loads in flight per thread (a copy per CTA, one after another,
// took 6.7-8.3K cycles: docs/experiments.md, 2026-11-30). Block-wide call; first is read after a
// barrier.
template <class Cluster>
__device__ void gather_cluster_candidates(const Cluster& cluster, uint64_t* cand, const uint32_t* first, uint32_t ctas,
                                          uint32_t n) {
  __syncthreads();  // first[] is written
  const uint32_t own = ctas > 1 ? first[1] : n;
  for (uint32_t i0 = own + threadIdx.x; i0 < n; i0 += 4 * kRowBlock) {
    uint64_t key[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // every load issued (past n: element i0 again), then kept
      const uint32_t i = i0 + uint32_t(j * kRowBlock) < n ? i0 + uint32_t(j * kRowBlock) : i0;
      const uint32_t q = run_of<cuda::kTopKStagedMaxCluster>(first, ctas, i);
      key[j] = cluster.map_shared_rank(cand, q)[i - first[q]];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (i0 + uint32_t(j * kRowBlock) < n) cand[i0 + uint32_t(j * kRowBlock)] = key[j];
  }
}

}  // namespace flashindexer::sm90
