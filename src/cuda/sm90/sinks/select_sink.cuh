// flashindexer sm_90a: the fused operator's selecting sink (kernels/fused_topk.cu's epilogue
// of the scoring core): per-row candidate buffers and thresholds in shared memory, the
// steps' votes and compactions, the sampled start's guess, and the finish (the last exact
// compaction, the position or rank order, the output writes or the split's local top K).
// The algorithm, warp roles and shared-memory budget are in kernels/fused_topk.cu's header.
// Included by fused_topk.cu alone: its definitions keep the kernel's internal linkage.
#pragma once

#include "core/rank_key.h"
#include "cuda/sm90/common/diagnostics.h"
#include "cuda/sm90/common/phase_clock.cuh"
#include "cuda/sm90/kernels/fused_topk.h"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "cuda/sm90/scorer/paged_scorer.cuh"
#include "cuda/sm90/scorer/sampled_start.h"
#include "cuda/sm90/select/bitmap_order.cuh"
#include "cuda/sm90/select/bitonic_sort.cuh"
#include "cuda/sm90/select/radix_select.cuh"
#if FI_CHECK_BARRIER_PHASES || FI_BARRIER_FUZZ  // diagnostic builds only (its counter is a device global)
#include "cuda/sm90/common/barrier_checks.cuh"
#endif

