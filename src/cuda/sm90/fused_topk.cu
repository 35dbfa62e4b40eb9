// flashindexer sm_90a: the fused indexer TopK (CONTRACT §1-§6): scores and the exact TopK
// in one pass, never writing the [rows, context] score matrix.
//
// Purpose: positions, slots, scores, counts and status of the K best positions of every
//   row, bit-identical to dense_logits.cu followed by topk_over_logits.cu: the scores come
//   from the same scoring core under the same plan (paged_scorer.cuh: same bits), and the
//   selection is exact under the same rank keys (rank_key.h), so sets, order and every
//   output agree.
// Algorithm: a scorer CTA (a group of R rows, one split of the positions). Its consumers
//   hand each tile's scores to a ring of kRingSlots score tiles in shared memory ([R, 64]
//   fp32 each, one store per score; absent cells hold a sentinel) instead of writing
//   logits. The producer warpgroup, which otherwise waits for ring slots, selects: kLag
//   tiles behind the tile it just issued it reads a score tile, clears it, and appends each
//   score whose rank key beats its row's threshold tau to the row's buffer of `cap` keys
//   (shared atomic). Before each tile a bar.red.or vote of the 128 selector threads asks
//   whether a row has less than a tile of room left; then they compact it: the exact K-th
//   key (radix_select.cuh, as TopK over logits), keep exactly K, raise tau. Exact and bounded
//   by construction; the consumers never wait for selection unless the score ring is full.
//   Finish (selector threads), per row: a last compaction to min(K, n), then
//   - one split: bitonic sort by position or rank, outputs written as TopK's write_row does;
//   - several splits: the local top K to the workspace (SplitCandidates), merged by the
//     merge kernel of topk_over_logits.cu (the one TopK's split rows use).
//   Deadlock-free: the selector waits for tile j's scores only after issuing tile j + kLag
//   (kLag <= kStages: the consumers need nothing later to finish tile j), and the producer's
//   wait for a free key stage (tile i - kStages consumed) needs only ring slots that the
//   selector freed by then (kRingSlots >= 1). With kLag = kRingSlots the slot for tile j is
//   freed right after tile j itself is issued, so consumers do not wait for the ring.
// Warp roles: warpgroup 0 produces key tiles and selects (named barrier 2); warpgroups 1-2
//   score (paged_scorer.cuh).
// Shared memory: the scorer's (N = 256: fp8 99 KiB, mxfp4 144 KiB) + 8 KiB of radix
//   histogram + the score ring (4 x R x 256 B) + R x cap x 8 B of candidates, cap = what
//   fits under the opt-in limit (R = 4: fp8 ~3,700, mxfp4 ~2,200).
#include "../../core/rank_key.h"
#include "fused_topk.h"
#include "paged_scorer.cuh"
#include "radix_select.cuh"
#include "topk_over_logits.h"

