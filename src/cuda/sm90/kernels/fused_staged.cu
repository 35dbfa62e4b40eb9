// flashindexer sm_90a: the fused indexer TopK for decode rows, a cluster of CTAs per row
// segment with the scores staged in shared memory (fused_topk's decode path: mxfp4 or fp8,
// H = 64 or 32; one row per CTA, any next_n (plan_fused_staged bounds speculative rows), or
// fp8 next_n = 2 rows in pairs: a CTA scores both rows of its request in one pass over the
// keys and stages both).
//
// Purpose: the outputs of fused_topk.cu, bit-identical to dense_logits.cu followed by
//   topk_over_logits.cu: the scores come from the dense kernel's scorer (paged_scorer.cuh,
//   three consumer warpgroups, the same bits) and the selection is exact under the same rank
//   keys.
// Algorithm (heuristics.h plan_fused_staged): a row's positions split into S segments of C
//   chunks; a cluster of C CTAs scores a segment, each CTA one chunk, its sink storing every
//   score in the CTA's stage (fp32 [rows][chunk] in shared memory). Then, for each row of the
//   pair in turn, as topk_staged_kernel does over logits (staged_select.cuh):
//   1. every CTA reads the same 2,048 samples of the segment's window from the cluster's
//      stages (distributed shared memory) and takes the same guess tau, a radix floor at
//      about mu + 5 sigma samples; none when the window fits the candidate buffer, which
//      then takes every position;
//   2. two passes over the stage keep the rank keys of its scores >= tau's, in position order;
//   3. when the segment's candidates are at least min(K, L) and fit, every score left out is
//      below all of them, so its top K is among them: CTA 0 gathers them and keeps the K
//      best in position order; S = 1: the row's outputs (by rank: after a block radix sort);
//      S > 1: to the workspace slot of the segment (with the row's status word), merged by
//      topk_over_logits.cu's cluster merge (by position) or ordered merge (by rank), a
//      programmatic dependent launch triggered after the scoring: the slots read in segment
//      order are the row's candidates in position order;
//   4. otherwise (a failed guess, a full buffer) CTA 0 streams every stage of the cluster
//      through a BlockSelector (exact; S > 1: its K best to the slot in position order).
//   A pair in a cluster of two CTAs splits the rows
//   instead: CTA r runs steps 1-4 for row r over both CTAs' stages (the other's through
//   distributed shared memory) and finishes it, so the rows are selected side by side.
// Warp roles: warpgroup 0 produces, 1-3 consume, each on every third tile (mxfp4 and fp8
//   pairs: setmaxnreg 48 / 152, back to 128 after the scoring, each warpgroup's warps meeting
//   on a named barrier before the second; fp8 rows alone: 128 registers throughout); then all
//   512 threads select.
// Shared memory: max(scorer 77-100 KiB (a pair's ~91 KiB: 7 key tiles in its ring),
//   RowSelector storage ~88 KiB), which the selection aliases once the scoring is done, + the
//   stages (per row max(chunk x 4 B, 16 KiB: rank order sorts K keys there); at most 128 KiB,
//   alone or for a pair): one CTA per SM.
// Measured (docs/experiments.md, 2026-11-30): V4-Pro decode B = 64 x 65,536 216 us against
//   249 us for dense + TopK; V3.2 1.08x; B = 1 (with the cluster merge): V4-Pro x 262,144
//   1.15x, V4-Flash 0.91x, V3.2 0.98-1.16x; V3.2 next_n = 2 in pairs (2026-11-30): B64 x
//   32,768 1.25x, B128 x 32,768 1.07x, B32 x 131,072 1.02x (rows alone 0.85x, 0.72x, 0.79x).
#include <cooperative_groups.h>

#include "cuda/sm90/common/cluster_launch.h"
#include "cuda/sm90/common/diagnostics.h"
#include "cuda/sm90/common/phase_clock.cuh"
#include "cuda/sm90/kernels/fused_topk.h"
#include "cuda/sm90/scorer/paged_scorer.cuh"
#include "cuda/sm90/select/staged_select.cuh"
#include "cuda/sm90/sinks/stage_sink.cuh"