namespace flashindexer::sm90 {
namespace {  // NOLINT(google-build-namespaces): one includer, the kernel's translation unit

constexpr int kConsumers = 256;

#if FI_CHECK_BARRIER_PHASES
using ConsumerSync = PhaseCheckedSync<1, kConsumers>;
#elif FI_BARRIER_FUZZ
using ConsumerSync = FuzzedSync<NamedSync<1, kConsumers>>;
#else
using ConsumerSync = NamedSync<1, kConsumers>;
#endif
using Select = RadixSelect<kConsumers, ConsumerSync>;
// N = 256: each consumer warpgroup scores whole rows of its own (paged_scorer.cuh), so it
// compacts them alone (named barriers 2, 3), never stalling the other warpgroup. Two of
// these 1024-bin selectors take the room of one 2048-bin one.
#if FI_BARRIER_FUZZ
using WgSync = FuzzedSync<WarpgroupSync<2, 1>>;
#else
using WgSync = WarpgroupSync<2, 1>;
#endif
using WgSelect = RadixSelect<128, WgSync, 1024>;
using Sort = BitonicSort<kConsumers, ConsumerSync>;
using Order = BitmapOrder<Select>;
constexpr int kOrderItems = Sort::kItems;  // a row's final keys (<= Sort::kMaxKeys) per consumer thread
// Groups of N = 128 in the FP16 chain run three consumer warpgroups on every third tile
// (cuda::fused_consumer_wgs). The stream's votes, guess and compactions then meet all 384
// consumer threads on named barrier 6 (StreamSync); the selection itself (Select) and the
// finish stay on warpgroups 1-2 (barrier 1), the third waiting at barrier 6 meanwhile.
// Measured (docs/experiments.md, 2026-12-03), 8,192 x 65,536: V3.2 19.21 -> 17.66 ms, GLM-5 11.84
// -> 11.07; V3.2 decode B128 / B32 x 131,072 n2 level (graph-replayed).
template <int kWgs>
using StreamSync = std::conditional_t<kWgs == 2, ConsumerSync, NamedSync<6, 128 * kWgs>>;
// FI_FUSED_WIDE_SELECT = 1 (not yet measured on a GPU): four consumer warpgroups select on
// all 512 consumer threads (barrier 6) during the stream and in the finish's last
// compactions; the third and fourth otherwise wait at the barrier while warpgroups 1-2 select.
using WideSelect = RadixSelect<512, StreamSync<4>>;
template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy>
constexpr int fused_consumer_wgs() {
  return cuda::fused_consumer_wgs(kFormat == CacheFormat::kFp8E4M3, kAccuracy == ScoreAccuracy::kExact, kHeads, kRows);
}
// The longest window the finish orders by a bitmap in the key ring: one bit and one 32-bit
// prefix per 32 positions each take half of it (4 x its bytes: 262,144 positions in 64 KiB).
template <class Smem>
constexpr int64_t kOrderMaxLen = int64_t(sizeof(Smem::k)) * 4;

// Deferred votes (where both warpgroups score every row: N = 256 alternate tiles, N < 256): at
// each vote a thread publishes its flag (a shared tag) and arrives on an mbarrier, then waits
// for the *previous* vote's arrivals and reads its flags, so the two warpgroups no longer
// meet at every vote (only where a row compacts, and at the guess). A row may then gain three
// intervals of keys past the limit before it compacts (cuda::fused_vote_plan reserves them).
// Measured against votes that join the warpgroups: V4-Pro prefill 15.65 -> 15.16 ms,
// V4-Flash 15.06 -> 14.69, GLM-5 12.70 -> 11.86, decode level (docs/experiments.md, 2026-12-03).

template <int kRows>
struct SelectState {
  union {
    Select::Storage all;       // the whole consumer group: rows shared by both warpgroups; the finish
    WgSelect::Storage wg[2];   // a warpgroup's own rows (N = 256)
    WideSelect::Storage wide;  // four consumer warpgroups: the stream's guesses and compactions
  } select;
  uint64_t tau[kRows];    // a row's threshold: only keys above it are appended
  uint32_t count[kRows];  // a row's candidates
  uint32_t guessed[kRows];  // 1: tau started from the sample's guess (sampled_start.h)
  uint32_t vote_tag[4];   // slot v % 4: v + 1 once a thread voted "a row passed the limit" at vote v
  uint64_t vote_bar[4];   // slot v % 4: the consumer threads' arrivals at vote v (256 or 384)
};

// Offsets from the scorer's (1024-aligned) shared memory: selection state, then the
// candidates [R, cap] (rank keys).
template <class Smem, int kRows>
struct FusedLayout {
  static constexpr size_t kState = (sizeof(Smem) + 15) / 16 * 16;
  static constexpr size_t kKeys = kState + (sizeof(SelectState<kRows>) + 15) / 16 * 16;
  static constexpr size_t kFixed = 1024 + kKeys;  // + the alignment slack of the dynamic base
  static size_t bytes(int32_t cap) { return kFixed + size_t(kRows) * size_t(cap) * 8; }
};

static_assert(FI_FUSED_VOTES || FI_FUSED_PUTS != 1, "without votes the candidate buffers would overflow");
static_assert(sizeof(WideSelect::Storage) <= sizeof(WgSelect::Storage[2]), "the wide selector takes no more room");
// FI_FUSED_PROFILE: what consumer thread 0 of every CTA adds up (FusedProfile names the slots).
#if FI_FUSED_PROFILE
__device__ unsigned long long g_fused_profile[kFusedProfileSlots];
__device__ unsigned long long* fused_profile_sums() { return g_fused_profile; }
#else
__device__ unsigned long long* fused_profile_sums() { return nullptr; }
#endif
using FusedClock = PhaseClock<kFusedProfileSlots, FI_FUSED_PROFILE != 0>;

struct FusedParams {
  TopKOutputs out;
  int32_t k;
  int32_t cap;         // candidate keys per row
  int32_t vote_every;  // steps between votes (a power of two): cap >= K + vote_every x step_puts
  uint32_t vote_limit; // a row past it compacts at the next vote (cuda::fused_vote_limit)
  bool by_rank;        // output order
  SplitCandidates ws;  // splits > 1
  int32_t max_sample;  // tiles sampled first (sampled_start.h); 0: plain order (and in the repair launch)
  uint32_t* repair;    // [rows] max_sample > 0: kRepair for a row whose guess failed (underfill), else 0 / kGuessHeld
  bool repair_launch;  // the second launch: only groups with a kRepair row, without sampling
};

// Per-row flags in the workspace (FusedParams::repair).
constexpr uint32_t kGuessHeld = 2;  // the guess was used and at least K keys were >= it
constexpr uint32_t kRepair = 1;     // the guess was above the K-th key: scored again without it

// Groups of N = 256 on alternate tiles (PagedScorer's kAlternate256) where the candidate
// buffers hold at least 2 K keys and 1,024 above K (cuda::fused_takes_alternate256): both
// warpgroups score every row, so a step is a pair of tiles, the votes and compactions take all
// 256 consumer threads, and a step samples a pair of tiles (the guess taken by all 256
// consumer threads). Otherwise the warpgroups share tiles: each owns rows, after a sampled
// start of single tiles. Both kernels are built for
// every group of 256; the host picks one per call (fused_topk). Measured (docs/experiments.md, 2026-12-01), 8,192 x
// 65,536: V4-Pro 18.27 -> 16.79 ms, V4-Flash 18.04 -> 15.90, V4-Pro x 196,608 52.89 -> 46.33.
// The sampled start on pairs cuts the compactions per CTA from 28.2 to 7.6 at V4-Pro: 8,192 x
// 65,536 V4-Pro 16.44 -> 15.66 ms, V4-Flash 15.62 -> 15.29, V4-Pro x 196,608 44.97 -> 44.51
// (docs/experiments.md, 2026-12-03).
constexpr uint32_t step_puts(int heads, int rows, bool alternate, int consumer_wgs) {
  return uint32_t(cuda::fused_step_puts(heads, rows, alternate, consumer_wgs));
}

// kSampled: the tile order may start with a sample, whose guess comes at the step where the
// sample ends (with kOwnRows a step is one tile, otherwise one tile per consumer warpgroup).
// kWgs: the consumer warpgroups (3, 4: warpgroups past 2 append and vote, and wait out the
// selections).
template <int kRows, uint32_t kStepPuts, bool kOwnRows, bool kSampled = kOwnRows, int kWgs = 2>
struct SelectSink {
  static_assert(kWgs == 2 || ((kWgs == 3 || kWgs == 4) && !kOwnRows), "more consumer warpgroups: rows scored by all");
  // Tiles per step (without kOwnRows): one per consumer warpgroup, or one per pair of them
  // where four share tiles.
  static constexpr uint32_t kStepTiles = kStepPuts / 64;
  using Stream = StreamSync<kWgs>;
  // The stream's selector (guesses, compactions): every consumer thread where four
  // warpgroups consume (WideSelect), else warpgroups 1-2 (Select).
  static constexpr bool kWideSelect = kWgs == 4 && FI_FUSED_WIDE_SELECT;
  using StreamSelect = std::conditional_t<kWideSelect, WideSelect, Select>;
  __device__ typename StreamSelect::Storage& stream_select() {
    if constexpr (kWideSelect) {
      return st.select.wide;
    } else {
      return st.select.all;
    }
  }
  // A selection during the stream with a third (and fourth) warpgroup: after a barrier of
  // every consumer thread, f on the stream's selector's threads, then a second barrier keeps
  // a third warpgroup's appends out until f is done. (With two warpgroups the callers sync on barrier 1, and
  // Select's own barriers order the rest: written apart so that their SASS stays as tested.)
  template <class F>
  __device__ void selecting(int t, F&& f) {
    Stream::sync();
    if (kWideSelect || t < kConsumers) f();
    Stream::sync();
  }
  static constexpr bool kLockstep = true;
  SelectState<kRows>& st;
  uint64_t* keys;  // [kRows, cap]
  int32_t cap, k;
  uint32_t vote_mask;  // vote_every - 1
  uint32_t limit;      // FusedParams::vote_limit
  bool crossed = false;  // kOwnRows: since the last vote, one of this thread's appends took a row past limit
  uint32_t vote_next = 0;  // otherwise: the next vote to be cast (the same on every consumer thread)
  uint32_t dropped = 0;  // FI_FUSED_PUTS = 2: the keys that beat tau (read by the votes, so kept)
  FusedClock clock;