namespace flashindexer::sm90 {
namespace {

constexpr int kSelectors = 128;  // the producer warpgroup
constexpr uint32_t kSelectBarrier = 2;
using SelectorSync = NamedSync<kSelectBarrier, kSelectors>;
using Select = RadixSelect<kSelectors, SelectorSync>;
constexpr int kRingSlots = 4;  // score tiles in flight between consumers and selector
constexpr int kLag = 4;        // the selector reads tile i - kLag after issuing tile i
static_assert(kLag <= kScorerStages && kLag >= 1);
constexpr uint32_t kAbsent = 0xFFFFFFFFu;  // a NaN pattern scores never take (NaN is stored canonical)

// Register split with 128 consumer columns: the producer also selects, so it gets more
// than the scorer's 88 (ptxas: no spills at 192 / 120; 208 / 88 spilled the selection).
constexpr int kFusedConsumerRegs = 192;
constexpr int kFusedProducerRegs = ((kScorerThreads * kLaunchRegs - 256 * kFusedConsumerRegs) / 128) & ~7;
static_assert(128 * kFusedProducerRegs + 256 * kFusedConsumerRegs <= kScorerThreads * kLaunchRegs);

#ifndef FI_FUSED_PUTS
#define FI_FUSED_PUTS 1  // experiment knob: 0 drops every score (times the scorer alone; wrong results)
#endif

template <int kRows>
struct SelectState {
  Select::Storage select;
  uint64_t tau[kRows];                           // a row's threshold: only keys above it are appended
  uint32_t count[kRows];                         // a row's candidates
  uint64_t ring_full[kRingSlots];                // a score tile is written (consumer arrivals)
  uint64_t ring_empty[kRingSlots];               // a score tile is read and cleared (selector arrivals)
  float ring[kRingSlots][kRows][cuda::kScorerTile];  // score tiles [slot, R, 64], kAbsent where none
};

// Offsets from the scorer's (1024-aligned) shared memory: selection state and score ring,
// then the candidates [R, cap] (rank keys).
template <class Smem, int kRows>
struct FusedLayout {
  static constexpr size_t kState = (sizeof(Smem) + 15) / 16 * 16;
  static constexpr size_t kKeys = kState + (sizeof(SelectState<kRows>) + 15) / 16 * 16;
  static constexpr size_t kFixed = 1024 + kKeys;  // + the alignment slack of the dynamic base
  static size_t bytes(int32_t cap) { return kFixed + size_t(kRows) * size_t(cap) * 8; }
};

struct FusedParams {
  TopKOutputs out;
  int32_t k;
  int32_t cap;         // candidate keys per row
  bool by_rank;        // output order
  SplitCandidates ws;  // splits > 1
};

// Consumer side: the tile's in-window scores into its ring slot.
template <int kRows>
struct RingSink {
  static constexpr bool kTileHooks = true;
  SelectState<kRows>& st;
  int slot = 0;
  int64_t first = 0;

  __device__ void tile_begin(int i, int64_t tile_first) {
    slot = i % kRingSlots;
    first = tile_first;
    ptx::mbar_wait(&st.ring_empty[slot], ((i / kRingSlots) & 1) ^ 1);
  }
  __device__ void put(int r, int64_t, int64_t pos, float v) {
    if constexpr (FI_FUSED_PUTS != 0) st.ring[slot][r][pos - first] = isnan(v) ? __int_as_float(0x7FC00000) : v;
  }
  __device__ void tile_end(int) { ptx::mbar_arrive(&st.ring_full[slot]); }
};

// Selector side (the producer warpgroup, t = 0..127).
template <int kRows, class Core>
struct TileSelector {
  SelectState<kRows>& st;
  uint64_t* keys;  // [kRows, cap]
  int32_t cap, k;

  // Keeps exactly the row's K best keys; tau rises to the K-th. All selector threads.
  __device__ void compact(int r, int t) {
    uint64_t* kr = keys + size_t(r) * cap;
    const uint32_t n = st.count[r];
    const uint64_t kth = Select::kth(st.select, kr, n, uint32_t(k), t);
    if (t == 0) st.tau[r] = kth;
    Select::compact(kr, n, kth, &st.count[r], t);
  }

