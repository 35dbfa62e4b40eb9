// flashindexer sm_90a: the fused indexer TopK (CONTRACT §1-§6): scores and the exact TopK
// in one pass, never writing the [rows, context] score matrix.
//
// Purpose: positions, slots, scores, counts and status of the K best positions of every
//   row, bit-identical to dense_logits.cu followed by topk_over_logits.cu: the scores come
//   from the same scoring core under the same plan (paged_scorer.cuh: same bits), and the
//   selection is exact under the same rank keys (rank_key.h), so sets, order and every
//   output agree.
// Algorithm: a scorer CTA (a group of R rows, one split of the positions) with a selecting sink.
//   Each row owns a buffer of `cap` rank keys in shared memory and a threshold tau (0 at first,
//   then a floor at or below the row's K-th best key): a score whose rank key beats tau is appended
//   (shared atomic). The consumers drop the scores below tau's high word (the row's gate, a
//   register reloaded after the steps that raise tau) before they build a rank key (with
//   FI_FUSED_WARP_PUTS = 1 a warp at a time: one vote, one atomic per row and warp). The sink
//   steps with both consumer warpgroups (a step is a pair of tiles, or one tile where they
//   share tiles); every `vote_every` steps (a power of two up to 8, chosen on
//   the host from the free room) a vote asks whether an append took a row past the limit (room
//   for the intervals before its compaction is kept below the end of its buffer: the thread
//   whose append index is the limit knows it), and the threads that score the row compact it:
//   one radix histogram pass (radix_select.cuh, as TopK over logits) finds the lower edge of the
//   digit bin holding the K-th key, the keys at or above it are kept (K and a few more; the exact
//   K-th when that bin is too full) and tau rises to that edge. Groups of N = 256 on two
//   consumer warpgroups take alternate tiles where the buffers hold 2 K keys, 1,024 of them
//   above K (cuda::fused_takes_alternate256), else share tiles: each warpgroup scores rows of
//   its own and votes (bar.red.or) and compacts alone (128 threads). Otherwise a vote is
//   deferred (tags and an mbarrier, acted on one vote later; three intervals of room; the append
//   that crosses the limit tags the next vote at once): every
//   consumer warpgroup scores every row (N = 256 on alternate tiles, and every N < 256: fp8
//   pairs of rows at H = 64 in exact mode on three warpgroups), or four share tiles (fp8 at
//   H = 64 in kProduction, groups of 4 rows as the dense kernel's: cuda::fused_prefill_rows,
//   fused_consumer_wgs), two on each column half of every other tile, a step two tiles.
//   With one split a group starts with a sampled start (sampled_start.h; a step samples
//   the tiles it scores).
//   Exact and bounded by construction; the producer keeps filling the key ring meanwhile.
//   Finish: a last, exact compaction to min(K, n), two rows at a time (one per warpgroup); then
//   per row
//   - one split: ordered by position through a bitmap of the window in the free key ring
//     (bitmap_order.cuh; windows up to 4 x the ring's bytes), else and by rank a register
//     bitonic sort (bitonic_sort.cuh); outputs written as TopK's write_row does;
//   - several splits: the local top K to the workspace (SplitCandidates), merged by the
//     merge kernel of topk_over_logits.cu (the one TopK's split rows use).
// Warp roles: the scorer's (warpgroup 0 produces, 1-2 consume; on shared tiles in the FP16
//   chain they take turns on the tensor cores, named barriers 4, 5; groups of N = 128 in the
//   FP16 chain run a third consumer warpgroup, 512 threads, each on every third tile, and
//   fp8 at H = 64 in the FP8 chain (kProduction) a fourth, 640 threads (N = 128: each on
//   every fourth tile; N = 256: shared tiles), so a
//   warpgroup's head sums and appends run under the others' MMAs; the stream's votes meet
//   them all on named barrier 6); selection runs on consumer
//   warpgroups 1-2 (named barriers 2, 3 per warpgroup, or 1 for both), as do the finish and
//   output writes (named barrier 1). (FI_FUSED_WIDE_SELECT = 1: four consumer warpgroups
//   select on all 512 threads, barrier 6, in the stream and in the finish's last compactions.)
// Shared memory: the scorer's (N = 256: fp8 99 KiB, 131 KiB in exact mode; mxfp4 139 KiB)
//   + 8 KiB of radix histogram + R x cap x 8 B of candidates, cap = what fits under the
//   opt-in limit (227 KiB, H = 64, R = 4: fp8 3,768, 2,744 in exact mode; mxfp4 2,456).
// Decode rows take fused_staged.cu instead where its plan applies (a cluster per row segment;
//   speculative rows while B x context <= 4M positions; the dispatch is in fused_topk()).
// Measured (docs/experiments.md, 2026-12-03): bit-identical to dense + TopK everywhere; prefill
//   8,192 x 65,536 at 0.95x of dense + TopK (V4-Pro), 0.97x (V4-Flash), 0.93x at K = 2048
//   (V3.2, exact mode, pairs of rows, three consumer warpgroups), 0.88x at H = 32 (GLM-5, groups
//   of 4); V3.2 in production mode 0.98x (groups of 4, four warpgroups; H100, 2026-12-07).
#include "cuda/sm90/kernels/fused_topk.h"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "cuda/sm90/scorer/paged_scorer.cuh"
#include "cuda/sm90/sinks/select_sink.cuh"

