// flashindexer sm_90a: the dense-logits operator (CONTRACT §1, §4, §5).
//
// Purpose: logits[r, s] for every row and every s < max_context: the score inside the
//   row's window, -inf outside it and for failed rows; status[r] (validation bits and
//   kHasNaN). The scoring is paged_scorer.cuh; this file adds the logits sink, the -inf
//   fill of each CTA's position range and the status write.
// Grid: one CTA per (group, split), groups in reverse order (causal prefill: the longest
//   rows first). 384 threads; 512 or 640 with a third or fourth consumer warpgroup
//   (dense_consumer_wgs); groups of N = 256 on alternate tiles (dense_alternate256), or, with
//   four, on shared tiles;
//   dynamic shared memory scorer_smem_bytes<N, ...>().
#include "cuda/sm90/kernels/dense_logits.h"
#include "cuda/sm90/scorer/paged_scorer.cuh"
#include "cuda/sm90/sinks/logits_sink.cuh"

namespace flashindexer::sm90 {
namespace {


// The dense kernel's consumer warpgroups and its groups of N = 256 on alternate tiles
// (PagedScorer's kAlternate256): the rules and their measurements are cuda::dense_consumer_wgs
// and cuda::dense_takes_alternate256 (heuristics.h); the scores are the same bits either way.
template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
constexpr int dense_consumer_wgs() {
  return cuda::dense_consumer_wgs(kFormat == CacheFormat::kFp8E4M3, kAccuracy == ScoreAccuracy::kExact, kHeads, kRows);
}
template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
constexpr bool dense_alternate256() {
  return cuda::dense_takes_alternate256(kFormat == CacheFormat::kFp8E4M3, kAccuracy == ScoreAccuracy::kExact, kHeads,
                                        kRows);
}

template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
__global__ void __launch_bounds__(128 * (1 + dense_consumer_wgs<kFormat, kHeads, kRows, kAccuracy>()), 1)
    dense_logits_kernel(const __grid_constant__ ScorerArgs a, const __grid_constant__ LogitsOutput out) {
  constexpr int kWgs = dense_consumer_wgs<kFormat, kHeads, kRows, kAccuracy>();
  using Core = PagedScorer<kFormat, kHeads, kRows, kAccuracy, kWgs, kScorerStages,
                           dense_alternate256<kFormat, kHeads, kRows, kAccuracy>()>;
  extern __shared__ uint8_t smem_raw[];
  auto& sm = carve<typename Core::Smem>(smem_raw);
  const int64_t cta = blockIdx.x;
  const int64_t group = a.g.groups - 1 - cta / a.g.splits;
  const int64_t c0 = (cta % a.g.splits) * a.g.chunk;
  const int64_t c1 = min(c0 + a.g.chunk, a.rows.max_context);
  Core::setup(a, sm, group, c0, c1);

  // -inf for every position of [c0, c1) outside each row's window (all of it for a failed row).
  const float kNegInf = -__int_as_float(0x7F800000);
  for (int r = 0; r < kRows; ++r) {
    const GroupRow gr = sm.rows[r];
    if (gr.row < 0) continue;
    float* dst = out.logits + gr.row * out.row_stride;
    const bool scored = gr.end > gr.start;
    const int64_t lo = scored ? min(max(c0, int64_t(gr.start)), c1) : c1;  // [c0, lo): -inf
    const int64_t hi = scored ? max(min(c1, int64_t(gr.end)), lo) : c1;    // [hi, c1): -inf
    for (int64_t s = c0 + threadIdx.x; s < lo; s += Core::kThreads) dst[s] = kNegInf;
    for (int64_t s = hi + threadIdx.x; s < c1; s += Core::kThreads) dst[s] = kNegInf;
  }

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    Core::producer_registers();
    Core::template produce<2>(a, sm);  // mxfp4 N = 256: two tiles per step (the producer bounds this kernel)
  } else {
    Core::consumer_registers();
    LogitsSink sink{out.logits, out.row_stride};
    Core::consume(sm, wg - 1, sink);
    ptx::named_barrier(1, 128 * kWgs);
    if (threadIdx.x == 128 && out.status != nullptr) {
      for (int r = 0; r < kRows; ++r) {
        const GroupRow gr = sm.rows[r];
        if (gr.row < 0) continue;
        const uint32_t bits = gr.status | (gr.nan ? row_status::kHasNaN : 0u);
        if (a.g.splits == 1) {
          out.status[gr.row] = bits;
        } else if (bits != 0) {
          atomicOr(out.status + gr.row, bits);
        }
      }
    }
  }
}

template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
cudaError_t launch(const ScorerArgs& a, const LogitsOutput& out, cudaStream_t stream) {
  constexpr size_t kSmem =
      scorer_smem_bytes<kHeads * kRows, kFormat == CacheFormat::kMxfp4, fp16_chain(kFormat, kAccuracy),
                        scorer_q_rows(kFormat, kAccuracy, kHeads, kHeads * kRows)>();
  return launch_scorer_kernel<128 * (1 + dense_consumer_wgs<kFormat, kHeads, kRows, kAccuracy>())>(
      dense_logits_kernel<kFormat, kHeads, kRows, kAccuracy>, kSmem, stream, a, out);
}

template <CacheFormat kFormat, int kHeads, int kRows>
cudaError_t launch(const ScorerArgs& a, const LogitsOutput& out, cudaStream_t stream) {
  return a.accuracy == ScoreAccuracy::kProduction ? launch<kFormat, kHeads, kRows, ScoreAccuracy::kProduction>(a, out, stream)
                                               : launch<kFormat, kHeads, kRows, ScoreAccuracy::kExact>(a, out, stream);
}

}  // namespace

bool dense_logits_instantiated(CacheFormat format, int32_t heads, int32_t rows_per_group) {
  return with_scorer_shape(format, heads, rows_per_group, false,
                           [&]<CacheFormat kF, int kH, int kR>() { return kH * kR <= 256; });
}

cudaError_t dense_logits(const DenseLogitsArgs& args, cudaStream_t stream) {
  const IndexerProblem& p = *args.problem;
  const int64_t rows = p.rows.rows();
  if (args.out.status != nullptr && args.plan.splits > 1 && rows > 0)
    if (cudaError_t e = cudaMemsetAsync(args.out.status, 0, size_t(rows) * sizeof(uint32_t), stream); e != cudaSuccess)
      return e;
  if (args.plan.ctas() == 0) return cudaSuccess;
  const ScorerArgs a = scorer_args(p, args.plan);
  return with_scorer_shape(p.cache.format, p.queries.num_heads, args.plan.rows_per_group,
                           cudaErrorInvalidConfiguration, [&]<CacheFormat kF, int kH, int kR>() {
                             return launch<kF, kH, kR>(a, args.out, stream);
                           });
}

}  // namespace flashindexer::sm90
