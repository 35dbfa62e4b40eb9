// flashindexer sm_90a: exact TopK over fp32 logits (CONTRACT §3), any input.
//
// Purpose: positions, slots, scores, counts and status of the K best positions of
//   each row's window, bit-identical to the CPU reference (same rank keys, same
//   row validation, same canonical NaN).
// Algorithm, many rows: one CTA per row streams its window through a BlockSelector
//   (block_select.cuh): 16-byte streaming loads, double-buffered (4 float4 in flight per
//   thread), tiles in a permuted order, a verified sampled threshold, a warp vote of the raw
//   order bits against a rising threshold, rank keys only for the warps with candidates,
//   per-warp candidate slots, exact compaction in shared memory.
// Fewer rows (heuristics.h plan_topk): kStaged (rows that a cluster of 2, 4 or 8
//   CTAs covers in chunks of <= 32,768 positions): topk_staged_kernel; each CTA bulk-copies
//   its chunk into shared memory, keeps the scores at or above the row's sampled guess in
//   position order; CTA 0 gathers them all, selects the K-th and writes the row.
//   kPair (5 .. SMs / 2 rows of 32,768 .. 131,072
//   positions): topk_pair_kernel, a cluster of two CTAs per row, each on its own SM and
//   streaming half the row with the same guess; CTA 0 takes CTA 1's keys through
//   distributed shared memory and finishes. kSplit: each row's chunks keep their exact
//   local top K in the workspace (topk_split_kernel); topk_merge_kernel merges them, one
//   CTA per row (the fused operator's split rows end there too; the fused decode clusters'
//   segments by position: cluster_merge_kernel, a cluster of CTAs per row). kGrid (a few rows): the
//   grid-wide radix select of grid_radix_select.cuh narrows each row to the keys above a
//   24-bit threshold prefix and the keys at it, over many CTAs per row; grid_finish_kernel
//   then selects among those with the same BlockSelector.
// Grid: x = rows (C x rows for kStaged, 2 x rows for the pair kernel; y = splits for
//   topk_split_kernel).
// Threads: 512, no specialisation; the grid select's finish 1024 (one CTA per row, at most
//   8 rows: H200 1 x 262,144 33.0 -> 29.4 us graph-timed, docs/experiments.md 2026-11-29).
// Shared memory: sizeof(BlockSelectStorage<threads>) (dynamic): ~88 KiB at 512 threads (two
//   CTAs per SM), ~152 KiB at 1024; the pair kernel asks for 116 KiB (one CTA per SM);
//   kStaged ~88 KiB + its chunk (up to 128 KiB, one CTA per SM).
#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>

#include <atomic>
#include <cmath>
#include <utility>

#include "core/row_window.h"
#include "cuda/sm90/common/cluster_launch.h"
#include "cuda/sm90/common/diagnostics.h"
#include "cuda/sm90/common/phase_clock.cuh"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "cuda/sm90/select/block_select.cuh"
#include "cuda/sm90/select/grid_radix_select.cuh"
#include "cuda/sm90/select/staged_select.cuh"