namespace flashindexer::sm90 {
namespace {

namespace cg = cooperative_groups;
constexpr int kThreads = kRowBlock;  // the scorer's producer and three consumer warpgroups
constexpr int kWarps = kThreads / 32;
constexpr int kPassBits = 64;        // one 64-bit pass mask per lane: 16 float4
static_assert(cuda::kTopKStagedMaxChunk / 4 <= kPassBits / 4 * kThreads, "a chunk's float4 fit the lanes' masks");
using NoClock = PhaseClock<kTopKProfileSlots, false>;
#if FI_FUSED_PROFILE
__device__ unsigned long long g_staged_profile[kFusedStagedProfileSlots];
__device__ unsigned long long* staged_profile_sums() { return g_staged_profile; }
#else
__device__ unsigned long long* staged_profile_sums() { return nullptr; }
#endif
using StagedClock = PhaseClock<kFusedStagedProfileSlots, FI_FUSED_PROFILE != 0>;
// Registers of an mxfp4 producer thread (the rest go to the consumers, within the launch's
// 512 x 128; the dense kernel's split is 40 / 152: here 40 spilled in the producer).
constexpr int kStagedProducerRegs = 48;
constexpr int kConsumerRegs = (kThreads * 128 - 128 * kStagedProducerRegs) / 384 / 8 * 8;
// FI_STAGED_SETMAXNREG=0 (diagnostics.h) keeps 128 registers in every warp (no split, no
// restore): under compute-sanitizer memcheck the mxfp4 kernel hung in some runs, never without
// the register moves (the restore to 128 after the scoring needs the whole register file back;
// likely the cause, not proven).
constexpr bool kMoveRegs = FI_STAGED_SETMAXNREG != 0;

struct StagedParams {
  TopKOutputs out;
  int32_t k;
  OutputOrder order;
  int32_t segments;    // per row; the cluster is a.g.splits / segments CTAs
  SplitCandidates ws;  // segments > 1
};

struct StagedShared {
  int64_t split, c0, c1;  // this CTA's split and chunk [c0, c1), kept here across the scoring
  uint32_t warp_count[kWarps];
  uint32_t first[cuda::kTopKStagedMaxCluster];  // CTA 0: index of each CTA's first candidate in the gather
  uint32_t count;  // this CTA's candidates
  uint32_t nan;    // a NaN among this CTA's scores
  GroupRow rows[2];  // the group's rows (the scorer's copy is overwritten by the selector)
};

template <class Smem>
constexpr size_t stage_offset() {
  const size_t s = sizeof(Smem) > sizeof(RowSelector::Storage) ? sizeof(Smem) : sizeof(RowSelector::Storage);
  return (s + 127) / 128 * 128;
}
constexpr size_t kMinStageBytes = size_t(kMaxK) * 8;

// Floats between the stages of a group's rows: each row's stage holds its chunk and, once its
// selection is done, K keys of scratch (rank order sorts them there).
__host__ __device__ constexpr int64_t stage_stride(int64_t chunk) {
  return chunk * 4 > int64_t(kMinStageBytes) ? chunk : int64_t(kMinStageBytes) / 4;
}

template <class Smem>
constexpr size_t staged_smem_bytes(int64_t chunk, int rows) {
  return 1024 + stage_offset<Smem>() + size_t(rows) * size_t(stage_stride(chunk)) * 4;
}

// A row's segment: positions [seg0, seg1) of the row, the cluster's chunks; in-window [lo, hi)
// (empty for a failed row).
struct Segment {
  int64_t seg0, seg1, lo, hi, len;
  bool take_all;  // the window fits the candidate buffer: every position is a candidate
  int64_t need;   // the guess's sample rank (0: no guess)
};

__device__ inline Segment segment_of(const ScorerArgs& a, const StagedParams& f, int64_t split, uint32_t rank,
                                     uint32_t ctas, const GroupRow& gr) {
  const int64_t chunk = a.g.chunk, max_context = a.rows.max_context;
  Segment s;
  s.seg0 = min((split - rank) * chunk, max_context);
  s.seg1 = min(s.seg0 + int64_t(ctas) * chunk, max_context);
  s.lo = min(max(s.seg0, int64_t(gr.start)), s.seg1);
  s.hi = max(s.lo, min(s.seg1, int64_t(gr.end)));
  s.len = s.hi - s.lo;
  s.take_all = s.len <= RowSelector::kCap;
  s.need = s.take_all ? 0 : staged_guess_rank(s.len, f.k);
  return s;
}

// Step 1: the guess tau from the segment's 2,048 evenly spaced samples, read from the
// cluster's stages of the row (`stage`: this CTA's, the same offset in every CTA) into
// st.cand; 0 when none is taken. Block-wide.
template <class Cluster>
__device__ uint64_t segment_guess(const Cluster& cluster, RowSelector::Storage& st, float* stage, const Segment& s,
                                  int64_t chunk) {
  if (s.need <= 0) return 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = int(threadIdx.x) * 4 + j;
    const int64_t p = s.lo + int64_t(i) * s.len / RowSelector::kTile;
    const int64_t owner = (p - s.seg0) / chunk;
    const float* remote = cluster.map_shared_rank(stage, unsigned(owner));
    st.cand[i] = rank_key(remote[p - s.seg0 - owner * chunk], int32_t(p));
  }
  __syncthreads();
  const uint32_t n = uint32_t(s.need);
  return RowSelector::Select::floor_of_kth(st.select, st.cand, RowSelector::kTile, n, n + n / 2, int(threadIdx.x));
}

// Step 2's split of one CTA's stage (positions [c0, c1)): warp w takes float4 [wv0, wv1), runs
// of wper (a multiple of 32); cells [v_lo, v_hi) lie in the window.
struct StageRun {
  int32_t v_lo, v_hi, wper, wv0, wv1;
  __device__ StageRun(int64_t c0, int64_t c1, const Segment& s, int warp) {
    v_lo = int32_t(max(c0, s.lo) - c0);
    v_hi = int32_t(max(min(c1, s.hi) - c0, int64_t(0)));
    const WarpRun<kWarps, int32_t> wr(int32_t((c1 - c0 + 3) / 4), warp);
    wper = wr.per;
    wv0 = wr.lo;
    wv1 = wr.hi;
  }
};

// The warps' places among the CTA's candidates: each warp's count (in_warp) to warp_count
// after a barrier (its last readers are done), then *before = base + the counts of the warps
// below this one. Returns the CTA's total. Block-wide.
__device__ inline uint32_t warp_places(uint32_t in_warp, uint32_t base, uint32_t* warp_count, int warp, int lane,
                                       uint32_t* before) {
  __syncthreads();
  if (lane == 0) warp_count[warp] = in_warp;
  __syncthreads();
  uint32_t b = base, total = 0;
  for (int q = 0; q < kWarps; ++q) {
    b += q < warp ? warp_count[q] : 0u;
    total += warp_count[q];
  }
  *before = b;
  return total;
}

// Step 2 over one CTA's stage of the row (`stage`: this CTA's or, through distributed shared
// memory, another's), which holds positions [c0, c1): the rank keys of its scores in [lo, hi)
// and (unless take_all) >= f_tau, in position order at cand[base, base + count), written only
// when base + count <= kCap. Returns count. Block-wide; warp_count (kWarps words) is scratch,
// rewritten only after a barrier.
__device__ uint32_t stage_pass(const float* stage, int64_t c0, int64_t c1, const Segment& s, float f_tau,
                               uint64_t* cand, uint32_t base, uint32_t* warp_count) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const StageRun sr(c0, c1, s, warp);
  const int32_t v_lo = sr.v_lo, v_hi = sr.v_hi;
  const LaneRun run(sr.wv0, sr.wv1, sr.wper, lane);  // <= kPassBits / 4 float4 per lane
  const bool take_all = s.take_all;
  const uint64_t pass = run.pass(reinterpret_cast<const float4*>(stage), [&](const float4& v, int32_t i) {
    const float x[4] = {v.x, v.y, v.z, v.w};
    const int32_t e = i * 4;
    uint32_t b = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) b |= uint32_t(e + j >= v_lo && e + j < v_hi && (take_all || x[j] >= f_tau)) << j;
    return b;
  });
  const uint32_t in_warp = __reduce_add_sync(0xffffffffu, uint32_t(__popcll(pass)));
  uint32_t before;
  const uint32_t total = warp_places(in_warp, base, warp_count, warp, lane, &before);
  if (base + total <= uint32_t(RowSelector::kCap))
    put_passing(cand, before, pass, stage + int64_t(run.l0) * 4, int32_t(c0 + int64_t(run.l0) * 4), lane);
  return total;
}

