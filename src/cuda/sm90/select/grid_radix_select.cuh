// flashindexer sm_90a: the grid-wide radix select of TopK over logits, for rows too few to
// fill the GPU (decode: 1-128 rows of 64K-256K positions).
//
// Purpose: split each row's selection over `chunks` CTAs, so that one long row no longer
//   waits on one CTA's compactions. The finish (topk_over_logits.cu) selects and sorts with
//   the same BlockSelector as the one-CTA-per-row kernel, so outputs are the same bits.
// Algorithm, on the 32-bit float key f (rank_key.h) of every position of the window, in
//   launches after grid_zero_kernel clears the row state (graph-capturable; no grid barrier,
//   pitfall 7). Each launch is a programmatic dependent of the one before: it starts while
//   that one ends, does what needs none of its results (window checks, shared-memory set-up,
//   count 0: its whole chunk's histogram), then waits for it (ptx::wait_for_previous_kernel).
//   1. count_kernel<0>: each CTA counts its chunk's keys by f >> 20 in a shared histogram
//      and adds it to the row's global one; the row's last CTA (an atomic ticket) finds the
//      bin b1 holding the K-th key and how many keys lie above it.
//   2. count_kernel<1>: the same over the keys of bin b1, by (f >> 8) & 0xFFF: bin b2. Now
//      with t = (b1 << 12) | b2 and p = f >> 8: A < K keys have p > t, and the K - A still
//      needed are the best of the E >= K - A keys with p == t.
//   3. collect_kernel: keys with p > t go to the row's selected list (exactly A of them),
//      keys with p == t to a tie list of kTopKTieCap (one global atomic per warp and list).
//   4. The finish, one CTA per row: the best K - A of the tie list (or, when E > kTopKTieCap,
//      a plateau of equal scores, of a re-read of the row filtered to p == t), then the A keys.
// Threads: 256 per counting or collecting CTA; loads are 16-byte, through L2 (__ldcg), so
//   the later launches re-read the row from L2.
// Shared memory: 16 KiB histogram (count), none (collect).
#pragma once

#include <cub/block/block_scan.cuh>
#include <cstdint>

#include "core/rank_key.h"
#include "core/row_window.h"
#include "cuda/plan/heuristics.h"
#include "cuda/sm90/common/ptx.cuh"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "cuda/sm90/select/warp_reserve.cuh"