namespace flashindexer::sm90 {
namespace {

constexpr int kMinBlocks = 2;  // CTAs per SM the register budget is sized for
// float4 per thread per group; two groups in flight (4 or 8 measured no faster, 2026-11-29)
// (the pair kernel too, at 128 registers: 35.5 vs 34.9 us at 64 x 65,536, 2026-11-30)
constexpr int kUnroll = 2;
constexpr int kBlock = kRowBlock;     // threads of the rows, split and merge kernels (512)
constexpr int kFinishThreads = 1024;  // the grid select's finish: one CTA per row, <= 8 rows
using FinishSelector = BlockSelector<kFinishThreads>;

#if FI_TOPK_PROFILE
__device__ unsigned long long g_topk_profile[kTopKProfileSlots];
__device__ unsigned long long* topk_profile_sums() { return g_topk_profile; }
#else
__device__ unsigned long long* topk_profile_sums() { return nullptr; }
#endif
using TopKClock = PhaseClock<kTopKProfileSlots, FI_TOPK_PROFILE != 0>;
using NoClock = PhaseClock<kTopKProfileSlots, false>;

__device__ int32_t gcd(int32_t a, int32_t b) {
  while (b != 0) {
    const int32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// The page-table checks of a resolved window; page entries are checked by all threads.
template <int kThreads>
__device__ RowWindow check_pages(const TopKArgs& a, RowWindow w, uint32_t* scratch) {
  if (threadIdx.x == 0) *scratch = 0;
  __syncthreads();
  if (w.status == 0) {
    const int64_t n = window_pages(a.pages, w);
    uint32_t ored = 0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) ored |= check_window_page(a.pages, w, i);
    if (ored) atomicOr(scratch, ored);
  }
  __syncthreads();
  const uint32_t pages = combine_page_status(*scratch);
  __syncthreads();
  if (w.status == 0 && pages != 0) {
    w.status = pages;
    w.start = w.end = 0;
  }
  return w;
}

// Window, request and page-table checks.
template <int kThreads>
__device__ RowWindow check_row(const TopKArgs& a, int64_t row, uint32_t* scratch) {
  return check_pages<kThreads>(a, resolve_window(a.rows, row), scratch);
}

// Tiles of kThreads float4 visited in a permuted order (position p of the visit is tile
// p * step mod tiles, step coprime with the tile count): a row sorted along the position
// costs about as much as a random one.
template <int kThreads>
struct TileOrder {
  int32_t tiles, step;
  __device__ explicit TileOrder(int64_t nvec) : tiles(int32_t((nvec + kThreads - 1) / kThreads)) {  // nvec < 2^29
    step = tiles > 2 ? (tiles * 5) / 8 + 1 : 1;
    while (gcd(step, tiles) != 1) ++step;
  }
  __device__ int32_t next(int32_t tile) const { return tile + step >= tiles ? tile + step - tiles : tile + step; }
};

struct KeepAll {
  __device__ bool operator()(uint32_t) const { return true; }
};

// Streams logits[s0, s1) of one row into the selector, the float keys that keep() accepts;
// returns whether any was NaN.
template <int kThreads, class Keep = KeepAll>
__device__ bool stream_logits(BlockSelector<kThreads>& sel, const float* row_ptr, int64_t s0, int64_t s1,
                              Keep keep = {}) {
  bool nan = false;
  const AlignedSpan span(row_ptr, s0, s1);
  const int64_t head = span.head, nvec = span.nvec;
  {  // the unaligned head and the tail: at most 3 + 3 scalars
    uint64_t rk[4] = {0, 0, 0, 0};
    bool valid[4] = {false, false, false, false};
    const int64_t pos = span.scalar_position(s0, threadIdx.x);
    if (pos >= 0) {
      const float v = row_ptr[pos];
      nan |= isnan(v);
      rk[0] = rank_key(v, int32_t(pos));
      valid[0] = keep(float_key(v));
    }
    sel.push_tile(rk, valid);
  }
  const float4* vec = reinterpret_cast<const float4*>(row_ptr + s0 + head);
  const int64_t first = s0 + head;
  const TileOrder<kThreads> order(nvec);
  const int32_t tiles = order.tiles;
  int32_t tile = 0;  // the next tile to load
  // Register double buffering: the next kUnroll tiles are in flight while the
  // current ones are filtered, so the loads never drain between groups.
  float4 x[kUnroll], nx[kUnroll];
  int32_t idx[kUnroll], nidx[kUnroll];
  auto load = [&](int32_t t0, float4 (&v)[kUnroll], int32_t (&i)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      i[u] = t0 + u < tiles ? tile * kThreads + int32_t(threadIdx.x) : int32_t(nvec);
      if (i[u] < nvec) v[u] = __ldcs(vec + i[u]);
      tile = order.next(tile);
    }
  };
  if (tiles > 0) load(0, x, idx);
  for (int32_t t0 = 0; t0 < tiles; t0 += kUnroll) {
    if (t0 + kUnroll < tiles) load(t0 + kUnroll, nx, nidx);
    int32_t pos[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      ok[u] = idx[u] < nvec;
      pos[u] = int32_t(first) + idx[u] * 4;
    }
    nan |= sel.push_vectors(x, pos, ok, keep);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = nx[u];
      idx[u] = nidx[u];
    }
  }
  return __syncthreads_or(nan);
}

// The sampled threshold guess for logits[s0, s1) (BlockSelector::guess), when one is taken:
// it targets ~2K survivors from the (2K * 2048 / L)-th best of 2048 evenly spaced samples,
// and is taken only when that rank is >= 8 (a stable estimate). Returns whether it was.

template <int kThreads, class Clock>
__device__ bool sampled_guess(BlockSelector<kThreads>& sel, const float* row_ptr, int64_t s0, int64_t s1, int32_t k,
                              Clock& clock, long long& t) {
  constexpr int kTile = BlockSelector<kThreads>::kTile;
  const int64_t len = s1 - s0;
  const int64_t rank = guess_rank<kThreads>(len, k);
  const bool guessed = rank > 0;
  if (guessed) {
    uint64_t sample[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t p = s0 + (int64_t(threadIdx.x) * 4 + j) * len / kTile;
      sample[j] = rank_key(row_ptr[p], int32_t(p));
    }
    if constexpr (Clock::kEnabled) {  // the sample's loads timed apart (in the otherwise unused wait slot)
      __syncthreads_or(sample[0] == 0 && sample[1] == 0 && sample[2] == 0 && sample[3] == 0);
      clock.lap(kTopKProfileWait, t);
    }
    sel.guess(sample, uint32_t(rank));
  }
  clock.lap(kTopKProfileSample, t);
  return guessed;
}

// Streams logits[s0, s1) with a sampled threshold guess, verified: when fewer than
// min(K, L) keys beat the guess, streams again without it. Returns whether any was NaN.
template <int kThreads, class Clock>
__device__ bool scan_logits(BlockSelector<kThreads>& sel, const float* row_ptr, int64_t s0, int64_t s1, int32_t k,
                            Clock& clock, long long& t) {
  const bool guessed = sampled_guess(sel, row_ptr, s0, s1, k, clock, t);
  const bool nan = stream_logits(sel, row_ptr, s0, s1);
  if constexpr (Clock::kEnabled) {  // the stream's last compaction timed apart
    __syncthreads();
    clock.lap(kTopKProfileSelect, t);
    sel.reduce();
    clock.lap(kTopKProfileReduce, t);
  }
  if (guessed && sel.reduce() < k) {
    sel.reset();
    stream_logits(sel, row_ptr, s0, s1);
  }
  return nan;
}



// The selector's final keys of one row, ordered (CONTRACT §3: by position or by rank), to
// the row's outputs. Block-wide call, the last of a kernel.
template <int kThreads, class Clock = NoClock>
__device__ void finish_row(const TopKArgs& a, BlockSelector<kThreads>& sel, int64_t row, const RowWindow& w,
                           bool nan, Clock&& clock = {}, long long t = 0) {
  if constexpr (FI_TOPK_PROFILE != 0) {
    sel.reduce();  // (finish() starts with it; here timed apart)
    clock.lap(kTopKProfileReduce, t);
  }
  uint64_t sorted[BlockSelector<kThreads>::kSortItems];
  const int32_t n = sel.finish(a.order == OutputOrder::kRank, sorted, position_bits(a), w.start, w.length());
  clock.lap(kTopKProfileOrder, t);
  write_row(a, row, w, w.status | (nan ? row_status::kHasNaN : 0u), n, sorted);
  clock.lap(kTopKProfileWrite, t);
  clock.flush(threadIdx.x == 0, topk_profile_sums());
}

__device__ SplitCandidates split_workspace(const TopKArgs& a) {
  return SplitCandidates::in(a.workspace, a.rows.rows(), a.splits, a.k);
}

// Pushes n rank keys from global memory into the selector (block-wide call).
template <int kThreads>
__device__ void push_keys(BlockSelector<kThreads>& sel, const uint64_t* keys, int32_t n) {
  for (int32_t base = 0; base < n; base += BlockSelector<kThreads>::kTile) {
    uint64_t rk[4];
    bool valid[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int32_t i = base + j * kThreads + int32_t(threadIdx.x);
      valid[j] = i < n;
      rk[j] = valid[j] ? keys[i] : 0ull;
    }
    sel.push_tile(rk, valid);
  }
}

// One CTA per row: the whole window, final outputs.
__global__ void __launch_bounds__(kBlock, kMinBlocks) topk_rows_kernel(const TopKArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  auto& st = *reinterpret_cast<RowSelector::Storage*>(smem);
  __shared__ uint32_t scratch;
  const int64_t row = blockIdx.x;
  TopKClock clock;
  long long t = clock.now();
  RowSelector sel(st, a.k);
  const RowWindow w = check_row<kBlock>(a, row, &scratch);
  clock.lap(kTopKProfileCheck, t);
  const bool nan =
      w.length() > 0 && scan_logits(sel, a.logits + row * a.logits_row_stride, w.start, w.end, a.k, clock, t);
  clock.lap(kTopKProfileSelect, t);
  finish_row(a, sel, row, w, nan, clock, t);
}

// The ordered merge: the selector's storage, then [kMaxK] keys for rank order's sort; rows
// whose splits can hold more keys than the selector's buffer (splits x K > kCap) get
// [kOrderedMergeLargeKeys] there instead (their flat buffer when the keys fit).
constexpr int kOrderedMergeLargeKeys = 16384;
constexpr size_t kOrderedMergeSmem = sizeof(RowSelector::Storage) + size_t(kMaxK) * 8;
constexpr size_t kOrderedMergeLargeSmem = sizeof(RowSelector::Storage) + size_t(kOrderedMergeLargeKeys) * 8;
static_assert(kOrderedMergeLargeSmem + 4096 <= 227 * 1024, "the large buffer and the kernel's static shared memory fit");
static_assert(cuda::kFusedStagedMergeFlatKeys == kOrderedMergeLargeKeys, "the plan's cost model knows the merge's flat buffer");
static_assert(cuda::kFusedStagedSelectorKeys == RowSelector::kCap, "the plan's cost model knows the selector's buffer");
__host__ __device__ constexpr bool ordered_merge_large(int32_t splits, int32_t k) {
  return int64_t(splits) * k > RowSelector::kCap;
}

// Above half an SM's shared memory (~114 KiB), so that the two CTAs of a row never share
// an SM (they may, as a cluster, when both fit: measured no faster than one CTA, 2026-11-30).
constexpr size_t kPairSmem = sizeof(RowSelector::Storage) > 116 * 1024 ? sizeof(RowSelector::Storage) : 116 * 1024;

// A cluster of two CTAs per row, each on its own SM: both take the same sampled guess of
// the whole window (the same samples, an exact select: the same tau), each streams half of
// it into its own selector, with no compaction at its end; CTA 0 then pushes CTA 1's keys
// (distributed shared memory) into its selector, verifies the guess over the whole window
// (else streams it again alone, without it) and writes the row. Exact: the row's top K is
// among the keys the halves keep. One CTA per SM, so 128 registers (105, no spills; at 64
// it spilled 100 / 156 bytes).
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kBlock, 1)
    topk_pair_kernel(const TopKArgs a) {
  namespace cg = cooperative_groups;
  extern __shared__ __align__(16) uint8_t smem[];
  auto& st = *reinterpret_cast<RowSelector::Storage*>(smem);
  __shared__ uint32_t scratch, held, held_nan;  // CTA 1's buffer extent and NaN flag
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned half = cluster.block_rank();
  const int64_t row = blockIdx.x / 2;
  TopKClock clock;
  long long t = clock.now();
  RowSelector sel(st, a.k);
  const RowWindow w = check_row<kBlock>(a, row, &scratch);
  clock.lap(kTopKProfileCheck, t);
  const float* row_ptr = a.logits + row * a.logits_row_stride;
  const bool guessed = w.length() > 0 && sampled_guess(sel, row_ptr, w.start, w.end, a.k, clock, t);
  const int64_t mid = w.start + w.length() / 2;
  const int64_t s0 = half == 0 ? w.start : mid, s1 = half == 0 ? mid : w.end;
  bool nan = s0 < s1 && stream_logits(sel, row_ptr, s0, s1);
  clock.lap(kTopKProfileSelect, t);
  if (half == 1) {
    const uint32_t ext = sel.expose();
    if (threadIdx.x == 0) {
      held = ext;
      held_nan = nan ? 1u : 0u;
    }
  }
  cluster.sync();  // CTA 1's keys, extent and flag are published
  if (half == 0) {
    nan |= *cluster.map_shared_rank(&held_nan, 1) != 0u;
    push_keys(sel, cluster.map_shared_rank(sel.candidates(), 1), int32_t(*cluster.map_shared_rank(&held, 1)));
  }
  cluster.sync();  // CTA 1's shared memory stays until CTA 0 has read it
  clock.lap(kTopKProfileWait, t);
  if (half == 1) return;
  if (guessed && sel.reduce() < a.k) {
    sel.reset();
    stream_logits(sel, row_ptr, w.start, w.end);
  }
  finish_row(a, sel, row, w, nan, clock, t);
}