  // After the sample (step sm.order.sample, a vote step): each own row with enough sample
  // keys keeps its m best (m = guess_rank) and takes the m-th as tau. The sample phase
  // appends every score (tau = 0) and never compacts (max_sample x kStepPuts <= the vote
  // limit), so count[r] is the row's sample size. Warpgroup-wide (N = 256, own rows).
  // Without kOwnRows: all rows, by all 256 consumer threads.
  template <class Smem>
  __device__ void guess(Smem& sm, int t) {
    if constexpr (kOwnRows) {
      const int cw = t >> 7;
      WgSync::sync();  // the sample's appends are settled
      guess_rows<WgSelect>(sm, st.select.wg[cw], cw * (kRows / 2), kRows / 2, t & 127);
    } else {
      if constexpr (kWgs == 2) {
        ConsumerSync::sync();  // the sample's appends are settled
        guess_rows<Select>(sm, st.select.all, 0, kRows, t);
      } else {
        selecting(t, [&] { guess_rows<StreamSelect>(sm, stream_select(), 0, kRows, t); });
      }
    }
  }
  template <class Sel, class Smem>
  __device__ void guess_rows(Smem& sm, typename Sel::Storage& s, int r0, int rows, int tid) {
    for (int r = r0; r < r0 + rows; ++r) {
      const GroupRow& gr = sm.rows[r];
      const uint32_t n = st.count[r];
      const int32_t m = guess_rank(k, n, int64_t(gr.end) - gr.start);
      if (m <= 0) continue;
      uint64_t* kr = keys + size_t(r) * cap;
      const uint64_t g = Sel::kth(s, kr, n, uint32_t(m), tid);
      if (tid == 0) {
        st.tau[r] = g;
        st.guessed[r] = 1;
      }
      Sel::compact(kr, n, g, &st.count[r], tid);
    }
  }