namespace flashindexer::sm90 {
namespace {

// Grid: one CTA per (group, split), groups in reverse order, as dense_logits_kernel.
// 384 threads, 512 with a third consumer warpgroup, 640 with a fourth (fused_consumer_wgs).
template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy, bool kAlternate>
__global__ void __launch_bounds__(128 * (1 + fused_consumer_wgs<kFormat, kHeads, kRows, kAccuracy>()), 1)
    fused_topk_kernel(const __grid_constant__ ScorerArgs a, const __grid_constant__ FusedParams f) {
  constexpr int kWgs = fused_consumer_wgs<kFormat, kHeads, kRows, kAccuracy>();
  using Core = PagedScorer<kFormat, kHeads, kRows, kAccuracy, kWgs, kScorerStages, kAlternate, true>;
  using Layout = FusedLayout<typename Core::Smem, kRows>;
  extern __shared__ uint8_t smem_raw[];
  auto& sm = carve<typename Core::Smem>(smem_raw);
  uint8_t* base = reinterpret_cast<uint8_t*>(&sm);
  auto& st = *reinterpret_cast<SelectState<kRows>*>(base + Layout::kState);
  uint64_t* keys = reinterpret_cast<uint64_t*>(base + Layout::kKeys);
  const CtaSpan span = cta_span(a);
  const int64_t group = span.group, split = span.split, c0 = span.c0, c1 = span.c1;
  if (f.repair_launch) {  // uniform: every thread reads the same flags
    bool any = false;
    const int64_t row0 = group * a.g.group_stride, rows = a.rows.rows();
    for (int r = 0; r < a.g.group_stride && row0 + r < rows; ++r) any |= f.repair[row0 + r] == kRepair;
    if (!any) return;
  }
#if FI_CHECK_BARRIER_PHASES
  phase_check_start();
#endif
  if (threadIdx.x < kRows) {
    st.tau[threadIdx.x] = 0;
    st.count[threadIdx.x] = 0;
    st.guessed[threadIdx.x] = 0;
  }
  if (threadIdx.x < 4) {
    st.vote_tag[threadIdx.x] = 0;
    ptx::mbar_init(&st.vote_bar[threadIdx.x], 128 * kWgs);
  }
  Core::setup(a, sm, group, c0, c1, f.repair_launch ? 0 : f.max_sample);  // ends with a CTA barrier

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    Core::producer_registers();
    Core::produce(a, sm);
  } else {
    Core::consumer_registers();
    const int t = threadIdx.x - 128;
    SelectSink<kRows, step_puts(kHeads, kRows, kAlternate, kWgs),
               cuda::fused_votes_per_warpgroup(kHeads, kRows, kAlternate, kWgs), Core::kSampledOrder, kWgs>
        sink{
        st, keys, f.cap, f.k, uint32_t(f.vote_every - 1), f.vote_limit};
    const long long t0 = sink.clock.now();
    Core::consume(sm, wg - 1, sink);
    StreamSync<kWgs>::sync();
    const long long t1 = sink.clock.now();
    if constexpr (decltype(sink)::kWideSelect) compact_rows_wide<kRows>(f, sm, sink, t);
    if constexpr (kWgs > 2) {
      if (t >= kConsumers) return;  // warpgroups 3 (and 4): the rest of the finish runs on warpgroups 1-2
    }
    finish_rows<kRows>(a, f, sm, sink, split, t);
    sink.clock.add(kProfileConsume, t1 - t0);
    sink.clock.add(kProfileFinish, sink.clock.now() - t1);
    sink.clock.flush(t == 0, fused_profile_sums());
  }
}

template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
using LayoutOf = FusedLayout<ScorerSmem<kHeads * kRows, kFormat == CacheFormat::kMxfp4, kScorerStages,
                                        fp16_chain(kFormat, kAccuracy),
                                        scorer_q_rows(kFormat, kAccuracy, kHeads, kHeads * kRows)>,
                             kRows>;

// One accuracy mode's kernel, with its thread count (fused_consumer_wgs).
template <CacheFormat kFormat, int kHeads, int kRows, bool kAlternate, ScoreAccuracy kAccuracy>
cudaError_t launch_mode(const ScorerArgs& a, const FusedParams& f, cudaStream_t stream) {
  constexpr int kWgs = fused_consumer_wgs<kFormat, kHeads, kRows, kAccuracy>();
  // Four warpgroups share tiles, and linear columns do not fit m64n256 (cuda::fused_takes_alternate256).
  if constexpr (kAlternate && (kWgs != 2 || cuda::takes_linear_columns(kFormat == CacheFormat::kFp8E4M3,
                                                                      kAccuracy == ScoreAccuracy::kExact))) {
    return cudaErrorInvalidConfiguration;
  } else {
    return launch_scorer_kernel<128 * (1 + kWgs)>(fused_topk_kernel<kFormat, kHeads, kRows, kAccuracy, kAlternate>,
                                                  LayoutOf<kFormat, kHeads, kRows, kAccuracy>::bytes(f.cap), stream,
                                                  a, f);
  }
}
template <CacheFormat kFormat, int kHeads, int kRows, bool kAlternate>
cudaError_t launch(const ScorerArgs& a, const FusedParams& f, cudaStream_t stream) {
  return a.accuracy == ScoreAccuracy::kProduction
             ? launch_mode<kFormat, kHeads, kRows, kAlternate, ScoreAccuracy::kProduction>(a, f, stream)
             : launch_mode<kFormat, kHeads, kRows, kAlternate, ScoreAccuracy::kExact>(a, f, stream);
}
// Groups of N = 256 on alternate or shared tiles; other groups take alternate tiles anyway.
template <CacheFormat kFormat, int kHeads, int kRows>
cudaError_t launch(const ScorerArgs& a, const FusedParams& f, bool alternate, cudaStream_t stream) {
  if constexpr (kHeads * kRows == 256) {
    if (alternate) return launch<kFormat, kHeads, kRows, true>(a, f, stream);
  }
  return launch<kFormat, kHeads, kRows, false>(a, f, stream);
}

}  // namespace