// kStaged (heuristics.h): a cluster of C CTAs per row, one per SM; CTA r takes the r-th
// of C equal runs of the row's aligned float4 (CTA 0 also the unaligned head, CTA C - 1
// the tail). Steps, per CTA:
//  1. Each warp bulk-copies its part of the chunk (whole multiples of 32 float4) into shared
//     memory, on its own mbarrier, while the CTA checks the row and takes the row's sampled
//     guess tau (the same samples, so the same tau, in every CTA).
//  2. From shared memory, two passes: mark the scores >= tau's score (a float compare: every
//     score of the row above tau's, and ties), then write their rank keys in position order
//     (each lane owns a run of float4; a scan over the warps' counts, one over the lanes').
//  3. CTA 0 gathers every CTA's candidates through distributed shared memory. When they are
//     at least K, the row's top K is among them (every score left out is below all of them).
//  4. CTA 0 selects the K-th and writes the keys at or above it, in gathered order, which is
//     position order (by rank: after a block radix sort of the K keys).
// Otherwise (no guess, a failed guess or a full buffer) CTA 0 streams the row alone, as the
// rows kernel does. Exact either way; no workspace. Shared memory: the selector's storage
// (the candidates; the guess) + the stage, up to 128 KiB.
struct StagedShared {
  uint64_t bar[kBlock / 32];          // each warp's bulk-copy barrier
  uint32_t warp_count[kBlock / 32];   // candidates per warp
  uint32_t cta_count[cuda::kTopKStagedMaxCluster];  // CTA 0: candidates per CTA
  uint32_t cta_first[cuda::kTopKStagedMaxCluster];  // CTA 0: index of each CTA's first candidate in the gather
  uint32_t count;     // this CTA's candidates (head, warps, tail)
  uint32_t nan;       // a NaN among this CTA's scores
  uint32_t edge;      // candidates among the head or tail scalars
};

constexpr int kStagedIters = int(cuda::kTopKStagedMaxChunk / 4 / kBlock);  // float4 per lane, at most
static_assert(kStagedIters * 4 <= 64, "one 64-bit pass mask per lane");
constexpr size_t kStagedStageOffset = (sizeof(RowSelector::Storage) + 127) / 128 * 128;
constexpr size_t kStagedMaxSmem = kStagedStageOffset + size_t(cuda::kTopKStagedMaxChunk) * 4;
static_assert(cuda::kTopKStagedMinWidth / cuda::kTopKStagedMaxCluster * 4 >= int64_t(kMaxK) * 8,
              "the smallest stage holds the K keys that rank order sorts");

// Dynamic shared memory of the kStaged kernel for rows of at most max_context positions.
size_t staged_smem(int64_t max_context, int ctas) {
  const int64_t vecs = (max_context / 4 + ctas - 1) / ctas;
  return kStagedStageOffset + size_t(vecs) * 16;
}