  // Selects from score tile i. Counts change only here, between barriers of these threads,
  // so the vote sees settled counts; a tile adds at most 64 keys per row.
  template <class Smem>
  __device__ void select_tile(const Smem& sm, int i, int t) {
    const uint32_t limit = uint32_t(cap) - uint32_t(cuda::kScorerTile);
    if (ptx::named_barrier_or(kSelectBarrier, kSelectors, t < kRows && st.count[t] > limit))
      for (int r = 0; r < kRows; ++r)
        if (st.count[r] > limit) compact(r, t);
    const int slot = i % kRingSlots;
    ptx::mbar_wait(&st.ring_full[slot], (i / kRingSlots) & 1);
    const int64_t first = Core::tile_first(sm, Core::pass_of(sm, i), i);
#pragma unroll
    for (int e = t; e < kRows * cuda::kScorerTile; e += kSelectors) {
      const int r = e / cuda::kScorerTile, m = e % cuda::kScorerTile;
      float& cell = st.ring[slot][r][m];
      const float v = cell;
      if (__float_as_uint(v) == kAbsent) continue;
      cell = __uint_as_float(kAbsent);
      const uint64_t rk = rank_key(v, int32_t(first + m));
      if (rk > st.tau[r]) keys[size_t(r) * cap + atomicAdd(&st.count[r], 1u)] = rk;
    }
    ptx::mbar_arrive(&st.ring_empty[slot]);
  }
};

// After the last tile (selector threads): each row's final min(K, n) keys, sorted and
// written as the outputs (one split) or handed to the merge (several).
template <int kRows, class Smem, class Selector>
__device__ void finish_rows(const ScorerArgs& a, const FusedParams& f, const Smem& sm, Selector& sel, int64_t split,
                            int t) {
  const TopKOutputs& o = f.out;
  const float kNegInf = -__int_as_float(0x7F800000);
  for (int r = 0; r < kRows; ++r) {
    const GroupRow gr = sm.rows[r];
    if (gr.row < 0) continue;
    if (sel.st.count[r] > uint32_t(f.k)) sel.compact(r, t);
    const uint32_t n = sel.st.count[r];
    uint64_t* kr = sel.keys + size_t(r) * f.cap;
    if (a.g.splits > 1) {
      const int64_t slot = gr.row * a.g.splits + split;
      for (uint32_t i = t; i < n; i += kSelectors) f.ws.keys[slot * f.k + i] = kr[i];
      if (t == 0) {
        f.ws.counts[slot] = n;
        f.ws.nan[slot] = gr.nan ? 1u : 0u;
      }
      continue;
    }
    uint32_t p = 1;
    while (p < n) p <<= 1;
    for (uint32_t i = n + t; i < p; i += kSelectors) kr[i] = 0ull;  // padding sorts last
    SelectorSync::sync();
    Select::sort_desc(kr, p, f.by_rank, t);
    SelectorSync::sync();
    for (int32_t i = t; i < f.k; i += kSelectors) {
      const bool real = uint32_t(i) < n;
      const uint64_t key = real ? kr[i] : 0ull;
      const int32_t pos = real ? rank_key_position(key) : -1;
      o.positions[gr.row * o.positions_row_stride + i] = pos;
      if (o.slots)
        o.slots[gr.row * o.slots_row_stride + i] =
            real ? int32_t(physical_slot(a.cache.pages, gr.request, pos)) : -1;
      if (o.scores) o.scores[gr.row * o.scores_row_stride + i] = real ? rank_key_score(key) : kNegInf;
    }
    if (t == 0) {
      if (o.counts) o.counts[gr.row] = int32_t(n);
      if (o.status) o.status[gr.row] = gr.status | (gr.nan ? row_status::kHasNaN : 0u);
    }
    SelectorSync::sync();  // the row's keys and the selection scratch are free again
  }
}

// Grid: one CTA per (group, split), groups in reverse order, as dense_logits_kernel.
template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
__global__ void __launch_bounds__(kScorerThreads, 1)
    fused_topk_kernel(const __grid_constant__ ScorerArgs a, const __grid_constant__ FusedParams f) {
  using Core = PagedScorer<kFormat, kHeads, kRows, kAccuracy>;
  using Layout = FusedLayout<typename Core::Smem, kRows>;
  extern __shared__ uint8_t smem_raw[];
  auto& sm = carve<typename Core::Smem>(smem_raw);
  uint8_t* base = reinterpret_cast<uint8_t*>(&sm);
  auto& st = *reinterpret_cast<SelectState<kRows>*>(base + Layout::kState);
  uint64_t* keys = reinterpret_cast<uint64_t*>(base + Layout::kKeys);
  const int64_t cta = blockIdx.x;
  const int64_t group = a.g.groups - 1 - cta / a.g.splits;
  const int64_t split = cta % a.g.splits;
  const int64_t c0 = split * a.g.chunk;
  const int64_t c1 = min(c0 + a.g.chunk, a.rows.max_context);
  if (threadIdx.x < kRows) {
    st.tau[threadIdx.x] = 0;
    st.count[threadIdx.x] = 0;
  }
  if (threadIdx.x < kRingSlots) {
    ptx::mbar_init(&st.ring_full[threadIdx.x], Core::kEmptyArrivals);  // the consumers scoring a tile
    ptx::mbar_init(&st.ring_empty[threadIdx.x], kSelectors);
  }
  for (int e = threadIdx.x; e < kRingSlots * kRows * cuda::kScorerTile; e += kScorerThreads)
    (&st.ring[0][0][0])[e] = __uint_as_float(kAbsent);
  Core::setup(a, sm, group, c0, c1);  // ends with a CTA barrier

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if constexpr (Core::kNw >= 128) ptx::regs_dealloc<kFusedProducerRegs>();
    const int t = threadIdx.x;
    TileSelector<kRows, Core> sel{st, keys, f.cap, f.k};
    Core::produce(a, sm, [&](int i) {
      if (i >= kLag) sel.select_tile(sm, i - kLag, t);
    });
    for (int i = max(0, sm.num_tiles - kLag); i < sm.num_tiles; ++i) sel.select_tile(sm, i, t);
    SelectorSync::sync();
    finish_rows<kRows>(a, f, sm, sel, split, t);
  } else {
    if constexpr (Core::kNw >= 128) ptx::regs_alloc<kFusedConsumerRegs>();
    RingSink<kRows> sink{st};
    Core::consume(sm, wg - 1, sink);
  }
}

template <CacheFormat kFormat, int kHeads, int kRows>
using LayoutOf = FusedLayout<ScorerSmem<kHeads * kRows, kFormat == CacheFormat::kMxfp4>, kRows>;

template <CacheFormat kFormat, int kHeads, int kRows>
cudaError_t launch(const ScorerArgs& a, const FusedParams& f, cudaStream_t stream) {
  const size_t smem = LayoutOf<kFormat, kHeads, kRows>::bytes(f.cap);
  auto kernel = a.accuracy == ScoreAccuracy::kReduced
                    ? fused_topk_kernel<kFormat, kHeads, kRows, ScoreAccuracy::kReduced>
                    : fused_topk_kernel<kFormat, kHeads, kRows, ScoreAccuracy::kFp32>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess)
    return e;
  kernel<<<dim3(unsigned(a.g.ctas())), kScorerThreads, smem, stream>>>(a, f);
  return cudaGetLastError();
}

}  // namespace