  // Every row is at or below limit when an interval starts and gains at most vote_every x
  // kStepPuts keys in it, so appends stay in bounds. The count passes limit with exactly one
  // append, whose index is limit: that thread remembers it for the vote (kOwnRows), or
  // publishes it in the next vote's tag at once (deferred votes: no flag to carry in a
  // register through the steps; deferred_vote says why the slot is free to write).
  __device__ void put(int r, int64_t, int64_t pos, float v) {
    if constexpr (FI_FUSED_PUTS == 2) {  // the score and its compare stay live, the append is dropped
      const uint64_t rk = rank_key(v, int32_t(pos));
      dropped += rk > st.tau[r] ? 1u : 0u;
    } else if constexpr (FI_FUSED_PUTS != 0) {
      const uint64_t rk = rank_key(v, int32_t(pos));
      if (rk > st.tau[r]) {
        const uint32_t i = atomicAdd(&st.count[r], 1u);
        keys[size_t(r) * cap + i] = rk;
        appended(i);
      }
    }
  }
  // An append took index i of its row: the one at limit is remembered (kOwnRows) or tags the
  // next vote (put's comment).
  __device__ void appended(uint32_t i) {
    if constexpr (kOwnRows) {
      crossed |= i == limit;
    } else if (i == limit) {
      atomicMax(&st.vote_tag[vote_next & 3], vote_next + 1);
    }
  }