__global__ void __launch_bounds__(kBlock, 1) topk_staged_kernel(const TopKArgs a) {
  namespace cg = cooperative_groups;
  constexpr int kWarps = kBlock / 32;
  extern __shared__ __align__(128) uint8_t smem[];
  auto& st = *reinterpret_cast<RowSelector::Storage*>(smem);
  float4* stage = reinterpret_cast<float4*>(smem + kStagedStageOffset);
  __shared__ StagedShared ss;
  __shared__ uint32_t scratch;
  const cg::cluster_group cluster = cg::this_cluster();
  const uint32_t rank = cluster.block_rank(), ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  TopKClock clock;
  long long t = clock.now();
  const float* row_ptr = a.logits + row * a.logits_row_stride;

  // 1. The window as resolved (the page checks below can only empty it) and this CTA's
  // float4, each warp's a run of whole multiples of 32 (the last may be shorter).
  const RowWindow w0 = resolve_window(a.rows, row);
  const AlignedSpan span(row_ptr, w0.start, w0.end);
  const int64_t per = (span.nvec + ctas - 1) / ctas;
  const int64_t v0 = min(int64_t(rank) * per, span.nvec), v1 = min(v0 + per, span.nvec);
  const WarpRun<kWarps, int32_t> wr(int32_t(v1 - v0), warp);
  const int32_t wper = wr.per, wv0 = wr.lo, wv1 = wr.hi;
  const int64_t first = w0.start + span.head;  // position of float4 0 of the span
  const float4* vec = reinterpret_cast<const float4*>(row_ptr + first);
  // The guess's samples are loaded ahead of the bulk copies' traffic, except by the lanes
  // that issue the copies (the release fence after mbarrier.init would wait for them).
  const int64_t sample_rank = w0.status == 0 ? staged_guess_rank(w0.length(), a.k) : 0;
  float sample[4];
  int64_t sample_pos[4];
  auto load_samples = [&] {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sample_pos[j] = w0.start + (int64_t(threadIdx.x) * 4 + j) * w0.length() / RowSelector::kTile;
      if (sample_rank > 0) sample[j] = row_ptr[sample_pos[j]];
    }
  };
  if (lane != 0) load_samples();
  const bool fits = per <= int64_t(kStagedIters) * 32 * kWarps;  // (the plan's chunks always do)
  const bool staging = sample_rank > 0 && fits && wv1 > wv0;
  if (lane == 0) {
    if (staging) {
      ptx::mbar_init(&ss.bar[warp], 1);
      ptx::fence_mbarrier_init();
      ptx::mbar_arrive_expect_tx(&ss.bar[warp], uint32_t(wv1 - wv0) * 16u);
      ptx::bulk_copy_g2s(stage + wv0, vec + v0 + wv0, uint32_t(wv1 - wv0) * 16u, &ss.bar[warp]);
    }
    load_samples();
  }
  __syncwarp();
  RowSelector sel(st, a.k);
  const RowWindow w = check_pages<kBlock>(a, w0, &scratch);
  clock.lap(kTopKProfileCheck, t);
  // The guess (w is w0 unless a page check emptied it): a floor at or below the sample_rank-th
  // best of the 2,048 samples with at most 1.5 x sample_rank samples at or above it, usually
  // from one radix pass (RadixSelect::floor_of_kth). Only a guess: step 3 verifies it.
  const bool guessed = w.length() > 0 && sample_rank > 0 && fits;
  uint64_t tau = 0;
  if (guessed) {
#pragma unroll
    for (int j = 0; j < 4; ++j) st.cand[threadIdx.x * 4 + j] = rank_key(sample[j], int32_t(sample_pos[j]));
    __syncthreads();
    const uint32_t need = uint32_t(sample_rank);
    tau = RowSelector::Select::floor_of_kth(st.select, st.cand, RowSelector::kTile, need, need + need / 2,
                                            int(threadIdx.x));
  }
  clock.lap(kTopKProfileSample, t);
  // Uniform over the cluster: every CTA resolved, checked and sampled the same row.
  const bool staged = guessed && uint32_t(tau >> 32) != 0u;  // (a guess at the NaN level streams)
  if (staging) ptx::mbar_wait(&ss.bar[warp], 0);
  if constexpr (TopKClock::kEnabled) {  // the bulk copies' wait timed apart (in the wait slot)
    __syncthreads();
    clock.lap(kTopKProfileWait, t);
  }

  // 2. The candidates: scores >= tau's score, in position order.
  if (staged) {
    const float f_tau = key_to_float(uint32_t(tau >> 32));
    const bool head_cta = rank == 0, tail_cta = rank == ctas - 1;
    // Pass 1 (LaneRun, at most kStagedIters float4 per lane): the scores >= tau's.
    const LaneRun run(wv0, wv1, wper, lane);
    const int32_t l0 = run.l0;
    bool nan = false;
    const uint64_t pass = run.pass(stage, [&](const float4& v, int32_t) {
      nan |= isnan(v.x) | isnan(v.y) | isnan(v.z) | isnan(v.w);
      return uint32_t(v.x >= f_tau) | uint32_t(v.y >= f_tau) << 1 | uint32_t(v.z >= f_tau) << 2 |
             uint32_t(v.w >= f_tau) << 3;
    });
    const uint32_t in_warp = __reduce_add_sync(0xffffffffu, uint32_t(__popcll(pass)));
    if (lane == 0) ss.warp_count[warp] = in_warp;
    // The head (CTA 0) and tail (CTA C - 1) scalars: thread 0 takes them, in order.
    int64_t edge_pos[6];
    int edges = 0;
    if (threadIdx.x == 0) {
      if (head_cta)
        for (int64_t j = 0; j < span.head; ++j) edge_pos[edges++] = w.start + j;
      if (tail_cta)
        for (int64_t j = 0; j < span.tail; ++j) edge_pos[edges++] = first + span.nvec * 4 + j;
    }
    uint64_t edge_key[6];
    uint32_t head_count = 0, edge_count = 0;
    for (int j = 0; j < edges; ++j) {
      const float f = row_ptr[edge_pos[j]];
      nan |= isnan(f);
      edge_key[j] = f >= f_tau ? rank_key(f, int32_t(edge_pos[j])) : 0ull;
      edge_count += edge_key[j] != 0ull;
      head_count += edge_key[j] != 0ull && edge_pos[j] < first;
    }
    if (threadIdx.x == 0) ss.edge = (head_count << 16) | edge_count;
    nan = __syncthreads_or(nan);  // also: warp_count and edge are published
    head_count = ss.edge >> 16;
    uint32_t base = head_count, total = ss.edge & 0xFFFFu;
    for (int q = 0; q < kWarps; ++q) {
      base += q < warp ? ss.warp_count[q] : 0u;
      total += ss.warp_count[q];
    }
    // Pass 2: the rank keys of the passing scores, in position order (lane, float4,
    // component): each lane after the lanes below it (one warp scan).
    if (total <= uint32_t(RowSelector::kCap)) {
      uint64_t* cand = st.cand;
      const float* stage_f = reinterpret_cast<const float*>(stage);
      put_passing(cand, base, pass, stage_f + int64_t(l0) * 4, int32_t(first + (v0 + l0) * 4), lane);
      if (threadIdx.x == 0) {  // head keys first, tail keys last
        uint32_t h = 0, tl = total - (edge_count - head_count);
        for (int j = 0; j < edges; ++j)
          if (edge_key[j] != 0ull) cand[edge_pos[j] < first ? h++ : tl++] = edge_key[j];
      }
    }
    if (threadIdx.x == 0) {
      ss.count = total;
      ss.nan = nan ? 1u : 0u;
    }
  }
  clock.lap(kTopKProfileSelect, t);
  cluster.sync();  // every CTA's candidates, count and NaN flag are published
  clock.lap(kTopKProfileSync, t);

  // 3. CTA 0 gathers every CTA's candidates (in CTA order: position order) when the guess
  // held; the other CTAs' shared memory is not read after the second barrier.
  bool selected = false;
  uint32_t n = 0;
  if (rank == 0) {
    if (threadIdx.x < ctas) {
      const StagedShared* r = cluster.map_shared_rank(&ss, threadIdx.x);
      ss.cta_count[threadIdx.x] = staged ? r->count : 0u;
      if (staged && r->nan) ss.nan = 1u;
    }
    __syncthreads();
    bool fits_all = true;
    for (uint32_t q = 0; q < ctas; ++q) {
      fits_all &= ss.cta_count[q] <= uint32_t(RowSelector::kCap);
      if (threadIdx.x == 0) ss.cta_first[q] = n;
      n += ss.cta_count[q];
    }
    selected = staged && fits_all && n <= uint32_t(RowSelector::kCap) && n >= uint32_t(a.k);
    if (selected) gather_cluster_candidates(cluster, st.cand, ss.cta_first, ctas, n);
  }
  clock.lap(kTopKProfileOrder, t);  // (kStaged: the gather)
  cluster.sync();  // the gather is done: CTAs other than 0 may exit
  clock.lap(kTopKProfileSync, t);
  if (rank != 0) return;

  // 4. CTA 0: the K-th key, then the keys at or above it in gathered order, which is position
  // order: warp w takes a run of the gathered keys; one scan over the warps' counts. By rank:
  // the K keys go through the stage (free now) to a block radix sort first.
  if (selected) {
    const uint32_t status = w.status | (ss.nan != 0u ? row_status::kHasNaN : 0u);
    uint64_t* ranked = reinterpret_cast<uint64_t*>(stage);  // [K]: the stage holds >= kMaxK keys
    write_gathered_row(a, row, w, status, st, st.cand, n, ranked, ss.warp_count, clock, t);
    clock.flush(threadIdx.x == 0, topk_profile_sums());
    return;
  }
  sel.reset();
  const bool nan = w.length() > 0 && stream_logits(sel, row_ptr, w.start, w.end);
  clock.lap(kTopKProfileSelect, t);
  finish_row(a, sel, row, w, nan, clock, t);
}

// kSplit: one chunk of a row, its exact local top K (unsorted) to the workspace.
__global__ void __launch_bounds__(kBlock, kMinBlocks) topk_split_kernel(const TopKArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  auto& st = *reinterpret_cast<RowSelector::Storage*>(smem);
  // No early ptx::launch_dependents(): the merge's CTAs (90 KiB each) then took SM room
  // from the splits (64 x 65,536: 61 -> 69 us graph-timed); it launches as the splits end.
  const int64_t row = blockIdx.x;
  RowSelector sel(st, a.k);
  const RowWindow w = resolve_window(a.rows, row);
  const int64_t chunk = (w.length() + a.splits - 1) / a.splits;
  const int64_t s0 = w.start + chunk * blockIdx.y;
  const int64_t s1 = s0 + chunk < w.end ? s0 + chunk : w.end;
  NoClock clock;
  long long t = 0;
  const bool nan = s0 < s1 && scan_logits(sel, a.logits + row * a.logits_row_stride, s0, s1, a.k, clock, t);
  const int32_t n = sel.gather();
  const SplitCandidates ws = split_workspace(a);
  const int64_t slot = row * a.splits + blockIdx.y;
  for (int32_t i = threadIdx.x; i < n; i += kBlock) ws.keys[slot * a.k + i] = sel.candidates()[i];
  if (threadIdx.x == 0) {
    ws.counts[slot] = uint32_t(n);
    ws.status[slot] = nan ? row_status::kHasNaN : 0u;
  }
}