int32_t fused_topk_capacity(CacheFormat format, ScoreAccuracy accuracy, int32_t heads, int32_t rows_per_group,
                            size_t smem_limit) {
  return with_scorer_shape(format, heads, rows_per_group, int32_t{0}, [&]<CacheFormat kF, int kH, int kR>() {
    const size_t fixed = (accuracy == ScoreAccuracy::kExact ? LayoutOf<kF, kH, kR, ScoreAccuracy::kExact>::kFixed
                                                            : LayoutOf<kF, kH, kR, ScoreAccuracy::kProduction>::kFixed) +
                         (FI_CHECK_BARRIER_PHASES ? 1024 : 0);  // + static shared
    if (smem_limit <= fixed) return int32_t{0};
    // Even: every row's keys start 16-byte aligned (the final sort's vector loads).
    return int32_t(std::min<size_t>((smem_limit - fixed) / (size_t(kR) * 8), 1 << 20)) & ~int32_t{1};
  });
}

bool fused_topk_profile(unsigned long long (&out)[kFusedProfileSlots], bool reset) {
#if FI_FUSED_PROFILE
  return read_phase_sums(g_fused_profile, out, reset);
#else
  (void)out;
  (void)reset;
  return false;
#endif
}

bool fused_barrier_phase_errors(uint32_t* errors, bool reset) {
#if FI_CHECK_BARRIER_PHASES
  unsigned int e = 0;
  const unsigned int zero = 0;
  if (cudaMemcpyFromSymbol(&e, g_barrier_phase_errors, sizeof(e)) != cudaSuccess) return false;
  if (reset && cudaMemcpyToSymbol(g_barrier_phase_errors, &zero, sizeof(zero)) != cudaSuccess) return false;
  *errors = e;
  return true;
#else
  (void)errors;
  (void)reset;
  return false;
#endif
}

cudaError_t fused_topk(const FusedTopKArgs& args, cudaStream_t stream) {
  const IndexerProblem& p = *args.problem;
  const int64_t rows = p.rows.rows();
  if (rows == 0 || args.plan.ctas() == 0) return cudaSuccess;
  if (args.staged.cluster > 0) return fused_staged_topk(p, args.out, args.staged, args.workspace, stream);
  const cuda::FusedLockstepPlan& lp = args.lockstep;
  const ScorerArgs a = scorer_args(p, args.plan);
  FusedParams f;
  f.out = args.out;
  f.k = p.k;
  f.cap = lp.cap;
  const bool pairs = lp.alternate256;
  f.by_rank = p.order == OutputOrder::kRank;
  f.ws = args.plan.splits > 1 ? SplitCandidates::in(args.workspace, rows, args.plan.splits, p.k) : SplitCandidates{};
  f.vote_every = lp.vote_every;
  f.vote_limit = lp.vote_limit;
  f.max_sample = lp.max_sample;
  f.repair = f.max_sample > 0 ? static_cast<uint32_t*>(args.workspace) : nullptr;
  f.repair_launch = false;
  auto run = [&](const FusedParams& fp) {
    return with_scorer_shape(p.cache.format, p.queries.num_heads, args.plan.rows_per_group,
                             cudaErrorInvalidConfiguration,
                             [&]<CacheFormat kF, int kH, int kR>() {
                               return launch<kF, kH, kR>(a, fp, pairs, stream);
                             });
  };
  cudaError_t e = run(f);
  if (e == cudaSuccess && f.max_sample > 0) {  // groups whose guess failed, scored again without it
    FusedParams r = f;
    r.repair_launch = true;
    e = run(r);
  }
  if (e != cudaSuccess || args.plan.splits <= 1) return e;
  TopKArgs m{nullptr, 0, p.rows, p.cache.pages, p.k, p.order, args.out, args.plan.splits, args.workspace};
  return topk_merge_splits(m, stream);
}

}  // namespace flashindexer::sm90