  // put for a whole warp, converged (FI_FUSED_WARP_PUTS = 1, paged_scorer.cuh): each lane's score
  // v at pos for row r where `past` (in the row's window and not below gate g, a float);
  // mates: the lanes putting to the same row as this one. Scores above g are kept without
  // the 64-bit compare; the rest past g (equal to it, or NaN) take it. Each row's takers
  // append with one atomic, at consecutive indices from the warp's first lane up (exactly
  // one index is limit where the count passes it, as in put). Returns whether any lane of
  // the warp was past its gate: a warp with none (most tiles, once tau has risen) skips the
  // rest in one uniform branch.
  __device__ bool put_warp(int r, int64_t pos, float v, bool past, float g, uint32_t mates) {
    if (!__any_sync(~0u, past)) return false;
    if constexpr (FI_FUSED_PUTS != 1) {  // the timing builds' puts
      if (past) put(r, 0, pos, v);
    } else {
      const uint64_t rk = rank_key(v, int32_t(pos));
      const bool take = past && (v > g || rk > st.tau[r]);
      const uint32_t act = __ballot_sync(~0u, take) & mates;
      const int lane = int(threadIdx.x & 31);
      const int lead = __ffs(act) - 1;  // -1: none of the row's lanes takes (no lane is lead)
      uint32_t i0 = 0;
      if (lane == lead) i0 = atomicAdd(&st.count[r], uint32_t(__popc(act)));
      i0 = __shfl_sync(~0u, i0, lead & 31);
      if (take) {
        const uint32_t i = i0 + uint32_t(__popc(act & ((1u << lane) - 1u)));
        keys[size_t(r) * cap + i] = rk;
        appended(i);
      }
    }
    return true;
  }

  // Every vote_every-th step, all consumer threads vote: does a row hold more than limit keys?
  // The OR of the threads' crossed flags answers it exactly, since every append of the
  // interval precedes the barrier. Then (rarely) every thread reads the settled counts, a
  // second barrier keeps appends out until all have read them, and the rows past limit
  // compact back below it.
  // kOwnRows: the vote and the compactions involve only the warpgroup that owns the rows.
  // Whether step j votes (the rest return at once): the scorer's pipelined loop drains its
  // MMAs before such a step (paged_scorer.cuh, consume_tiles_s8_halves).
  // Returns whether the step guessed or compacted one of this thread's rows (their taus, and
  // so their gates, may have changed; the same on every thread that puts to the row).
  __device__ bool acts(int j) const { return FI_FUSED_VOTES && (uint32_t(j) & vote_mask) == 0; }
  template <class Smem>
  __device__ bool step(Smem& sm, int t, int j) {
    const uint32_t step_index = uint32_t(j);  // the loop's step: uniform, so the vote check is a uniform branch
    if (!acts(j)) return false;
    const long long t0 = clock.now();
    bool full = crossed;
    if constexpr (FI_FUSED_PUTS == 2) full = full || dropped == ~0u;
    crossed = false;
    if constexpr (kOwnRows) {
      if (step_index == uint32_t(sm.order.sample) && sm.order.sample > 0) {  // the sample stays within limit
        guess(sm, t);
        clock.add(kProfileGuessCycles, clock.now() - t0);
        clock.add(kProfileVotes, clock.now() - t0);
        return true;
      }
      constexpr int kMine = kRows / 2;
      const int cw = t >> 7, tw = t & 127, r0 = cw * kMine;
      const bool act = WgSync::any(full);
      if (act) {
        const uint32_t over = rows_over_limit<kMine>(r0);
        WgSync::sync();
        for (int r = 0; r < kMine; ++r)
          if ((over >> r) & 1) compact<WgSelect>(st.select.wg[cw], r0 + r, tw, keep_at_most(limit));
      }
      clock.add(kProfileVotes, clock.now() - t0);
      return act;
    } else {
      // The vote's index: the votes before it, one per vote_every steps (from the uniform
      // step index rather than a per-thread counter, which took a register of the loop).
      const uint32_t v = step_index >> __popc(vote_mask);
      const bool act = deferred_vote(v, full);
      vote_next = v + 1;
      if constexpr (kSampled) {
        if (kStepTiles * step_index == uint32_t(sm.order.sample) && sm.order.sample > 0) {
          const long long g0 = clock.now();
          guess(sm, t);
          clock.add(kProfileGuessCycles, clock.now() - g0);
          clock.add(kProfileVotes, clock.now() - t0);
          return true;
        }
      }
      if (act) {
        Stream::sync();  // every append before this vote is settled
        const uint32_t over = rows_over_limit<kRows>(0);
        if constexpr (kWgs == 2) {
          ConsumerSync::sync();  // every thread has read the counts
          compact_rows(over, t);
        } else {
          selecting(t, [&] { compact_rows(over, t); });  // every thread has read the counts
        }
      }
      clock.add(kProfileVotes, clock.now() - t0);
      return act;
    }
  }