// The finish of the grid-wide select (grid_radix_select.cuh), one CTA per row: the best
// K - A of the E keys at the threshold prefix t (the tie list, or a re-read of the row
// filtered to t when E overflowed it), then the A keys above t; rows of at most K
// positions are read whole. A programmatic dependent of the collect: checks its row first.
__global__ void __launch_bounds__(kFinishThreads, 1) grid_finish_kernel(const TopKArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  auto& st = *reinterpret_cast<FinishSelector::Storage*>(smem);
  __shared__ uint32_t scratch;
  const int64_t row = blockIdx.x;
  TopKClock clock;
  long long t = clock.now();
  FinishSelector sel(st, a.k);
  const RowWindow w = check_row<kFinishThreads>(a, row, &scratch);
  clock.lap(kTopKProfileCheck, t);
  ptx::wait_for_previous_kernel();
  clock.lap(kTopKProfileWait, t);
  const float* row_ptr = a.logits + row * a.logits_row_stride;
  bool nan = false;
  if (w.length() > a.k) {
    const GridSelectWorkspace ws = GridSelectWorkspace::in(a.workspace, a.rows.rows(), a.k);
    const GridRowState s = ws.state[row];
    // The best `need` of the ties (a select among the E ties alone, none when E = need), then
    // the A = K - need keys above them: exactly K, and finish() needs no compaction.
    sel.set_k(int32_t(s.need));
    if (s.ties <= uint32_t(cuda::kTopKTieCap)) {
      push_keys(sel, ws.tie + row * cuda::kTopKTieCap, int32_t(s.ties));
    } else {
      stream_logits(sel, row_ptr, w.start, w.end, [t = s.prefix](uint32_t key) { return key >> 8 == t; });
    }
    sel.reduce();
    sel.set_k(a.k);
    push_keys(sel, ws.selected + row * a.k, a.k - int32_t(s.need));
    nan = s.nan != 0;
  } else if (w.length() > 0) {
    nan = stream_logits(sel, row_ptr, w.start, w.end);
  }
  clock.lap(kTopKProfileSelect, t);
  finish_row(a, sel, row, w, nan, clock, t);
}

// Exact merge of the splits' local top K of each row. The splits' counts come first, one
// load per thread and a block scan. kOrdered (the fused decode clusters, fused_staged.cu):
// every slot holds its keys in position order and the splits cover increasing positions, so
// the slots read one after another are the row's candidates in position order; when they fit
// the candidate buffer they are copied there flat and finished as a cluster's gathered
// candidates are (keep_gathered: one radix select, no compaction, no sort by position).
// Otherwise (or not kOrdered) they go through the selector as one flat array, four keys per
// thread per push, each push's keys loaded before the previous push runs. (Before: a count
// load, then that split's keys, one split after another: 30 us for 13 x 512 keys at
// V4-Flash B = 1; the flat pushes alone did not help, the selector's compaction, bitmap order
// and pushes took 35K of the kernel's 41K cycles: docs/experiments.md, 2026-11-30.) A programmatic
// dependent of the kernel that wrote the splits: checks its row first. kOrdered serves few
// rows (S > 1 at small batches): 128 registers (at 64 it spilled 8 bytes).
template <bool kOrdered>
__global__ void __launch_bounds__(kBlock, kOrdered ? 1 : 2) topk_merge_kernel(const TopKArgs a) {
  using Scan = cub::BlockScan<uint32_t, kBlock>;
  extern __shared__ __align__(16) uint8_t smem[];
  auto& st = *reinterpret_cast<RowSelector::Storage*>(smem);
  // kOrdered: [kMaxK], or [kOrderedMergeLargeKeys] when ordered_merge_large (the launch's size)
  uint64_t* extra = reinterpret_cast<uint64_t*>(smem + sizeof(RowSelector::Storage));
  __shared__ uint32_t scratch;
  __shared__ uint32_t first[kBlock];  // flat index of each split's first key (a chunk of kBlock splits)
  __shared__ uint32_t warp_count[kBlock / 32];
  __shared__ typename Scan::TempStorage scan;
  const int64_t row = blockIdx.x;
  TopKClock clock;
  long long t = clock.now();
  RowSelector sel(st, a.k);
  const RowWindow w = check_row<kBlock>(a, row, &scratch);
  clock.lap(kTopKProfileCheck, t);
  ptx::wait_for_previous_kernel();
  clock.lap(kTopKProfileWait, t);
  const SplitCandidates ws = split_workspace(a);
  bool nan = false;
  for (int s0 = 0; w.status == 0 && s0 < a.splits; s0 += kBlock) {
    const int ns = a.splits - s0 < kBlock ? a.splits - s0 : kBlock;
    const int64_t slot0 = row * a.splits + s0;
    uint32_t count = 0;
    if (int(threadIdx.x) < ns) {
      count = ws.counts[slot0 + threadIdx.x];
      nan |= (ws.status[slot0 + threadIdx.x] & row_status::kHasNaN) != 0u;
    }
    uint32_t total = 0;
    Scan(scan).ExclusiveSum(count, first[threadIdx.x], total);
    __syncthreads();
    // Flat key i lies in split q, the last with first[q] <= i (splits may hold no key; the
    // scan wrote first[] for all kBlock threads), found among the first kMax splits.
    auto key_at = [&]<uint32_t kMax>(uint32_t i) {
      const uint32_t q = run_of<kMax>(first, uint32_t(ns), i);
      return ws.keys[(slot0 + q) * a.k + (i - first[q])];
    };
    // The fused decode rows (at most kFusedStagedMaxSegments splits) whose keys fit: copied
    // flat (kPer keys per thread in flight, past total key 0 again), then kept.
    auto copy_flat = [&]<int kPer>(uint64_t* cand, uint32_t base) {
      uint64_t key[kPer];
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const uint32_t i = base + threadIdx.x + uint32_t(j * kBlock);
        key[j] = key_at.template operator()<cuda::kFusedStagedMaxSegments>(i < total ? i : 0u);
      }
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const uint32_t i = base + threadIdx.x + uint32_t(j * kBlock);
        if (i < total) cand[i] = key[j];
      }
    };
    if (kOrdered && a.splits <= cuda::kFusedStagedMaxSegments && total <= uint32_t(RowSelector::kCap)) {
      copy_flat.template operator()<RowSelector::kCap / kBlock>(st.cand, 0);  // every load in flight at once
      nan = __syncthreads_or(nan);  // also: cand is written
      clock.lap(kTopKProfileSelect, t);
      write_gathered_row(a, row, w, w.status | (nan ? row_status::kHasNaN : 0u), st, st.cand, total, extra,
                         warp_count, clock, t);
      clock.flush(threadIdx.x == 0, topk_profile_sums());
      return;
    }
    if (kOrdered && a.splits <= cuda::kFusedStagedMaxSegments && ordered_merge_large(a.splits, a.k) &&
        total <= uint32_t(kOrderedMergeLargeKeys)) {  // the larger buffer; ranked in st.cand (free)
      constexpr int kHalf = kOrderedMergeLargeKeys / kBlock / 2;
      copy_flat.template operator()<kHalf>(extra, 0);
      if (total > uint32_t(kHalf * kBlock)) copy_flat.template operator()<kHalf>(extra, uint32_t(kHalf * kBlock));
      nan = __syncthreads_or(nan);
      clock.lap(kTopKProfileSelect, t);
      write_gathered_row(a, row, w, w.status | (nan ? row_status::kHasNaN : 0u), st, extra, total, st.cand,
                         warp_count, clock, t);
      clock.flush(threadIdx.x == 0, topk_profile_sums());
      return;
    }
    auto load = [&](uint32_t base, uint64_t(&rk)[4], bool(&ok)[4]) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t i = base + uint32_t(j * kBlock) + threadIdx.x;
        ok[j] = i < total;
        rk[j] = ok[j] ? key_at.template operator()<kBlock>(i) : 0ull;
      }
    };
    uint64_t rk[4];
    bool ok[4];
    load(0, rk, ok);
    for (uint32_t base = 0; base < total; base += RowSelector::kTile) {
      uint64_t next[4];
      bool next_ok[4];
      load(base + RowSelector::kTile, next, next_ok);
      sel.push_tile(rk, ok);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        rk[j] = next[j];
        ok[j] = next_ok[j];
      }
    }
    __syncthreads();  // first[] and the scan storage are rewritten by the next chunk
  }
  nan = __syncthreads_or(nan);
  clock.lap(kTopKProfileSelect, t);
  finish_row(a, sel, row, w, nan, clock, t);
}