// stage_pass for a pair's stages (chunk <= kFusedStagedPairMaxChunk: at most kHeldVec float4
// per lane), with the lane's float4 held in registers: every load is issued at once and the
// passing keys are written from the registers, with no second read of the stage. The other
// CTA's stage comes through distributed shared memory, whose latency stage_pass's loops pay
// per float4 and per candidate. Same outputs as stage_pass.
constexpr int kHeldVec = 8;
static_assert(cuda::kFusedStagedPairMaxChunk / 4 <= kHeldVec * kThreads, "a pair's chunk fits the lanes' registers");
__device__ uint32_t stage_pass_held(const float* stage, int64_t c0, int64_t c1, const Segment& s, float f_tau,
                                    uint64_t* cand, uint32_t base, uint32_t* warp_count) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const StageRun sr(c0, c1, s, warp);
  const int32_t v_lo = sr.v_lo, v_hi = sr.v_hi;
  const int32_t l0 = min(sr.wv0 + lane * (sr.wper / 32), sr.wv1), l1 = min(l0 + sr.wper / 32, sr.wv1);  // this lane's float4
  float4 v[kHeldVec];
#pragma unroll
  for (int i = 0; i < kHeldVec; ++i)
    if (l0 + i < l1) v[i] = reinterpret_cast<const float4*>(stage)[l0 + i];
  uint32_t pass = 0;  // bit 4 i + j: component j of v[i] passes