namespace flashindexer::sm90 {

inline constexpr int kGridThreads = 256;

// Per row; zeroed before the first launch of each call.
struct GridRowState {
  uint32_t ticket[2];  // CTAs done in count rounds 0 and 1
  uint32_t nan;        // count 0: 1 if the window holds a NaN
  uint32_t prefix;     // after count 0: b1; after count 1: t = (b1 << 12) | b2
  uint32_t need;       // keys still needed among the keys of that prefix
  uint32_t ties;       // after count 1: E, the keys with p == t
  uint32_t selected;   // collect: keys appended to the selected list (A)
  uint32_t tied;       // collect: keys with p == t seen (the list keeps kTopKTieCap)
};
static_assert(sizeof(GridRowState) == cuda::kTopKRowStateBytes);

struct GridSelectWorkspace {
  uint32_t* hist;         // [rows, 2, kTopKBins] zeroed
  GridRowState* state;    // [rows] zeroed
  uint64_t* selected;     // [rows, K] rank keys
  uint64_t* tie;          // [rows, kTopKTieCap] rank keys
  static __host__ __device__ GridSelectWorkspace in(void* workspace, int64_t rows, int32_t k) {
    GridSelectWorkspace w;
    w.hist = static_cast<uint32_t*>(workspace);
    w.state = reinterpret_cast<GridRowState*>(w.hist + rows * 2 * cuda::kTopKBins);
    w.selected = reinterpret_cast<uint64_t*>(w.state + rows);
    w.tie = w.selected + rows * k;
    return w;
  }
};

// Clears `words` 32-bit words (the rows' histograms and states) before count round 0.
__global__ void __launch_bounds__(kGridThreads) grid_zero_kernel(uint32_t* p, int64_t words) {
  ptx::launch_dependents();
  for (int64_t i = blockIdx.x * int64_t(kGridThreads) + threadIdx.x; i < words; i += int64_t(gridDim.x) * kGridThreads)
    p[i] = 0;
}

// The chunk [s0, s1) of the window that CTA `chunk` of `chunks` handles: equal parts, each a
// multiple of 4 positions long (so every chunk has the window's 16-byte alignment phase).
struct Chunk {
  int64_t s0, s1;
};
__device__ __forceinline__ Chunk chunk_of(const RowWindow& w, int chunk, int chunks) {
  const int64_t c = ((w.length() + chunks - 1) / chunks + 3) & ~int64_t{3};
  const int64_t s0 = w.start + c * chunk < w.end ? w.start + c * chunk : w.end;
  return {s0, s0 + c < w.end ? s0 + c : w.end};
}

// logits[s0, s1) of one row as 16-byte loads: `head` scalars up to the first 16-byte
// boundary, `nvec` float4 from s0 + head, then `tail` scalars (head, tail <= 3).
struct AlignedSpan {
  int64_t head, nvec, tail;
  __device__ __forceinline__ AlignedSpan(const float* row, int64_t s0, int64_t s1) {
    const int64_t len = s1 - s0;
    const int64_t lead = int64_t((16 - (reinterpret_cast<uintptr_t>(row + s0) & 15)) & 15) / 4;
    head = len < lead ? len : lead;
    nvec = (len - head) / 4;
    tail = len - head - nvec * 4;
  }
  // The position that thread t reads as a scalar (head first, then tail), or -1.
  __device__ __forceinline__ int64_t scalar_position(int64_t s0, int t) const {
    return t < head ? s0 + t : (t < head + tail ? s0 + head + nvec * 4 + (t - head) : -1);
  }
};

// Calls f(key[4], pos[4], valid[4]) over logits[s0, s1) of one row, up to 4 positions per
// thread per call; every thread of the CTA makes the same number of calls (so f may use warp
// collectives). 16-byte loads for the aligned middle; the head and tail as scalars.
template <int kThreads, class F>
__device__ __forceinline__ void for_each_key(const float* row, int64_t s0, int64_t s1, F&& f) {
  const AlignedSpan span(row, s0, s1);
  const int64_t head = span.head, nvec = span.nvec;
  const int t = threadIdx.x;
  {
    uint32_t key[4] = {0, 0, 0, 0};
    int32_t pos[4] = {0, 0, 0, 0};
    bool valid[4] = {false, false, false, false};
    const int64_t p = span.scalar_position(s0, t);
    if (p >= 0) {
      key[0] = float_key(row[p]);
      pos[0] = int32_t(p);
      valid[0] = true;
    }
    f(key, pos, valid);
  }
  const float4* vec = reinterpret_cast<const float4*>(row + s0 + head);
  const int64_t first = s0 + head;
  constexpr int kUnroll = 4;
  for (int64_t base = 0; base < nvec; base += kThreads * kUnroll) {
    float4 x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + t;
      if (i < nvec) x[u] = __ldcg(vec + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + t;
      const bool ok = i < nvec;
      const float v[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
      uint32_t key[4];
      int32_t pos[4];
      bool valid[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        key[j] = ok ? float_key(v[j]) : 0u;
        pos[j] = int32_t(first + i * 4 + j);
        valid[j] = ok;
      }
      f(key, pos, valid);
    }
  }
}

// Count round kRound (0: bits 31..20 of every key; 1: bits 19..8 of the keys whose top 12
// bits are b1). The row's last CTA finds the bin of the needed key. Grid (chunks, rows).
template <int kRound>
__global__ void __launch_bounds__(kGridThreads) grid_count_kernel(const TopKArgs a) {
  __shared__ uint32_t hist[cuda::kTopKBins];
  __shared__ bool last;
  using Scan = cub::BlockScan<uint32_t, kGridThreads>;
  __shared__ typename Scan::TempStorage scan;
  ptx::launch_dependents();
  const int64_t row = blockIdx.y;
  const RowWindow w = resolve_window(a.rows, row);
  if (w.status != 0 || w.length() <= a.k) return;  // the finish reads short rows whole
  const GridSelectWorkspace ws = GridSelectWorkspace::in(a.workspace, a.rows.rows(), a.k);
  GridRowState& st = ws.state[row];
  uint32_t* ghist = ws.hist + (row * 2 + kRound) * cuda::kTopKBins;
  for (int i = threadIdx.x; i < cuda::kTopKBins; i += kGridThreads) hist[i] = 0;
  // Round 1 needs round 0's bin; round 0 counts its chunk first and waits before its flush.
  if (kRound == 1) ptx::wait_for_previous_kernel();
  // Read before any thread of the last CTA can overwrite them (below).
  const uint32_t b1 = kRound == 0 ? 0u : st.prefix;
  const uint32_t need = kRound == 0 ? uint32_t(a.k) : st.need;
  __syncthreads();
  const Chunk c = chunk_of(w, blockIdx.x, gridDim.x);
  bool nan = false;
  for_each_key<kGridThreads>(a.logits + row * a.logits_row_stride, c.s0, c.s1,
                             [&](const uint32_t (&key)[4], const int32_t (&)[4], const bool (&valid)[4]) {
#pragma unroll
                               for (int j = 0; j < 4; ++j) {
                                 const bool in = valid[j] && (kRound == 0 || key[j] >> 20 == b1);
                                 const uint32_t bin = kRound == 0 ? key[j] >> 20 : (key[j] >> 8) & 0xFFFu;
                                 if (kRound == 0) nan |= valid[j] && key[j] == 0u;  // every NaN has key 0
                                 // The lanes that share lane 0's bin add once (a concentrated row
                                 // puts most of a warp in one bin); the others add one each.
                                 const uint32_t bin0 = __shfl_sync(0xffffffffu, bin, 0);
                                 const uint32_t same = __ballot_sync(0xffffffffu, in && bin == bin0);
                                 if (in && bin != bin0) atomicAdd(&hist[bin], 1u);
                                 if ((threadIdx.x & 31) == 0 && same != 0) atomicAdd(&hist[bin0], __popc(same));
                               }
                             });
  if (kRound == 0) ptx::wait_for_previous_kernel();  // the zeroed histograms and state
  if (kRound == 0 && __syncthreads_or(nan) && threadIdx.x == 0) atomicOr(&st.nan, 1u);
  __syncthreads();
  for (int i = threadIdx.x; i < cuda::kTopKBins; i += kGridThreads)
    if (hist[i] != 0) atomicAdd(ghist + i, hist[i]);
  __syncthreads();  // the CTA's adds happen before thread 0's fence and ticket
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&st.ticket[kRound], 1u) == gridDim.x - 1;
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;
  // Thread t holds bins 4095 - 16 t down to 4080 - 16 t: a prefix sum in thread order counts
  // the keys of the bins above each thread's.
  constexpr int kPer = cuda::kTopKBins / kGridThreads;
  uint32_t cnt[kPer], sum = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    cnt[j] = __ldcg(ghist + cuda::kTopKBins - 1 - (kPer * threadIdx.x + j));
    sum += cnt[j];
  }
  uint32_t above;
  Scan(scan).ExclusiveSum(sum, above);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (above < need && above + cnt[j] >= need) {
      const uint32_t bin = uint32_t(cuda::kTopKBins - 1 - (kPer * threadIdx.x + j));
      st.prefix = kRound == 0 ? bin : (b1 << 12) | bin;
      st.need = need - above;
      st.ties = cnt[j];
    }
    above += cnt[j];
  }
}