  // Row r's gate (GatesPuts, paged_scorer.cuh): the high word of its tau. Only put, guess and
  // compact read or write tau, and a step that writes it returns true after a barrier that
  // every thread putting to the row passes, so the gate read after it is the tau of the
  // steps until the next such step.
  __device__ uint32_t gate(int r) const { return uint32_t(st.tau[r] >> 32); }

  // Vote v: arrives (its thread's appends that crossed the limit since vote v - 1 have tagged
  // slot v % 4 already, in put), then returns vote v - 1's answer (the same on every consumer
  // thread) once all consumer threads have cast it. Slot v % 4 is not written again (by an
  // append between votes v + 3 and v + 4) before every thread has read it: a thread past
  // vote v + 3 has seen every thread arrive at v + 2, after its read of v's slot (at vote
  // v + 1). (full: FI_FUSED_PUTS = 2's timing-only flag.)
  // One arrival per warp (lane 0 after __any_sync) measured 0.5-1.4% slower (2026-12-03).
  __device__ bool deferred_vote(uint32_t v, bool full) {
    if (full) atomicMax(&st.vote_tag[v & 3], v + 1);
    ptx::mbar_arrive(&st.vote_bar[v & 3]);  // release: the tag before the arrival
    if (v == 0) return false;
    const uint32_t p = v - 1;
    const long long w0 = clock.now();
    ptx::mbar_wait(&st.vote_bar[p & 3], (p >> 2) & 1);  // acquire
    clock.add(kProfileVoteWaitCycles, clock.now() - w0);
    return *reinterpret_cast<volatile uint32_t*>(&st.vote_tag[p & 3]) == v;
  }

  // The rows of bit mask `over`, each back below the limit (the stream's selector).
  __device__ void compact_rows(uint32_t over, int t) {
    for (int r = 0; r < kRows; ++r)
      if ((over >> r) & 1) compact<StreamSelect>(stream_select(), r, t, keep_at_most(limit));
  }

  // Bit r: row r0 + r holds more than limit keys.
  template <int kN>
  __device__ uint32_t rows_over_limit(int r0) const {
    uint32_t over = 0;
#pragma unroll
    for (int r = 0; r < kN; ++r) over |= uint32_t(st.count[r0 + r] > limit) << r;
    return over;
  }

  // A compaction during the stream keeps at most this many keys: three quarters of the room
  // above K stay free.
  __device__ uint32_t keep_at_most(uint32_t limit) const { return uint32_t(k) + (limit - uint32_t(k)) / 4; }