#pragma unroll
  for (int i = 0; i < kHeldVec; ++i) {
    const float x[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int32_t e = (l0 + i) * 4 + j;
      pass |= uint32_t(l0 + i < l1 && e >= v_lo && e < v_hi && (s.take_all || x[j] >= f_tau)) << (4 * i + j);
    }
  }
  const uint32_t mine = uint32_t(__popc(pass));
  const uint32_t incl = warp_inclusive_sum(mine, lane);
  const uint32_t in_warp = __shfl_sync(0xffffffffu, incl, 31);
  uint32_t before;
  const uint32_t total = warp_places(in_warp, base, warp_count, warp, lane, &before);
  if (base + total <= uint32_t(RowSelector::kCap)) {
    const uint32_t at = before + incl - mine;
#pragma unroll
    for (int i = 0; i < kHeldVec; ++i) {
      const float x[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int b = 4 * i + j;
        if ((pass >> b) & 1u)
          cand[at + uint32_t(__popc(pass & ((1u << b) - 1u)))] = rank_key(x[j], int32_t(c0 + (l0 + i) * 4 + j));
      }
    }
  }
  return total;
}

// Step 4: every in-window score of the segment through the selector, from every CTA's stage
// of the row. Block-wide.
template <class Cluster>
__device__ void stream_segment(const Cluster& cluster, RowSelector& sel, float* stage, const Segment& s, int64_t chunk,
                               uint32_t ctas) {
  for (uint32_t q = 0; q < ctas; ++q) {
    const float* remote = cluster.map_shared_rank(stage, q);
    const int64_t q0 = min(s.seg0 + int64_t(q) * chunk, s.seg1), q1 = min(q0 + chunk, s.seg1);
    const int64_t v0 = max(q0, s.lo), v1 = min(q1, s.hi);  // CTA q's in-window positions
    for (int64_t p0 = q0; p0 < q1; p0 += RowSelector::kTile) {
      uint64_t rk[4];
      bool valid[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t p = p0 + j * kThreads + threadIdx.x;
        valid[j] = p >= v0 && p < v1;
        rk[j] = valid[j] ? rank_key(remote[p - q0], int32_t(p)) : 0ull;
      }
      sel.push_tile(rk, valid);
    }
  }
}