// The cluster merge: the fused decode rows' S <= kFusedStagedMaxSegments segments, position
// order. A cluster of C CTAs per row, per = ceil(S / C) <= 2 segments each (C = S when the
// rows x S CTAs fit one wave, else ceil(S / 2): heuristics.h cluster_merge_ctas): CTA r
// holds the keys of segments [r per, (r + 1) per) in registers (thread t its flat keys
// t + 512 j, in position order: the slots are, and the segments follow each other). The K-th
// key comes from a radix select whose histograms are summed over the cluster: per pass each
// CTA counts its own keys (histograms double-buffered, so one cluster barrier per pass), then
// every CTA reads the C histograms through distributed shared memory and takes the same digit,
// until the keys at or above the selected bin's lower edge are exactly K (that edge is the
// threshold: no key list is ever gathered). Each CTA then writes its kept keys at its place in
// the row (the kept counts of the CTAs before it), every page-table read issued before the
// first store. The row's check bits come from the segments' status words (each CTA of the
// fused clusters checks the whole window, as check_row does), so the merge reads no page
// table but for the slots it writes. Replaces the one-CTA ordered merge for position order
// (rank order needs the row's sort): its copy, radix select and writes ran on one SM per row
// (~50K cycles after its wait at K = 2048, docs/experiments.md 2026-11-30).
// Threads: 512 per CTA (64 registers: two CTAs per SM). Shared memory: 17 KiB (static).
constexpr int kClusterMergeMaxCtas = 8;
constexpr int kClusterMergeItems = cuda::kFusedStagedMaxSegments / kClusterMergeMaxCtas * kMaxK / kBlock;
static_assert(kClusterMergeItems * (kBlock / 32) == 4 * 32, "warp 0 scans the kept counts, four per lane");

// CTAs per row (heuristics.h cluster_merge_ctas: a segment each, or two when the rows would
// take more than a wave); each CTA takes per = ceil(S / C) segments.
__host__ __device__ constexpr int cluster_merge_per(int splits, int ctas) { return (splits + ctas - 1) / ctas; }

__host__ __device__ constexpr bool cluster_merge_covers_every_segment_count() {
  for (int s = 2; s <= cuda::kFusedStagedMaxSegments; ++s)
    for (const bool paired : {false, true}) {
      const int ctas = cuda::cluster_merge_ctas(s, paired), per = cluster_merge_per(s, ctas);
      if (ctas < 1 || ctas > kClusterMergeMaxCtas || per > 2 || per * ctas < s || (ctas - 1) * per >= s ||
          per * kMaxK > kClusterMergeItems * kBlock)
        return false;
    }
  return true;
}
static_assert(cluster_merge_covers_every_segment_count(),
              "<= 8 CTAs, none empty, at most two segments each, each CTA's keys in its registers");

struct ClusterMergeShared {  // read by the cluster's other CTAs
  uint64_t lo, hi;           // this CTA's least and largest key (~0 / 0: none)
  uint32_t n, status, kept;  // its keys, its segments' status words (OR), its keys at or above the threshold
  uint32_t sel_bin, sel_count, sel_need;  // (this CTA's own) a pass's digit, its keys, the rank among them
};

constexpr int kMergeDigitBits = 11, kMergeBins = 1 << kMergeDigitBits, kMergeGroups = kMergeBins / 32;
static_assert(kMergeBins == 4 * kBlock && kMergeGroups == 64 && kMergeGroups % (kBlock / 32) == 0,
              "a uint4 of bins per thread; two groups per lane");

// The lane whose inclusive prefix sum (over the warp, in lane order) of c first reaches need
// (0 < need <= the warp's total); *excl: its exclusive prefix (the same in every lane).
__device__ inline int warp_select_lane(uint32_t c, uint32_t need, int lane, uint32_t* excl) {
  const uint32_t incl = warp_inclusive_sum(c, lane);
  const int at = __ffs(__ballot_sync(0xffffffffu, incl >= need)) - 1;
  *excl = __shfl_sync(0xffffffffu, incl - c, at);
  return at;
}

__device__ inline uint64_t warp_min_u64(uint64_t x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y < x ? y : x;
  }
  return x;
}
__device__ inline uint64_t warp_max_u64(uint64_t x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}