int32_t fused_topk_capacity(CacheFormat format, int32_t heads, int32_t rows_per_group, size_t smem_limit) {
  return with_scorer_shape(format, heads, rows_per_group, int32_t{0}, [&]<CacheFormat kF, int kH, int kR>() {
    constexpr size_t kFixed = LayoutOf<kF, kH, kR>::kFixed;
    if (smem_limit <= kFixed) return int32_t{0};
    return int32_t(std::min<size_t>((smem_limit - kFixed) / (size_t(kR) * 8), 1 << 20));
  });
}



size_t fused_topk_workspace_bytes(const IndexerProblem& p, const cuda::ScorerPlan& plan) {
  return plan.max_splits > 1 ? SplitCandidates::bytes(p.rows.rows(), plan.max_splits, p.k) : 0;
}

cudaError_t fused_topk(const FusedTopKArgs& args, cudaStream_t stream) {
  const IndexerProblem& p = *args.problem;
  const int64_t rows = p.rows.rows();
  if (rows == 0 || args.plan.ctas() == 0) return cudaSuccess;
  const ScorerArgs a = scorer_args(p, args.plan);
  FusedParams f;
  f.out = args.out;
  f.k = p.k;
  f.cap = fused_topk_capacity(p.cache.format, p.queries.num_heads, args.plan.rows_per_group, args.smem_limit);
  f.by_rank = p.order == OutputOrder::kRank;
  f.ws = SplitCandidates::in(args.workspace, rows, args.plan.splits, p.k);
  if (f.cap < cuda::fused_min_capacity(p.k)) return cudaErrorInvalidConfiguration;
  const cudaError_t e = with_scorer_shape(p.cache.format, p.queries.num_heads, args.plan.rows_per_group,
                                          cudaErrorInvalidConfiguration, [&]<CacheFormat kF, int kH, int kR>() {
                                            return launch<kF, kH, kR>(a, f, stream);
                                          });
  if (e != cudaSuccess || args.plan.splits <= 1) return e;
  TopKArgs m{nullptr, 0, p.rows, p.cache.pages, p.k, p.order, args.out, args.plan.splits, args.workspace};
  return topk_merge_splits(m, stream);
}

}  // namespace flashindexer::sm90