// The end of steps 3-4 in the CTA that finishes the row (its selector `sel` or its gathered
// candidates st.cand[0, n)): the row's outputs (S = 1; by rank after a block radix sort,
// `stage` as scratch) or, S > 1, its top K to the slot of segment `segment`, in position order.
// Reads no other CTA's shared memory. Block-wide.
__device__ void finish_segment(const ScorerArgs& a, const StagedParams& f, StagedShared& ss, RowSelector::Storage& st,
                               RowSelector& sel, float* stage, const GroupRow& gr, const Segment& s, bool selected,
                               uint32_t n, bool nan, int64_t segment) {
  const int64_t row = gr.row;
  const RowWindow w{gr.request, gr.start, gr.end, gr.status};
  const uint32_t status = gr.status | (nan ? row_status::kHasNaN : 0u);
  const TopKArgs ta{nullptr, 0, a.rows, a.cache.pages, f.k, f.order, f.out, 1, nullptr};
  NoClock clock;
  long long t = 0;
  if (f.segments == 1) {
    if (selected) {
      write_gathered_row(ta, row, w, status, st, st.cand, n, reinterpret_cast<uint64_t*>(stage), ss.warp_count, clock,
                         t);
    } else {
      uint64_t sorted[RowSelector::kSortItems];
      const int32_t kept = sel.finish(f.order == OutputOrder::kRank, sorted, position_bits(ta), w.start, w.length());
      write_row(ta, row, w, status, kept, sorted);
    }
    return;
  }
  const int64_t slot = row * f.segments + segment;
  uint64_t* keys = f.ws.keys + slot * f.k;
  uint32_t kept;
  if (selected) {
    kept = keep_gathered(st, st.cand, n, uint32_t(f.k), ss.warp_count, clock, t,
                         [&](uint32_t i, uint64_t key) { keys[i] = key; });
  } else {  // in position order too, as the ordered merge reads the slots
    uint64_t sorted[RowSelector::kSortItems];
    kept = uint32_t(sel.finish(false, sorted, position_bits(ta), s.lo, s.len));
#pragma unroll
    for (int i = 0; i < RowSelector::kSortItems; ++i) {
      const uint32_t idx = threadIdx.x * RowSelector::kSortItems + i;
      if (idx < kept) keys[idx] = sorted[i];
    }
  }
  if (threadIdx.x == 0) {
    f.ws.counts[slot] = kept;
    f.ws.status[slot] = status;  // (the cluster merge takes the row check from here)
  }
}

// One row of the CTA's group, after the scoring: steps 1-4 of the file comment over the row's
// segment, whose scores lie in `stage` (this CTA's chunk; cells outside the row's window are
// never read). Every CTA of the cluster calls it for each row of its group in turn, the same
// rows in the same order; CTA 0 finishes each (the others go on to the next row and meet it at
// that row's second cluster barrier). first_row: whether the scoring's stages still need the
// cluster barrier that publishes them; a later row starts with a CTA barrier instead (without
// it, CTA 0's fast warps wrote the next row's samples over candidates that its slow warps were
// still emitting: bench sweeps caught wrong first rows, docs/experiments.md 2026-11-30).
template <class Clock>
__device__ void select_row(const cg::cluster_group& cluster, const ScorerArgs& a, const StagedParams& f,
                           StagedShared& ss, RowSelector::Storage& st, float* stage, const GroupRow gr,
                           bool first_row, Clock& prof, long long& pt) {
  const uint32_t rank = cluster.block_rank(), ctas = cluster.num_blocks();
  const Segment s = segment_of(a, f, ss.split, rank, ctas, gr);
  if (first_row)
    cluster.sync();  // every stage of the segment is written
  else  // CTA 0's finish of the row before reads st.cand and ss.warp_count until every warp is here
    __syncthreads();

  // 1. The guess, from the same samples in every CTA.
  const uint64_t tau = segment_guess(cluster, st, stage, s, a.g.chunk);
  const bool guessed = s.need > 0 && uint32_t(tau >> 32) != 0u;  // (a guess at the NaN level falls back)
  prof.lap(kStagedProfileGuess, pt);

  // 2. This CTA's candidates in position order.
  uint32_t total = 0;
  if (s.take_all || guessed)
    total = stage_pass(stage, ss.c0, ss.c1, s, guessed ? key_to_float(uint32_t(tau >> 32)) : 0.0f, st.cand, 0,
                       ss.warp_count);
  if (threadIdx.x == 0) {
    ss.count = total;
    ss.nan = gr.nan;
  }
  prof.lap(kStagedProfilePasses, pt);
  cluster.sync();  // every CTA's candidates, count and NaN flag are published

  // 3. The same decision in every CTA: the segment's candidates, when they hold its top K.
  uint32_t n = 0;
  bool nan = false;  // n <= kCap below bounds every CTA's count too (counts <= chunk: no overflow)
  for (uint32_t q = 0; q < ctas; ++q) {
    const StagedShared* r = cluster.map_shared_rank(&ss, q);
    const uint32_t c = r->count;
    if (rank == 0 && threadIdx.x == 0) ss.first[q] = n;
    n += c;
    nan |= r->nan != 0u;
  }
  const bool selected = (s.take_all || guessed) && n <= uint32_t(RowSelector::kCap) &&
                        (s.take_all || n >= uint32_t(f.k));
  RowSelector sel(st, f.k);  // step 4's (CTA 0); it leaves the candidates alone
  if (rank == 0) {
    if (selected)  // in CTA order: position order
      gather_cluster_candidates(cluster, st.cand, ss.first, ctas, n);
    else  // 4. every in-window score of the segment through the selector, from every stage
      stream_segment(cluster, sel, stage, s, a.g.chunk, ctas);
  }
  cluster.sync();  // CTA 0 has read every other CTA's shared memory for this row
  prof.lap(kStagedProfileGather, pt);
  if (rank != 0 || gr.row < 0) return;
  finish_segment(a, f, ss, st, sel, stage, gr, s, selected, n, nan, ss.split / ctas);
  prof.lap(kStagedProfileFinish, pt);
}