__global__ void __launch_bounds__(kBlock, 2) cluster_merge_kernel(const TopKArgs a) {
  namespace cg = cooperative_groups;
  constexpr int kItems = kClusterMergeItems, kWarps = kBlock / 32;
  __shared__ __align__(16) uint32_t hist[2][kMergeBins];  // pass p counts into hist[p & 1]
  __shared__ __align__(16) uint32_t groups[2][kMergeGroups];  // and sums each 32 of them into groups[p & 1]
  __shared__ ClusterMergeShared ms;
  __shared__ uint32_t kept_before[kItems * kWarps];  // per (item, warp): kept keys, then their exclusive scan
  const cg::cluster_group cluster = cg::this_cluster();
  const uint32_t rank = cluster.block_rank(), ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
  TopKClock clock;
  long long t = clock.now();
  if (tid == 0) {
    ms.lo = ~0ull;
    ms.hi = 0;
  }
  __syncthreads();  // ms is initialised before any warp's atomicMin / atomicMax below
  // The row's checks come with its segments (every CTA of the fused clusters checks the whole
  // window: the same bits as check_row); the window here gives the request for the slots.
  const RowWindow w = resolve_window(a.rows, row);
  clock.lap(kTopKProfileCheck, t);
  ptx::wait_for_previous_kernel();
  clock.lap(kTopKProfileWait, t);

  // This CTA's segments [q0, q1) (at most two): thread t's item j holds key t + 512 (j % ips)
  // of segment q0 + j / ips (ips = ceil(K / 512) items per segment), so item order then
  // thread order is position order. Counts, status and keys are loaded at once.
  const SplitCandidates ws = split_workspace(a);
  const int per = cluster_merge_per(a.splits, int(ctas));
  const int q0 = min(int(rank) * per, a.splits), q1 = min(q0 + per, a.splits);
  const int ips = (a.k + kBlock - 1) / kBlock;
  const int64_t slot0 = row * a.splits + q0;
  uint32_t cnt0 = 0, cnt1 = 0, status = 0;
  if (q0 < q1) {
    cnt0 = ws.counts[slot0];
    status = ws.status[slot0];
  }
  if (q0 + 1 < q1) {
    cnt1 = ws.counts[slot0 + 1];
    status |= ws.status[slot0 + 1];
  }
  uint64_t v[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int q = j < ips ? 0 : 1;
    const int32_t i = tid + (j - q * ips) * kBlock;
    v[j] = j < 2 * ips && q0 + q < q1 && i < a.k ? ws.keys[(slot0 + q) * a.k + i] : 0ull;
  }
  uint64_t lo = ~0ull, hi = 0;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int q = j < ips ? 0 : 1;
    const int32_t i = tid + (j - q * ips) * kBlock;
    if (j >= 2 * ips || uint32_t(i) >= (q == 0 ? cnt0 : cnt1)) v[j] = 0ull;  // 0: no key (rank keys are never 0)
    if (v[j] != 0ull) {
      lo = v[j] < lo ? v[j] : lo;
      hi = v[j] > hi ? v[j] : hi;
    }
  }
  lo = warp_min_u64(lo);
  hi = warp_max_u64(hi);
  if (lane == 0 && hi != 0ull) {
    atomicMin(reinterpret_cast<unsigned long long*>(&ms.lo), (unsigned long long)lo);
    atomicMax(reinterpret_cast<unsigned long long*>(&ms.hi), (unsigned long long)hi);
  }
  if (tid == 0) {
    ms.n = cnt0 + cnt1;
    ms.status = status;
  }
  __syncthreads();
  cluster.sync();  // every CTA's count, key range and status are published

  // The row: lane q of every warp reads CTA q's.
  uint32_t n_q = 0, status_q = 0;
  uint64_t lo_q = ~0ull, hi_q = 0;
  if (uint32_t(lane) < ctas) {
    const ClusterMergeShared* r = cluster.map_shared_rank(&ms, unsigned(lane));
    n_q = r->n;
    status_q = r->status;
    lo_q = r->lo;
    hi_q = r->hi;
  }
  status = __reduce_or_sync(0xffffffffu, status_q);
  const bool failed = (status & row_status::kFailMask) != 0u;  // (its segments hold no key then)
  const uint32_t n = failed ? 0u : __reduce_add_sync(0xffffffffu, n_q);
  lo = warp_min_u64(lo_q);
  hi = warp_max_u64(hi_q);
  const uint32_t k = uint32_t(a.k);
  clock.lap(kTopKProfileSelect, t);

  // The threshold: keys >= thr are the row's top min(K, n) (thr 0: every key).
  uint64_t thr = 0;
  if (n > k) {  // n > 1 unique keys: lo < hi
    int top = 63 - __clzll((long long)(lo ^ hi));  // digits start below the common prefix
    uint64_t mask = top == 63 ? 0ull : ~((2ull << top) - 1);
    uint64_t prefix = hi & mask;
    uint32_t need = k;
    for (int pass = 0;; ++pass) {
      // The digit: 11 bits ending at `top`, or the lowest 11 (its bits above top are the
      // prefix's, the same in every key counted).
      const int sh = top >= kMergeDigitBits - 1 ? top + 1 - kMergeDigitBits : 0;
      uint32_t* h = hist[pass & 1];
      uint32_t* g = groups[pass & 1];
      reinterpret_cast<uint4*>(h)[tid] = make_uint4(0, 0, 0, 0);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kItems; ++j)
        if (v[j] != 0ull && (v[j] & mask) == prefix) atomicAdd(&h[uint32_t(v[j] >> sh) & (kMergeBins - 1)], 1u);
      __syncthreads();
#pragma unroll
      for (int e = 0; e < kMergeGroups / kWarps; ++e) {
        const int grp = warp * (kMergeGroups / kWarps) + e;
        const uint32_t c = __reduce_add_sync(0xffffffffu, h[grp * 32 + lane]);
        if (lane == 0) g[grp] = c;
      }
      __syncthreads();
      // Every CTA's counts of this pass are complete. (Buffer pass & 1 is zeroed again two
      // passes on, after the next cluster barrier: every CTA has read it by then.)
      cluster.sync();
      // Warp 0 finds the bin, from the top: lane l sums groups 63 - 2l and 62 - 2l over the
      // cluster, then the chosen group's bin 31 - l. (Every warp doing so cost 16 x the
      // distributed shared-memory reads.)
      if (warp == 0) {
        uint32_t hi_g = 0, lo_g = 0;
#pragma unroll
        for (uint32_t q = 0; q < kClusterMergeMaxCtas; ++q) {  // every load issued, then added
          if (q < ctas) {
            const uint2 u = reinterpret_cast<const uint2*>(cluster.map_shared_rank(g, q))[kMergeGroups / 2 - 1 - lane];
            hi_g += u.y;
            lo_g += u.x;
          }
        }
        uint32_t excl;
        const int gl = warp_select_lane(hi_g + lo_g, need, lane, &excl);
        uint32_t need_g = need - excl;
        const bool upper = need_g <= hi_g;
        if (!upper) need_g -= hi_g;
        const int grp = __shfl_sync(0xffffffffu, kMergeGroups - 1 - 2 * lane - (upper ? 0 : 1), gl);
        need_g = __shfl_sync(0xffffffffu, need_g, gl);
        const uint32_t bin = uint32_t(grp * 32 + 31 - lane);
        uint32_t c = 0;
#pragma unroll
        for (uint32_t q = 0; q < kClusterMergeMaxCtas; ++q)
          if (q < ctas) c += cluster.map_shared_rank(h, q)[bin];
        const int bl = warp_select_lane(c, need_g, lane, &excl);
        if (lane == bl) {
          ms.sel_bin = bin;
          ms.sel_count = c;
          ms.sel_need = need_g - excl;
        }
      }
      __syncthreads();  // (ms.sel_* are rewritten next pass after three more CTA barriers)
      const uint32_t sel_bin = ms.sel_bin, in_bin = ms.sel_count;
      need = ms.sel_need;
      if (pass == 0) clock.lap(kTopKProfileOrder, t);  // (the profile: the first pass apart)
      prefix |= uint64_t(sel_bin) << sh;
      mask |= uint64_t(kMergeBins - 1) << sh;
      // K - need keys lie above the bin and in_bin in it: when that is K, the bin's lower
      // edge keeps exactly the top K. (The lowest digit leaves one key per bin.)
      if (in_bin == need) {
        thr = prefix;
        break;
      }
      top = sh - 1;
    }
  }
  clock.lap(kTopKProfileReduce, t);

  // This CTA's kept keys and their places: (item, warp) counts scanned by warp 0.
  uint32_t keep_bits[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    keep_bits[j] = __ballot_sync(0xffffffffu, v[j] != 0ull && v[j] >= thr);
    if (lane == 0) kept_before[j * kWarps + warp] = uint32_t(__popc(keep_bits[j]));
  }
  __syncthreads();
  if (warp == 0) {
    uint32_t c[4], s4 = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      c[e] = kept_before[lane * 4 + e];
      s4 += c[e];
    }
    const uint32_t incl = warp_inclusive_sum(s4, lane);
    uint32_t at = incl - s4;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      kept_before[lane * 4 + e] = at;
      at += c[e];
    }
    if (lane == 31) ms.kept = incl;
  }
  __syncthreads();  // (the cluster barrier orders it too; racecheck wants the CTA's)
  cluster.sync();   // every CTA's kept count is published
  uint32_t kept_q = 0;
  if (uint32_t(lane) < ctas) kept_q = cluster.map_shared_rank(&ms, unsigned(lane))->kept;
  const uint32_t offset = __reduce_add_sync(0xffffffffu, uint32_t(lane) < rank ? kept_q : 0u);
  const uint32_t count = __reduce_add_sync(0xffffffffu, kept_q);  // min(K, n)
  cluster.barrier_arrive();  // this CTA reads no other CTA's shared memory from here on

  const TopKOutputs& o = a.out;
  const uint32_t lower = (1u << lane) - 1u;
  int32_t slot[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {  // every page-table read before the first store
    const bool keep = (keep_bits[j] >> lane) & 1u;
    slot[j] = keep && o.slots ? int32_t(physical_slot(a.pages, w.request, rank_key_position(v[j]))) : -1;
  }
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    if (!((keep_bits[j] >> lane) & 1u)) continue;
    const int64_t idx = offset + kept_before[j * kWarps + warp] + uint32_t(__popc(keep_bits[j] & lower));
    o.positions[row * o.positions_row_stride + idx] = rank_key_position(v[j]);
    if (o.slots) o.slots[row * o.slots_row_stride + idx] = slot[j];
    if (o.scores) o.scores[row * o.scores_row_stride + idx] = rank_key_score(v[j]);
  }
  if (rank == 0) {
    const float kNegInf = -__int_as_float(0x7f800000);
    for (int32_t i = int32_t(count) + tid; i < a.k; i += kBlock) {
      o.positions[row * o.positions_row_stride + i] = -1;
      if (o.slots) o.slots[row * o.slots_row_stride + i] = -1;
      if (o.scores) o.scores[row * o.scores_row_stride + i] = kNegInf;
    }
    if (tid == 0) {
      if (o.counts) o.counts[row] = int32_t(count);
      if (o.status) o.status[row] = status;
    }
  }
  clock.lap(kTopKProfileWrite, t);
  clock.flush(tid == 0, topk_profile_sums());
  cluster.barrier_wait();  // no CTA leaves while another may read its shared memory
}