  // Keeps the keys >= a floor f <= the row's K-th best key, at least K and at most max_keep
  // of them (max_keep = K: exactly the K best); tau rises to f. Exact: every key of the
  // final top K is >= the current K-th, so >= f, and a later key equal to f is either kept
  // already or below the K-th (keys are unique). The whole group of Sel (tid: the thread's
  // index in it).
  template <class Sel>
  __device__ void compact(typename Sel::Storage& s, int r, int tid, uint32_t max_keep) {
    const long long t0 = clock.now();
    uint64_t* kr = keys + size_t(r) * cap;
    const uint32_t n = st.count[r];
    const uint64_t f = max_keep > uint32_t(k) ? Sel::floor_of_kth(s, kr, n, uint32_t(k), max_keep, tid)
                                              : Sel::kth(s, kr, n, uint32_t(k), tid);
    if (tid == 0) st.tau[r] = f;
    Sel::compact(kr, n, f, &st.count[r], tid);
    clock.add(kProfileCompactions, 1);
    clock.add(kProfileCompactedKeys, n);
    clock.add(kProfileCompactCycles, clock.now() - t0);
  }
};

// This CTA's group (in reverse order, as dense_logits_kernel), split and positions [c0, c1).
struct CtaSpan {
  int64_t group, split, c0, c1;
};
__device__ __forceinline__ CtaSpan cta_span(const ScorerArgs& a) {
  const int64_t cta = blockIdx.x;
  const int64_t split = cta % a.g.splits, c0 = split * a.g.chunk;
  return {a.g.groups - 1 - cta / a.g.splits, split, c0, min(c0 + a.g.chunk, a.rows.max_context)};
}

// Row gr's outputs from its sorted keys kr[0, n), padded to K (consumer group). The page
// table reads of a thread's kOutputs entries are issued together.
__device__ void write_row_outputs(const ScorerArgs& a, const TopKOutputs& o, const GroupRow& gr, const uint64_t* kr,
                                  uint32_t n, int32_t k, int t) {
  constexpr int kOutputs = 8;
  const float kNegInf = -__int_as_float(0x7F800000);
  for (int32_t i0 = 0; i0 < k; i0 += kConsumers * kOutputs) {
    int32_t pos[kOutputs];
    uint64_t key[kOutputs];
#pragma unroll
    for (int u = 0; u < kOutputs; ++u) {
      const int32_t i = i0 + u * kConsumers + t;
      const bool real = uint32_t(i) < n;
      key[u] = real ? kr[i] : 0ull;
      pos[u] = real ? rank_key_position(key[u]) : -1;
    }
    if (o.slots) {
      int32_t slot[kOutputs];
#pragma unroll
      for (int u = 0; u < kOutputs; ++u)
        slot[u] = pos[u] >= 0 ? int32_t(physical_slot(a.cache.pages, gr.request, pos[u])) : -1;
#pragma unroll
      for (int u = 0; u < kOutputs; ++u) {
        const int32_t i = i0 + u * kConsumers + t;
        if (i < k) o.slots[gr.row * o.slots_row_stride + i] = slot[u];
      }
    }
#pragma unroll
    for (int u = 0; u < kOutputs; ++u) {
      const int32_t i = i0 + u * kConsumers + t;
      if (i >= k) continue;
      o.positions[gr.row * o.positions_row_stride + i] = pos[u];
      if (o.scores) o.scores[gr.row * o.scores_row_stride + i] = pos[u] >= 0 ? rank_key_score(key[u]) : kNegInf;
    }
  }
}

// After the last step, with four consumer warpgroups: each row down to min(K, n) keys, row by
// row on all 512 consumer threads (WideSelect), before finish_rows on warpgroups 1-2.
template <int kRows, class Smem, class Sink>
__device__ void compact_rows_wide(const FusedParams& f, Smem& sm, Sink& sink, int t) {
  const uint32_t k = uint32_t(f.k);
  for (int r = 0; r < kRows; ++r) {
    if (sm.rows[r].row < 0) continue;
    if (sink.st.count[r] > 2 * k) sink.template compact<WideSelect>(sink.st.select.wide, r, t, k + k / 8);
    if (sink.st.count[r] > k) sink.template compact<WideSelect>(sink.st.select.wide, r, t, k);
  }
}

// After the last step (consumer group): each row's final min(K, n) keys, sorted and written
// as the outputs (one split) or handed to the merge (several).
template <int kRows, class Smem, class Sink>
__device__ void finish_rows(const ScorerArgs& a, const FusedParams& f, Smem& sm, Sink& sink, int64_t split, int t) {
  const TopKOutputs& o = f.out;
  if constexpr (kRows >= 2 && !Sink::kWideSelect) {
    // Exactly min(K, n) keys per row, two rows at a time: each warpgroup compacts its own
    // (WgSelect, named barriers 2-3; its storage aliases the idle Select storage). Many more
    // than K (a decode split whose chunk fit the buffer whole): first a one-pass floor to K
    // and a few, so the exact pass reads ~K keys, not n. Measured against one row at a time
    // by all 256 threads (docs/experiments.md, 2026-12-03): V4-Pro prefill finish 65.5K -> 54.5K
    // cycles per CTA, 15.69 -> 15.59 ms.
    const int cw = t >> 7, tw = t & 127;
    const uint32_t k = uint32_t(f.k);
    for (int r = cw; r < kRows; r += 2) {
      if (sm.rows[r].row < 0) continue;
      if (sink.st.count[r] > 2 * k) sink.template compact<WgSelect>(sink.st.select.wg[cw], r, tw, k + k / 8);
      if (sink.st.count[r] > k) sink.template compact<WgSelect>(sink.st.select.wg[cw], r, tw, k);
    }
    ConsumerSync::sync();
  }
  for (int r = 0; r < kRows; ++r) {
    const GroupRow gr = sm.rows[r];
    if (gr.row < 0) continue;
    // kRows = 1: compacted here, by all 256 threads. (For kRows >= 2 these checks are always
    // false; leaving them out under `if constexpr` changed ptxas's allocation of the V4
    // alternate-tile loop: V4-Pro prefill 15.53 -> 15.91 ms, docs/experiments.md, 2026-12-03.)
    const uint32_t k = uint32_t(f.k);
    if (sink.st.count[r] > 2 * k) sink.template compact<Select>(sink.st.select.all, r, t, k + k / 8);
    if (sink.st.count[r] > k) sink.template compact<Select>(sink.st.select.all, r, t, k);
    const uint32_t n = sink.st.count[r];
    if (f.repair != nullptr && !f.repair_launch && t == 0) {
      const uint32_t flag = sink.st.guessed[r] == 0 ? 0u : n < uint32_t(f.k) ? kRepair : kGuessHeld;
      f.repair[gr.row] = flag;
      sink.clock.add(kProfileGuessesHeld, flag == kGuessHeld ? 1u : 0u);
      sink.clock.add(kProfileRepairs, flag == kRepair ? 1u : 0u);
    }
    uint64_t* kr = sink.keys + size_t(r) * f.cap;
    if (a.g.splits > 1) {
      const int64_t slot = gr.row * a.g.splits + split;
      for (uint32_t i = t; i < n; i += kConsumers) f.ws.keys[slot * f.k + i] = kr[i];
      if (t == 0) {
        f.ws.counts[slot] = n;
        f.ws.status[slot] = gr.nan ? row_status::kHasNaN : 0u;
      }
      continue;
    }
    const long long t0 = sink.clock.now();
    const int64_t len = int64_t(gr.end) - gr.start;
    if (!f.by_rank && len <= kOrderMaxLen<Smem>) {
      // Ascending position by a bitmap of the window in the key ring (free once the scoring
      // is over): bits, then prefixes, each half of it.
      uint64_t v[kOrderItems];
#pragma unroll
      for (int u = 0; u < kOrderItems; ++u) {
        const uint32_t i = uint32_t(t + u * kConsumers);
        v[u] = i < n ? kr[i] : 0ull;
      }
      ConsumerSync::sync();  // every read of kr is over: it receives the ordered keys
      uint32_t* bits = reinterpret_cast<uint32_t*>(&sm.k[0][0]);
      Order::place(v, gr.start, len, bits, bits + sizeof(sm.k) / 8, kr, sink.st.select.all, t);
      ConsumerSync::sync();
    } else {
      uint32_t p = Sort::kMinKeys;
      while (p < n) p <<= 1;
      for (uint32_t i = n + t; i < p; i += kConsumers) kr[i] = 0ull;  // padding sorts last
      ConsumerSync::sync();
      if (f.by_rank) {
        Sort::sort_desc<true>(kr, p, t);
      } else {
        Sort::sort_desc<false>(kr, p, t);
      }
    }
    sink.clock.add(kProfileSortCycles, sink.clock.now() - t0);
    write_row_outputs(a, o, gr, kr, n, f.k, t);
    if (t == 0) {
      if (o.counts) o.counts[gr.row] = int32_t(n);
      if (o.status) o.status[gr.row] = gr.status | (gr.nan ? row_status::kHasNaN : 0u);
    }
    ConsumerSync::sync();  // the row's keys and the selection scratch are free again
  }
}

}  // namespace
}  // namespace flashindexer::sm90