// A pair in a cluster of two: CTA r selects row r alone, steps 1-4 over
// both CTAs' stages of the row (its own and, through distributed shared memory, the other's),
// so the rows' guesses, passes and finishes run side by side instead of in turns, and no
// candidate list crosses CTAs. `stage`: row 0's stage; row r's lies r x stride floats on.
template <class Clock>
__device__ void select_own_row(const cg::cluster_group& cluster, const ScorerArgs& a, const StagedParams& f,
                               StagedShared& ss, RowSelector::Storage& st, float* stage, int32_t stride, Clock& prof,
                               long long& pt) {
  const uint32_t rank = cluster.block_rank(), ctas = cluster.num_blocks();
  const int64_t chunk = a.g.chunk;
  cluster.sync();  // every stage and every CTA's copy of the rows (their NaN flags) are written
  const GroupRow gr = ss.rows[rank];
  float* own = stage + int64_t(rank) * stride;  // row `rank`'s stage (the same offset in every CTA)
  const Segment s = segment_of(a, f, ss.split, rank, ctas, gr);
  const uint64_t tau = segment_guess(cluster, st, own, s, chunk);
  const bool guessed = s.need > 0 && uint32_t(tau >> 32) != 0u;  // (a guess at the NaN level falls back)
  prof.lap(kStagedProfileGuess, pt);

  uint32_t n = 0;  // (counts <= chunk each: no overflow; n > kCap: not written, not selected)
  if (s.take_all || guessed) {
    const float f_tau = guessed ? key_to_float(uint32_t(tau >> 32)) : 0.0f;
    for (uint32_t q = 0; q < ctas; ++q) {  // in CTA order: position order
      const int64_t q0 = min(s.seg0 + int64_t(q) * chunk, s.seg1), q1 = min(q0 + chunk, s.seg1);
      const float* q_stage = q == rank ? own : cluster.map_shared_rank(own, q);
      n += chunk <= cuda::kFusedStagedPairMaxChunk  // (the plans' bound for pairs)
               ? stage_pass_held(q_stage, q0, q1, s, f_tau, st.cand, n, ss.warp_count)
               : stage_pass(q_stage, q0, q1, s, f_tau, st.cand, n, ss.warp_count);
    }
  }
  bool nan = false;
  for (uint32_t q = 0; q < ctas; ++q) nan |= cluster.map_shared_rank(&ss, q)->rows[rank].nan != 0u;
  __syncthreads();  // st.cand is written, ss.warp_count read (the finish rewrites it)
  prof.lap(kStagedProfilePasses, pt);
  const bool selected = (s.take_all || guessed) && n <= uint32_t(RowSelector::kCap) &&
                        (s.take_all || n >= uint32_t(f.k));
  RowSelector sel(st, f.k);
  if (!selected) stream_segment(cluster, sel, own, s, chunk, ctas);
  cluster.barrier_arrive();  // this CTA reads no other CTA's shared memory from here on
  prof.lap(kStagedProfileGather, pt);
  if (gr.row >= 0) finish_segment(a, f, ss, st, sel, own, gr, s, selected, n, nan, ss.split / ctas);
  prof.lap(kStagedProfileFinish, pt);
  cluster.barrier_wait();  // no CTA leaves while the other may read its stages
}

// Key tiles in the scorer's ring: a pair's 7 (not 8) leave room for two stages of
// kFusedStagedPairMaxChunk = 16,384 positions beside it (fp8, 128 columns).
template <int kRows>
constexpr int kStagedRing = kRows == 2 ? 7 : kScorerStages;

// Named barriers 9-12: warpgroup w's warps before their second setmaxnreg (the scorer's own
// are 1-8).
constexpr int kRegsBarrier = 9;