// Raises the kernels' dynamic shared-memory limit once per device (a host-side
// attribute, not a stream operation: safe during graph capture).
cudaError_t configure_kernels() {
  static std::atomic<uint64_t> configured{0};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  const uint64_t bit = uint64_t{1} << (dev & 63);
  if (configured.load(std::memory_order_acquire) & bit) return cudaSuccess;
  const std::pair<const void*, size_t> kernels[] = {
      {reinterpret_cast<const void*>(topk_rows_kernel), sizeof(RowSelector::Storage)},
      {reinterpret_cast<const void*>(topk_pair_kernel), kPairSmem},
      {reinterpret_cast<const void*>(topk_staged_kernel), kStagedMaxSmem},
      {reinterpret_cast<const void*>(topk_split_kernel), sizeof(RowSelector::Storage)},
      {reinterpret_cast<const void*>(grid_finish_kernel), sizeof(FinishSelector::Storage)},
      {reinterpret_cast<const void*>(topk_merge_kernel<false>), sizeof(RowSelector::Storage)},
      {reinterpret_cast<const void*>(topk_merge_kernel<true>), kOrderedMergeLargeSmem}};
  for (const auto& [f, smem] : kernels) {
    e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  configured.fetch_or(bit, std::memory_order_release);
  return cudaSuccess;
}

// kernel<<<grid, block, smem, stream>>>(a) as a programmatic dependent of the stream's
// previous kernel: it may start while that one runs, and waits for it
// (ptx::wait_for_previous_kernel) before reading what it wrote.
cudaError_t launch_dependent(void (*kernel)(TopKArgs), dim3 grid, int block, size_t smem, cudaStream_t stream,
                             const TopKArgs& a) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(unsigned(block));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, a);
}

}  // namespace

cudaError_t topk_over_logits(const TopKArgs& a, cudaStream_t stream) {
  const int64_t rows = a.rows.rows();
  if (rows == 0) return cudaSuccess;
  const size_t smem = sizeof(RowSelector::Storage);
  cudaError_t e = configure_kernels();
  if (e != cudaSuccess) return e;
  if (a.path == cuda::TopKPath::kStaged)
    return launch_clusters(topk_staged_kernel, rows * a.splits, kBlock, staged_smem(a.rows.max_context, a.splits),
                           a.splits, stream, a);
  if (a.path == cuda::TopKPath::kPair) {
    topk_pair_kernel<<<dim3(unsigned(2 * rows), 1), kBlock, kPairSmem, stream>>>(a);
    return cudaGetLastError();
  }
  if (a.path == cuda::TopKPath::kRows || a.splits <= 1) {
    topk_rows_kernel<<<dim3(unsigned(rows), 1), kBlock, smem, stream>>>(a);
    return cudaGetLastError();
  }
  if (a.path == cuda::TopKPath::kSplit) {
    topk_split_kernel<<<dim3(unsigned(rows), unsigned(a.splits)), kBlock, smem, stream>>>(a);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    return topk_merge_splits(a, stream);
  }
  // The grid-wide select: row state and histograms zeroed, two count rounds, the collect,
  // the finish; each launch after the zeroing a programmatic dependent of the one before.
  const int64_t words = int64_t(cuda::topk_zeroed_bytes(rows) / 4);
  grid_zero_kernel<<<unsigned((words + 4 * kGridThreads - 1) / (4 * kGridThreads)), kGridThreads, 0, stream>>>(
      static_cast<uint32_t*>(a.workspace), words);
  if (e = cudaGetLastError(); e != cudaSuccess) return e;
  const dim3 grid(unsigned(a.splits), unsigned(rows));
  if (e = launch_dependent(grid_count_kernel<0>, grid, kGridThreads, 0, stream, a); e != cudaSuccess) return e;
  if (e = launch_dependent(grid_count_kernel<1>, grid, kGridThreads, 0, stream, a); e != cudaSuccess) return e;
  if (e = launch_dependent(grid_collect_kernel, grid, kGridThreads, 0, stream, a); e != cudaSuccess) return e;
  return launch_dependent(grid_finish_kernel, dim3(unsigned(rows)), kFinishThreads, sizeof(FinishSelector::Storage),
                          stream, a);
}

cuda::ClusterCapacity staged_cluster_capacities() {
  const auto fit = [](int c) {
    const int n = staged_cluster_capacity(c);
    return n > 0 ? n : -1;
  };
  return {fit(2), fit(4), fit(8)};
}

int staged_cluster_capacity(int ctas) {
  if (configure_kernels() != cudaSuccess) {
    cudaGetLastError();  // a later launch's error check must not see this one
    return 0;
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(attr, ctas, kBlock, kStagedMaxSmem, ctas);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, topk_staged_kernel, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return clusters;
}

bool topk_profile(unsigned long long (&out)[kTopKProfileSlots], bool reset) {
#if FI_TOPK_PROFILE
  return read_phase_sums(g_topk_profile, out, reset);
#else
  (void)out;
  (void)reset;
  return false;
#endif
}

cudaError_t topk_merge_splits(const TopKArgs& a, cudaStream_t stream, bool ordered, int cluster_ctas) {
  const int64_t rows = a.rows.rows();
  if (rows == 0) return cudaSuccess;
  if (cudaError_t e = configure_kernels(); e != cudaSuccess) return e;
  if (ordered && cluster_ctas > 0) {
    const int ctas = cluster_ctas;
    cudaLaunchAttribute attrs[2]{};
    cudaLaunchConfig_t cfg = cluster_config(attrs[0], rows * ctas, kBlock, 0, ctas, stream);
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
    return cudaLaunchKernelEx(&cfg, cluster_merge_kernel, a);
  }
  if (ordered) {
    const size_t smem = ordered_merge_large(a.splits, a.k) ? kOrderedMergeLargeSmem : kOrderedMergeSmem;
    return launch_dependent(topk_merge_kernel<true>, dim3(unsigned(rows)), kBlock, smem, stream, a);
  }
  return launch_dependent(topk_merge_kernel<false>, dim3(unsigned(rows)), kBlock, sizeof(RowSelector::Storage), stream,
                          a);
}

}  // namespace flashindexer::sm90