// Appends the flagged keys of a warp to a global list (one atomic per warp); entries past
// cap are counted, not written.
__device__ __forceinline__ void warp_append(const bool (&take)[4], const uint32_t (&key)[4], const int32_t (&pos)[4],
                                            uint32_t* count, uint64_t* list, uint32_t cap) {
  const uint32_t mine = uint32_t(take[0]) + uint32_t(take[1]) + uint32_t(take[2]) + uint32_t(take[3]);
  if (__ballot_sync(0xffffffffu, mine != 0) == 0) return;
  uint32_t base = warp_reserve(mine, count);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (take[j]) {
      if (base < cap) list[base] = (uint64_t(key[j]) << 32) | (0xFFFFFFFFu - uint32_t(pos[j]));
      ++base;
    }
}

// Keys above the threshold prefix t to the selected list, keys at t to the tie list.
__global__ void __launch_bounds__(kGridThreads) grid_collect_kernel(const TopKArgs a) {
  ptx::launch_dependents();
  const int64_t row = blockIdx.y;
  const RowWindow w = resolve_window(a.rows, row);
  if (w.status != 0 || w.length() <= a.k) return;
  ptx::wait_for_previous_kernel();
  const GridSelectWorkspace ws = GridSelectWorkspace::in(a.workspace, a.rows.rows(), a.k);
  GridRowState& st = ws.state[row];
  const uint32_t t = st.prefix;
  uint64_t* selected = ws.selected + row * a.k;
  uint64_t* tie = ws.tie + row * cuda::kTopKTieCap;
  const Chunk c = chunk_of(w, blockIdx.x, gridDim.x);
  for_each_key<kGridThreads>(a.logits + row * a.logits_row_stride, c.s0, c.s1,
                             [&](const uint32_t (&key)[4], const int32_t (&pos)[4], const bool (&valid)[4]) {
                               bool above[4], at[4];
#pragma unroll
                               for (int j = 0; j < 4; ++j) {
                                 above[j] = valid[j] && key[j] >> 8 > t;
                                 at[j] = valid[j] && key[j] >> 8 == t;
                               }
                               warp_append(above, key, pos, &st.selected, selected, uint32_t(a.k));
                               warp_append(at, key, pos, &st.tied, tie, uint32_t(cuda::kTopKTieCap));
                             });
}

}  // namespace flashindexer::sm90