template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
__global__ void __launch_bounds__(kThreads, 1)
    fused_staged_kernel(const __grid_constant__ ScorerArgs a, const __grid_constant__ StagedParams f) {
  using Core = PagedScorer<kFormat, kHeads, kRows, kAccuracy, 3, kStagedRing<kRows>>;
  static_assert(Core::kThreads == kThreads);
  extern __shared__ uint8_t smem_raw[];
  auto& sm = carve<typename Core::Smem>(smem_raw);
  uint8_t* base = reinterpret_cast<uint8_t*>(&sm);
  float* stage = reinterpret_cast<float*>(base + stage_offset<typename Core::Smem>());  // [kRows][stride]
  const int32_t stride = int32_t(stage_stride(a.g.chunk));
  __shared__ StagedShared ss;
  StagedClock prof;
  long long pt = prof.now();
  {
    const int64_t cta = blockIdx.x;
    const int64_t group = a.g.groups - 1 - cta / a.g.splits;
    const int64_t split = cta % a.g.splits;
    const int64_t c0 = min(split * a.g.chunk, a.rows.max_context), c1 = min(c0 + a.g.chunk, a.rows.max_context);
    if (threadIdx.x == 0) {
      ss.split = split;
      ss.c0 = c0;
      ss.c1 = c1;
    }
    Core::setup(a, sm, group, c0, c1);  // ends with a CTA barrier

    // A warpgroup's warps synchronize between two setmaxnreg (PTX ISA: "all warps in the
    // warpgroup must synchronize explicitly before executing subsequent setmaxnreg
    // instructions"): a named barrier per warpgroup (kRegsBarrier + warpgroup). Without it
    // a producer that ran ahead of its neighbours (2026-12-02: the fp8 producer on
    // SourceAhead) left barrier 0 one phase off between warpgroups, and the selection hung.
    const int wg = int(threadIdx.x) / 128;
    if (wg == 0) {
      if constexpr (Core::kSplitRegs && kMoveRegs) ptx::regs_dealloc<kStagedProducerRegs>();
      Core::produce(a, sm);
      if constexpr (Core::kSplitRegs && kMoveRegs) {
        ptx::named_barrier(kRegsBarrier, 128);
        ptx::regs_alloc<128>();
      }
    } else {
      if constexpr (Core::kSplitRegs && kMoveRegs) ptx::regs_alloc<kConsumerRegs>();
      StageSink sink{stage, int32_t(c0), stride};
      Core::consume(sm, wg - 1, sink);
      if constexpr (Core::kSplitRegs && kMoveRegs) {
        ptx::named_barrier(kRegsBarrier + wg, 128);
        ptx::regs_dealloc<128>();
      }
    }
  }
  __syncthreads();  // every score is staged; the consumers' NaN flags are in sm.rows
  // S > 1: the merge (a programmatic dependent launch) may start once every CTA is here: it
  // resolves its row's window during the selection below, then waits for this grid.
  if (f.segments > 1) ptx::launch_dependents();
  // (The CTA's coordinates come back from shared memory: nothing but the scorer's own state
  // stays in registers through the scoring.)
  static_assert(kRows <= 2, "StagedShared holds two rows");
  if (threadIdx.x < kRows) ss.rows[threadIdx.x] = sm.rows[threadIdx.x];
  if (threadIdx.x < Core::kStages) {  // their words become the selector's
    ptx::mbar_inval(&sm.full[threadIdx.x]);
    ptx::mbar_inval(&sm.empty[threadIdx.x]);
  }
  __syncthreads();
  auto& st = *reinterpret_cast<RowSelector::Storage*>(base);  // aliases the scorer's shared memory
  prof.lap(kStagedProfileScore, pt);
  const cg::cluster_group cluster = cg::this_cluster();
  if (kRows == 2 && cluster.num_blocks() == 2) {
    select_own_row(cluster, a, f, ss, st, stage, stride, prof, pt);
  } else {
#pragma unroll 1
    for (int r = 0; r < kRows; ++r)
      select_row(cluster, a, f, ss, st, stage + int64_t(r) * stride, ss.rows[r], r == 0, prof, pt);
  }
  prof.flush(threadIdx.x == 0, staged_profile_sums());
}

// The exact mode's scorer layout, the larger one (fp8: f16 queries): it sizes both modes'
// launches; a kProduction kernel carves its own, smaller, from the same base.
template <CacheFormat kFormat, int kHeads, int kRows>
using StagedSmem = typename PagedScorer<kFormat, kHeads, kRows, ScoreAccuracy::kExact, 3, kStagedRing<kRows>>::Smem;
static_assert(staged_smem_bytes<StagedSmem<CacheFormat::kFp8E4M3, 64, 2>>(cuda::kFusedStagedPairMaxChunk, 2) +
                      sizeof(StagedShared) <= 227 * 1024,
              "a pair's widest stages fit a Hopper CTA's 227 KiB");

// The group shapes this kernel is built for (heuristics.h fused_staged_rows_per_cta).
template <CacheFormat kFormat, int kHeads, int kRows>
constexpr bool kStagedShape =
    kRows == 1 || (kRows == 2 && cuda::fused_staged_rows_per_cta(kFormat == CacheFormat::kFp8E4M3, 2) == 2);

// fn.template operator()<kFormat, kHeads, kRows>() for a group shape of this kernel; else `none`.
template <class R, class Fn>
R with_staged_shape(CacheFormat format, int32_t heads, int32_t rows, R none, Fn&& fn) {
  return with_scorer_shape(format, heads, rows, none, [&]<CacheFormat kF, int kH, int kR>() -> R {
    if constexpr (kStagedShape<kF, kH, kR>)
      return fn.template operator()<kF, kH, kR>();
    else
      return none;
  });
}

template <CacheFormat kFormat, int kHeads, int kRows>
cudaError_t launch(const ScorerArgs& a, const StagedParams& f, int cluster, cudaStream_t stream) {
  auto kernel = a.accuracy == ScoreAccuracy::kProduction
                    ? fused_staged_kernel<kFormat, kHeads, kRows, ScoreAccuracy::kProduction>
                    : fused_staged_kernel<kFormat, kHeads, kRows, ScoreAccuracy::kExact>;
  const size_t smem = staged_smem_bytes<StagedSmem<kFormat, kHeads, kRows>>(a.g.chunk, kRows);
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess)
    return e;
  return launch_clusters(kernel, a.g.ctas(), kThreads, smem, cluster, stream, a, f);
}

}  // namespace

size_t fused_staged_smem_bytes(CacheFormat format, int32_t heads, int32_t rows_per_cta, int64_t chunk) {
  const size_t smem = with_staged_shape(format, heads, rows_per_cta, SIZE_MAX, [&]<CacheFormat kF, int kH, int kR>() {
    return staged_smem_bytes<StagedSmem<kF, kH, kR>>(chunk, kR);
  });
  return smem == SIZE_MAX ? smem : smem + sizeof(StagedShared);  // + the static shared memory
}

bool fused_staged_profile(unsigned long long (&out)[kFusedStagedProfileSlots], bool reset) {
#if FI_FUSED_PROFILE
  return read_phase_sums(g_staged_profile, out, reset);
#else
  (void)out;
  (void)reset;
  return false;
#endif
}

cudaError_t fused_staged_topk(const IndexerProblem& p, const TopKOutputs& out, const cuda::FusedStagedPlan& plan,
                              void* workspace, cudaStream_t stream) {
  const int64_t rows = p.rows.rows();
  if (rows == 0) return cudaSuccess;
  cuda::ScorerPlan g;
  g.rows_per_group = plan.rows_per_cta;  // (the planner checked: a request's next_n rows)
  g.group_stride = plan.rows_per_cta;
  g.groups = rows / plan.rows_per_cta;
  g.splits = int32_t(plan.ctas_per_row());
  g.max_splits = g.splits;
  g.chunk = plan.chunk;
  const ScorerArgs a = scorer_args(p, g);
  StagedParams f;
  f.out = out;
  f.k = p.k;
  f.order = p.order;
  f.segments = plan.segments;
  f.ws = plan.segments > 1 ? SplitCandidates::in(workspace, rows, plan.segments, p.k) : SplitCandidates{};
  const cudaError_t e = with_staged_shape(p.cache.format, p.queries.num_heads, plan.rows_per_cta, cudaErrorInvalidConfiguration,
                                          [&]<CacheFormat kF, int kH, int kR>() {
                                            return launch<kF, kH, kR>(a, f, plan.cluster, stream);
                                          });
  if (e != cudaSuccess || plan.segments <= 1) return e;
  TopKArgs m{nullptr, 0, p.rows, p.cache.pages, p.k, p.order, out, plan.segments, workspace};
  return topk_merge_splits(m, stream, true, plan.merge_ctas);
}

}  // namespace flashindexer::sm90
