// flashindexer sm_90a: the paged scoring core (CONTRACT §1, §2, §4, §5).
//
// Purpose: score[r, s] for a *group* of R query rows over one split of the positions,
//   handing every in-window score to a Sink. One core, two consumers: the dense-logits
//   operator's sink writes logits; the fused operator's sink feeds a selector. Both
//   see the same bits because the arithmetic below is the only scoring code on the GPU.
// Rows and groups: a group is R consecutive rows (ragged: R = 256 / H; decode: the
//   next_n rows of one request). Rows of a group that share a request are scored in one
//   *pass* (their union window, masked per row); a group spanning requests takes one pass
//   per request. Each row is validated in full (window, request, every page its window
//   touches) before any key is read; a failed row is never scored.
// Tile order: the pass's tiles in order, unless the fused sink asks for a sampled start
//   (one pass only): then `sample` tiles spread over the sequence come first
//   (sampled_start.h). The order changes which tile a step scores, never a score's bits.
// Algorithm per 64-position tile (tiles 64-aligned, so one tile lies in one page):
//   acc[64 x N] = K_tile[64 x 128] * Q_group[N x 128]^T, N = R * H, on the tensor cores.
//   fp8 caches, exact mode: eight FP16 WGMMA m64nNk16 steps in one chain (every e4m3
//   value is exact in f16; A: keys converted in registers, B: f16 query heads stored in
//   the MMA's dimension order, see mma_tile_f16). Hopper's FP8 MMA aligns a k32 block's
//   products to the largest and truncates to ~13 fraction bits, so on fp8 blocks of wide
//   dynamic range it loses small products (up to ~1e-3 * M, generator wide_range).
//   mxfp4 groups of N = 256 (prefill), exact mode: the integer path. Twice an
//   E2M1 value is an integer of 0..12; a vector whose four block exponents lie within 3
//   of their least e_min is stored as those integers << (e_b - e_min), s8 (e2m1_s8.h), and
//   four s8 WGMMA m64nNk32 steps in one chain give the exact 128-long dot product in int32;
//   the score is relu(acc) converted exactly (twice_relu_s8), times w * 2^(eq_min - 127) (folded
//   into the weights) and 2^(ek_min - 127) / 4 (the key scale). Real (Hadamard-rotated)
//   vectors spread by at most 2. A token that spreads wider is stored unshifted and flags
//   its tile; a flagged tile's four k32 steps run from zero, each partial times its
//   token's block factor added in fp32 (mma_tile_s8_blocks). A group with a query head
//   that spreads wider takes the E5M2 path below for the whole CTA.
//   mxfp4 E5M2 path: four FP8 WGMMA m64nNk32 steps (A: keys, B: query heads, both K-major
//   with the 128-byte swizzle), each into a zeroed accumulator, the partials added in fp32;
//   a k32 step is one scale block, whose E2M1 products span at most 144x, so each step is
//   exact.
//   mxfp4 groups of N <= 128 columns (decode: next_n <= 2 at H = 64, any at H = 32) take
//   the register-key path (mma_tile_reg): the consumers convert raw E2M1 into E5M2 A
//   fragments in registers and scale each block's partial by 2^(e_b - e_max) as they add
//   it; no conversion in shared memory. It gives the E5M2 path's bits wherever the E5M2
//   values are exact; the integer path's dot products are exact, so its scores may differ
//   from both in the last bits (each operator, dense or fused, runs the same path).
//   ScoreAccuracy::kProduction (the default; fp8, and mxfp4 groups of N = 256): one FP8 chain
//   of four k32 steps.
//   Then per position: sum_h w[h] * relu(acc[h]) in fp32, heads in a fixed order (each
//   thread's 2 * N / 8 columns in column order, then the 4 lanes of a quad, xor 1 then 2),
//   times the key's scale. The sums are taken twice over, 2 relu(x) = x + |x| (an FADD, where
//   max is a half-rate ALU op), and the product with the key scale halved: the same bits
//   where no sum is subnormal. relu is positively homogeneous, so the key scale (fp8: the
//   token's fp32 scale; mxfp4: 2^(e_max - 127)) factors out of the head sum (a negative fp8
//   scale c takes a path with relu(c x) = c min(x, 0)). mxfp4 queries' scales fold into
//   the weights. mxfp4 values are rewritten as E5M2 on chip (fp4_convert.cuh).
//   fp8 in kProduction (kLinear): twice the head sum is sum_h w[h] |acc[h]| (one FFMA per
//   accumulator, |x| an operand modifier) plus the key's dot product with the row's weighted
//   query, which the chain takes as linear columns after each warpgroup's head columns
//   (m64n(N + 8), N + 16 at four rows per warpgroup: three e4m3 terms of qbar 2^s per row,
//   linear_columns.h); their sum times 2^-s joins the head sum after the quad's reduction.
// Warp roles (384 threads): warpgroup 0 produces key tiles into an 8-stage ring (mbarrier
//   full/empty): fp8 bytes by cp.async straight to their swizzled place; mxfp4 by cp.async
//   into a raw ring, then converted to E5M2 or s8 by the thread that copied them (two blocks
//   of one token), who fences them for the async proxy (the dense operator two tiles per
//   step, produce<2>; fp8: each consumer fences after the full barrier); register-key
//   mxfp4: raw tiles by cp.async into a 16-stage ring, nothing else; warpgroups 1 and 2
//   consume: with N = 256 both read every tile (128 columns each, so a key tile from L2
//   serves 256 columns), or, kAlternate256 (cuda::dense_takes_alternate256 and
//   fused_takes_alternate256), alternate tiles with all 256 columns each (one m64n256 chain,
//   one warpgroup's epilogue under the other's MMAs; its rare fp32 paths 64 columns at a time);
//   with N <= 128 they take alternate tiles. The dense operator's integer path on alternate
//   tiles splits each tile into two m64n128 halves, one half's MMAs under the other's head
//   sums, two tiles per loop iteration (consume_tiles_s8_halves; same
//   bits). The dense kernel's
//   register-key groups of N <= 64 and fp8 groups of N = 128 in exact mode (its
//   prefill groups) run a third consumer warpgroup (512 threads, every third tile;
//   dense_logits.cu); so do the fused decode clusters' groups of N <= 64 of
//   both formats and their fp8 pairs of rows, N <= 128 (fused_staged.cu), and the fused
//   lockstep kernel's groups of N = 128 in the FP16 chain (fused_topk.cu); the kProduction
//   fp8 groups at H = 64 of both operators run four (640 threads, setmaxnreg 32 / 112):
//   N = 128 on every fourth tile, N = 256 on shared tiles (warpgroup w: columns 128 (w % 2)
//   on of every other tile, from tile w / 2), where each key tile read from L2 serves 256
//   columns.
//   The dense operator's register-key groups of N <= 64 take each warpgroup's tiles in pairs,
//   one tile's head sums and puts under the next tile's first MMA group
//   (consume_tiles_reg_pairs).
//   When a consumer holds 128 columns or converts keys the producer gives it registers
//   (setmaxnreg 88 / 208; with three consumers 40 / 152); its weights live in registers
//   (four consumers with linear columns: 6 of 8 pairs, the rest read per tile; Weights).
// Sinks: put(r, row, position, score) for every in-window score (r: the row's index in
//   the group; row: the global row, or the sink's handle of it, sink_row). A sink with
//   kLockstep also gets step(sm, t) from every consumer thread at
//   the start of every tile (two warpgroups on shared tiles), of every other tile (four),
//   or of every consumer warpgroup's next tile (two to four tiles), so it can run group-wide
//   work (the fused operator's compactions) between the steps' puts.
// Shared memory: Q N x 128 B (+ 8 or 16 linear rows per consumer warpgroup's columns; the
//   FP16 chain's f16 queries: N x 256 B) + 8 x (8 KiB keys +
//   256 B scales) + N weights + metadata; mxfp4 adds a raw ring of 9 x 4.5 KiB tiles
//   (N = 256: fp8 99 KiB, 131 KiB in exact mode; mxfp4 139 KiB); register-key mxfp4:
//   Q N x 128 B + 16 x (4 KiB raw keys + 256 B scale words) (N = 64: 77 KiB).
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/rank_key.h"
#include "core/row_window.h"
#include "cuda/plan/heuristics.h"
#include "cuda/sm90/common/diagnostics.h"
#include "cuda/sm90/common/ptx.cuh"
#include "cuda/sm90/scorer/fp4_convert.cuh"
#include "cuda/sm90/scorer/linear_columns.h"
#include "cuda/sm90/scorer/sampled_start.h"
#include "cuda/sm90/scorer/score_passes.h"
#include "cuda/sm90/scorer/wgmma_f16_rs.cuh"
#include "cuda/sm90/scorer/wgmma_fp8.cuh"
#include "cuda/sm90/scorer/wgmma_s8.cuh"
#include "flashindexer/problem.h"

namespace flashindexer::sm90 {

inline constexpr int kScorerThreads = 384;   // producer + two consumer warpgroups

// fp8 caches in exact mode score with FP16 WGMMAs in one chain (mma_tile_f16).
constexpr bool fp16_chain(CacheFormat format, ScoreAccuracy accuracy) {
  return format == CacheFormat::kFp8E4M3 && accuracy == ScoreAccuracy::kExact;
}

struct ScorerArgs {
  KvCache cache;
  Queries queries;
  Rows rows;
  cuda::ScorerPlan g;
  bool q_vec16 = false;  // q pointer and strides 16-byte aligned: vector loads
  ScoreAccuracy accuracy = ScoreAccuracy::kExact;
};

// Host: the kernel arguments of a problem under a plan.
inline ScorerArgs scorer_args(const IndexerProblem& p, const cuda::ScorerPlan& plan) {
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  ScorerArgs a;
  a.cache = p.cache;
  a.queries = p.queries;
  a.rows = p.rows;
  a.g = plan;
  a.accuracy = p.accuracy;
  a.q_vec16 = aligned16(p.queries.q) && p.queries.q_row_stride % 16 == 0 && p.queries.q_head_stride % 16 == 0;
  return a;
}

// Host: calls fn.template operator()<kFormat, kHeads, kRows>() for a shape that has scorer
// kernels (H 32 or 64; rows per group 1, 2, 4, and 8 with H = 32); otherwise returns `none`.
template <class R, class Fn>
R with_scorer_shape(CacheFormat format, int32_t heads, int32_t rows, R none, Fn&& fn) {
  auto by_rows = [&]<CacheFormat kF, int kH>() -> R {
    switch (rows) {
      case 1: return fn.template operator()<kF, kH, 1>();
      case 2: return fn.template operator()<kF, kH, 2>();
      case 4: return fn.template operator()<kF, kH, 4>();
      case 8:
        if constexpr (kH == 32) return fn.template operator()<kF, kH, 8>();
        return none;
      default: return none;
    }
  };
  auto by_heads = [&]<CacheFormat kF>() -> R {
    if (heads == 64) return by_rows.template operator()<kF, 64>();
    if (heads == 32) return by_rows.template operator()<kF, 32>();
    return none;
  };
  return format == CacheFormat::kMxfp4 ? by_heads.template operator()<CacheFormat::kMxfp4>()
                                       : by_heads.template operator()<CacheFormat::kFp8E4M3>();
}

// Host: raises `kernel`'s dynamic shared-memory limit to `smem` (a per-function attribute,
// cheap, graph-safe) and launches it on one CTA per (group, split) of a.g.
template <int kThreads = kScorerThreads, class... Params, class... Args>
cudaError_t launch_scorer_kernel(void (*kernel)(Params...), size_t smem, cudaStream_t stream, const ScorerArgs& a,
                                 const Args&... args) {
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess)
    return e;
  kernel<<<dim3(unsigned(a.g.ctas())), kThreads, smem, stream>>>(a, args...);
  return cudaGetLastError();
}

inline constexpr int kScorerStages = 8;  // key tiles in the ring (16 raw tiles on the register-key path)

// Register-key path (mxfp4 groups of N <= 128 columns: decode, next_n <= 2 at H = 64): the
// producer only copies raw tiles; consumers convert keys into WGMMA A fragments in registers.

// Register-key groups of N <= 64 with three consumer warpgroups: the warpgroup's tiles in
// pairs, the second tile's first MMA group in flight under the first tile's head sums
// (consume_tiles_reg_pairs; same scores), for sinks that ask for it (kRegKeyPairs: the dense
// operator's). Measured: the dense scorer 2-3% faster, the fused decode clusters 0.4-1.2%
// slower (docs/experiments.md, 2026-12-04).
template <class Sink>
concept AsksRegKeyPairs = requires { requires Sink::kRegKeyPairs; };

// Sinks with a gate (the fused operator's): a row's gate(r) is a lower bound of the float_key
// of every score its put would keep (the high word of the row's threshold), constant between
// two of the sink's steps; a step that may have raised it returns true. LaneRows keeps it in
// a register per output and drops scores below it before the put (two instructions instead
// of the put's rank key and its 64-bit compare with the threshold in shared memory); with
// FI_FUSED_WARP_PUTS = 1 as a float, handing a warp's scores to put_warp(r, pos, v, past,
// gate, mates) together.
template <class Sink>
concept GatesPuts = requires(const Sink& s) { s.gate(0); };

// What a sink's put receives as `row`: the global row, or a handle that the sink derives from
// it once per consumer (Sink::row_key; the logits sink's element offset of the row).
template <class Sink>
__device__ __forceinline__ int64_t sink_row(const Sink& sink, int64_t row) {
  if constexpr (requires { sink.row_key(row); }) {
    return sink.row_key(row);
  } else {
    return row;
  }
}

// The integer path on alternate tiles (kAlternate256) in two halves of 128 columns for sinks
// that do not step (dense), one half's MMAs in flight under the other half's head sums
// (consume_tiles_s8_halves). Order only, same scores. Measured at V4-Pro 8,192 x 65,536: the
// dense scorer 1-2% faster; the fused kernel 2.5-3.4% slower, its producer's FP4 conversion
// then the bound (docs/experiments.md, 2026-12-02).

// mxfp4 only: raw key tiles as stored, before their conversion (E5M2 or s8): thread t's two
// 16-byte chunks (blocks 2 (t % 2) and 2 (t % 2) + 1 of token t / 2) at chunks t and t + 128.
struct Mxfp4RawRing {
  static constexpr int kRaw = 9;                             // 8 in flight + 1 converting
  alignas(16) uint8_t raw[kRaw][cuda::kScorerTile * 64];     // [2][128] 16-byte chunks of packed E2M1
  uint32_t raw_scale[kRaw][2 * cuda::kScorerTile];           // [128] thread t's token's scale word
  uint32_t wide[kScorerStages];  // integer path: i + 1 when tile i (in this stage) holds a wide token
};
struct NoRawRing {};

// Linear columns per consumer warpgroup of `cols` head columns (PagedScorer::kLinCols): 8 per
// pair of rows (a row's three terms and a zero column, on the four lanes of a quad).
constexpr int linear_columns(int heads, int cols) { return 8 * (cols / heads >= 2 ? cols / heads / 2 : 1); }
// Query rows in shared memory: N, plus each consumer warpgroup's linear columns after its head
// columns where the chain takes them (cuda::takes_linear_columns; N = 256: two column halves).
constexpr int scorer_q_rows(CacheFormat format, ScoreAccuracy accuracy, int heads, int n) {
  if (!cuda::takes_linear_columns(format == CacheFormat::kFp8E4M3, accuracy == ScoreAccuracy::kExact)) return n;
  return n == 256 ? n + 2 * linear_columns(heads, n / 2) : n + linear_columns(heads, n);
}

// kRing: key tiles in the ring (kScorerStages; the fused decode pairs take 7 to leave room for
// their stages). kF16Q: the queries are f16 (fp8 caches in exact mode, the FP16 chain).
// kQRows: query rows (scorer_q_rows).
template <int kN, bool kMx, int kRing = kScorerStages, bool kF16Q = false, int kQRows = kN>
struct ScorerSmem {
  static constexpr bool kRegKeys = kMx && kN <= 128;
  static constexpr int kStages = kRegKeys ? 2 * kRing : kRing;
  // Queries [N, 128] as fp8, E5M2 or s8, swizzled; kF16Q: two [N, 64] f16 atoms (D in MMA
  // order, load_queries), swizzled; with linear columns [kQRows, 128] (PagedScorer::q_row).
  alignas(1024) uint8_t q[kQRows * (kF16Q ? 256 : 128)];
  // [S][64, 128] keys (fp8), swizzled; register keys: [S][64, 64] packed E2M1 as stored, the
  // 16-byte chunk c of token r at chunk c ^ ((r >> 1) & 3) (raw_offset).
  alignas(1024) uint8_t k[kStages][cuda::kScorerTile * (kRegKeys ? 64 : 128)];
  float kscale[kStages][cuda::kScorerTile];  // register keys: the tokens' UE8M0 words as stored
  std::conditional_t<kMx && !kRegKeys, Mxfp4RawRing, NoRawRing> ring;
  alignas(16) float w[kN];                        // [N] weights (times the q scale for mxfp4); float2 loads
  uint64_t full[kStages];
  uint64_t empty[kStages];
  GroupRow rows[8];
  ScorePass passes[8];
  int32_t num_passes;
  int32_t num_tiles;
  SampleOrder order;  // the order of the CTA's tiles (plain unless the fused sink samples)
  int32_t q_s8;       // mxfp4, N = 256: the queries are stored as s8 (the integer path)
  uint32_t lin_max[8];  // linear columns: the bits of each row's largest |qbar|
  float lin_scale[8];   // linear columns: each row's 2^-s
};

template <int kN, bool kMx, bool kF16Q, int kQRows = kN>
constexpr size_t scorer_smem_bytes() {
  return sizeof(ScorerSmem<kN, kMx, kScorerStages, kF16Q, kQRows>) + 1024;  // + alignment slack of the dynamic base
}

__device__ __forceinline__ float load_weight(const Queries& q, int64_t row, int h) {
  const int64_t i = row * q.weights_row_stride + h;
  float w;
  if (q.weight_type == WeightType::kF32) {
    w = static_cast<const float*>(q.weights)[i];
  } else {
    w = __int_as_float(int(uint32_t(static_cast<const uint16_t*>(q.weights)[i]) << 16));
  }
  return w * q.weight_scale;
}

// Register split when a consumer holds 128 columns. setmaxnreg only moves registers within
// the CTA's launch allocation, 168 per thread (65536 / 384, rounded down to a multiple of
// 8): 128 x 88 + 256 x 208 = 384 x 168. Asking for more makes setmaxnreg.inc wait forever.
inline constexpr int kLaunchRegs = 168;
inline constexpr int kConsumerRegs = 208;  // the producer gets the rest
// Ping-pong (order only, same scores): the two consumer warpgroups that share tiles (N = 256)
// take turns on the tensor cores in the FP16 chain, so one's epilogue runs under the other's
// MMAs (named barriers 4, 5): dense fp8 in exact mode 1.09x faster, the FP8 chains 2-3%
// slower (docs/experiments.md, 2026-11-29); the fused operator's shared tiles (K = 2048):
// V3.2 20.48 -> 20.24 ms (2026-12-03). The two consumer warpgroups of a lockstep sink on
// alternate tiles of N < 256 take turns too, tile by tile, so they do not issue their MMAs
// together (e.g. after a compaction, where both meet at barrier 1): GLM-5 prefill 13.12 ->
// 12.66 ms; V4 prefill (N = 256) 2.1-2.8% slower that way (2026-12-03).
// Known-uniform indices (same scores): the consumers' warpgroup and stage indices broadcast
// from lane 0 (ptx::warp_uniform), so ptxas may keep what derives from them in uniform
// registers, in the loops where that measured faster (consume_tiles; 2026-12-01).
inline constexpr int kProducerRegs = ((kScorerThreads * kLaunchRegs - 256 * kConsumerRegs) / 128) & ~7;
static_assert(kProducerRegs >= 24 && 128 * kProducerRegs + 256 * kConsumerRegs <= kScorerThreads * kLaunchRegs,
              "register split beyond the launch allocation");
// The split with three consumer warpgroups (512 threads, 128 registers each at launch):
// dense_logits.cu and fused_topk.cu.
inline constexpr int kProducerRegs3 = 40;
inline constexpr int kConsumerRegs3 = 152;
static_assert(128 * kProducerRegs3 + 384 * kConsumerRegs3 <= 512 * 128, "register split beyond the launch allocation");
// The split with four consumer warpgroups (640 threads, 96 registers each at launch):
// kProduction fp8 groups of N = 128 in the fused lockstep kernel (fused_topk.cu). ptxas
// allocates each side within its setmaxnreg; the producer's cp.async loop needs few.
inline constexpr int kProducerRegs4 = 32;
inline constexpr int kConsumerRegs4 = 112;
static_assert(128 * kProducerRegs4 + 512 * kConsumerRegs4 <= 640 * 96, "register split beyond the launch allocation");

// The scorer's shared memory at the first 1024-byte boundary of the dynamic base. Pointer
// arithmetic on the __shared__ array (no round trip through an integer) lets the compiler
// keep the shared address space: LDS / STS / ATOMS instead of generic accesses.
template <class Smem>
__device__ Smem& carve(uint8_t* raw) {
  const uint32_t pad = (1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u;
  return *reinterpret_cast<Smem*>(raw + pad);
}

// kConsumerWgs: consumer warpgroups (2; 3 for groups of N <= 64 on the register-key path and
// N <= 128 on the fp8 path: dense_logits.cu, fused_staged.cu, and fused_topk.cu's N = 128
// groups in the FP16 chain, whose lockstep steps are then triples of tiles).
// kAlternate256: groups of N = 256 take alternate tiles, each consumer warpgroup all 256
// columns (one m64n256 chain: half the MMA instructions and key-tile reads per tile, and one
// warpgroup's epilogue runs under the other's MMAs) instead of both on every tile, 128
// columns each; a lockstep sink's step is then a pair of tiles. The FP16 chain (fp8, default
// mode) can take it too (the fused operator at K <= cap / 2): each warpgroup then converts
// only its own tiles' keys. kSamples: the sink may start with a sample (the fused
// operator's): the tile order of a group that samples (sampled_start.h, group_samples) is
// then a sampled one; other sinks stream every group in order.
template <CacheFormat kFormat, int kHeads, int kRows, ScoreAccuracy kAccuracy, int kConsumerWgs = 2,
          int kRing = kScorerStages, bool kAlternate256 = false, bool kSamples = false>
struct PagedScorer {
  static constexpr int kN = kHeads * kRows;
  static constexpr bool kMx = kFormat == CacheFormat::kMxfp4;
  static constexpr Fp8Kind kKind = kMx ? Fp8Kind::kE5M2 : Fp8Kind::kE4M3;
  static_assert(!kAlternate256 || (kN == 256 && kConsumerWgs == 2), "alternate tiles of 256 columns: groups of N = 256");
  static constexpr bool kShareTiles = kN == 256 && !kAlternate256;  // both consumers on every tile
  static constexpr bool kSampledOrder = kSamples && group_samples(kN, kAlternate256, true);
  static constexpr int kNw = kShareTiles ? kN / 2 : kN;      // columns per consumer warpgroup
  static constexpr int kRowsW = kNw / kHeads;                // rows per consumer warpgroup
  static constexpr uint32_t kEmptyArrivals = kShareTiles ? 256 : 128;
  static constexpr uint32_t kTurnBarrier = 4;  // + cw: "warpgroup cw's turn" (1-3: the fused sink)
  static_assert(kN % 32 == 0 && kN <= 256 && kRows <= 8, "unsupported group shape");
  static constexpr bool kF16 = fp16_chain(kFormat, kAccuracy);
  // The production chain of fp8 caches: twice a head sum is sum_h w_h |x_h| (one FFMA per
  // accumulator) plus the key's dot product with the row's weighted query, which the MMA
  // takes as kLinCols more columns after each warpgroup's kNw head columns (linear_columns.h).
  static constexpr bool kLinear =
      cuda::takes_linear_columns(kFormat == CacheFormat::kFp8E4M3, kAccuracy == ScoreAccuracy::kExact);
  static_assert(!(kLinear && kAlternate256), "linear columns need room past the head columns: N <= 128 per warpgroup");
  static constexpr int kLinCols = kLinear ? linear_columns(kHeads, kNw) : 0;
  static constexpr int kMmaN = kNw + kLinCols;  // a consumer warpgroup's MMA columns
  static constexpr int kQRows = scorer_q_rows(kFormat, kAccuracy, kHeads, kN);
  static_assert(kQRows == kN + (kShareTiles ? 2 : 1) * kLinCols, "scorer_q_rows and the warpgroups' columns agree");
  using Smem = ScorerSmem<kN, kMx, kRing, kF16, kQRows>;
  static constexpr int kStages = Smem::kStages;
  static constexpr bool kRegKeys = Smem::kRegKeys;
  // The producer hands registers to the consumers (setmaxnreg 88 / 208 with two consumer
  // warpgroups where kSplitRegs; 40 / 152 with three; 32 / 112 with four; 0: no split): each
  // side calls its function first thing after the set-up (dense_logits.cu, fused_topk.cu).
  static constexpr bool kSplitRegs = FI_SCORER_SPLIT_REGS != 0 && (kNw >= 128 || kRegKeys);
  static constexpr int kProducerSetRegs = kConsumerWgs == 4   ? kProducerRegs4
                                          : kConsumerWgs == 3 ? kProducerRegs3
                                          : kSplitRegs        ? kProducerRegs
                                                              : 0;
  static constexpr int kConsumerSetRegs = kConsumerWgs == 4   ? kConsumerRegs4
                                          : kConsumerWgs == 3 ? kConsumerRegs3
                                          : kSplitRegs        ? kConsumerRegs
                                                              : 0;
  __device__ static void producer_registers() {
    if constexpr (kProducerSetRegs > 0) ptx::regs_dealloc<kProducerSetRegs>();
  }
  __device__ static void consumer_registers() {
    if constexpr (kConsumerSetRegs > 0) ptx::regs_alloc<kConsumerSetRegs>();
  }
  static constexpr int kThreads = 128 * (1 + kConsumerWgs);
  static_assert(kConsumerWgs == 2 || (kConsumerWgs == 3 && ((kRegKeys && kNw <= 64) || (!kMx && kNw <= 128))) ||
                    (kConsumerWgs == 4 && !kMx && !kF16 && kNw <= 128),
                "three consumer warpgroups: groups of N <= 64 on the register-key path, N <= 128 on the fp8 path; "
                "four: 128 columns each on the FP8 chain (N = 128 on every fourth tile, or shared tiles of N = 256, "
                "two warpgroups on every other tile)");
  // mxfp4 groups that share tiles can take the integer path (s8 WGMMA; sm.q_s8 per CTA) in the
  // exact mode. kProduction keeps its single FP8 chain: with the E5M2 producer's lighter
  // conversion it is the faster one (docs/experiments.md, 2026-11-30).
  static constexpr bool kS8 = kMx && !kRegKeys && kAccuracy == ScoreAccuracy::kExact;

  // ---------------------------------------------------------------- set-up
  // Resolves and validates the group's rows, plans the passes and the tile order (up to
  // max_sample tiles first when one pass covers the group: sampled_start.h), loads Q and
  // weights, initialises the barriers. All threads; ends with a CTA barrier.
  // kLaunchThreads: the CTA's threads; those past kThreads meet the barriers but take no
  // share of the work.
  template <int kLaunchThreads = kThreads>
  __device__ static void setup(const ScorerArgs& a, Smem& sm, int64_t group, int64_t c0, int64_t c1,
                               int32_t max_sample = 0) {
    const int tid = worker_index<kLaunchThreads>();
    const int64_t total_rows = a.rows.rows();
    const int64_t row0 = group * a.g.group_stride;
    const int in_group = int(min(int64_t(a.g.group_stride), total_rows - row0));
    if (tid < kRows) {
      GroupRow gr{-1, 0, 0, 0, 0, 0};
      if (tid < in_group) {
        const RowWindow w = resolve_window(a.rows, row0 + tid);
        gr = {row0 + tid, w.request, int32_t(w.start), int32_t(w.end), w.status, 0};
      }
      sm.rows[tid] = gr;
    }
    if (tid < Smem::kStages) {
      ptx::mbar_init(&sm.full[tid], kRegKeys ? 32 : 128);  // the producer threads that copy a tile
      ptx::mbar_init(&sm.empty[tid], kEmptyArrivals);
      if constexpr (kS8) sm.ring.wide[tid] = 0;
    }
    __syncthreads();
    // Every page each row's window touches (entries outside windows are never read).
    for (int r = 0; r < kRows; ++r) {
      const GroupRow gr = sm.rows[r];
      if (gr.row < 0 || gr.status != 0) continue;
      const RowWindow w{gr.request, gr.start, gr.end, 0};
      const int64_t n = window_pages(a.cache.pages, w);
      uint32_t ored = 0;
      for (int64_t i = tid; i < n; i += kThreads) ored |= check_window_page(a.cache.pages, w, i);
      if (ored) atomicOr(&sm.rows[r].nan, ored);  // `nan` holds page bits until combined below
    }
    __syncthreads();
    if (tid < kRows) {
      GroupRow& gr = sm.rows[tid];
      if (gr.row >= 0 && gr.status == 0 && gr.nan != 0) gr.status = combine_page_status(gr.nan);
      if (gr.status != 0) gr.start = gr.end = 0;
      gr.nan = 0;
    }
    __syncthreads();
    if (tid == 0) {
      plan_score_passes<kRows>(sm.rows, c0, c1, sm.passes, &sm.num_passes, &sm.num_tiles);
      sm.order = sm.num_passes == 1 && kSampledOrder ? SampleOrder::plan(sm.num_tiles, max_sample) : SampleOrder{};
    }
    load_queries<kLaunchThreads>(a, sm);
    ptx::fence_proxy_async_smem();
    __syncthreads();
  }

  // The thread's index in the set-up's loops; threads past kThreads get one past every loop.
  template <int kLaunchThreads>
  __device__ static int worker_index() {
    static_assert(kLaunchThreads >= kThreads);
    if constexpr (kLaunchThreads == kThreads) return threadIdx.x;
    return threadIdx.x < kThreads ? int(threadIdx.x) : 1 << 30;
  }

  // The UE8M0 block exponents of query head h of `row` (byte j: block j).
  __device__ static uint32_t q_scale_word(const Queries& q, int64_t row, int h) {
    const uint8_t* s = q.q_scale + row * q.q_scale_row_stride + h * q.q_scale_head_stride;
    return uint32_t(s[0]) | uint32_t(s[1]) << 8 | uint32_t(s[2]) << 16 | uint32_t(s[3]) << 24;
  }

  // Q heads of the group's rows as fp8 or s8 [N, 128] (swizzled) and the weights [N].
  // Absent or failed rows get zero heads and zero weights. Integer path: the queries are
  // stored as s8 when every live head's block exponents lie within kS8MaxShift (sm.q_s8;
  // a CTA-wide vote, so all threads call this, as setup does).
  template <int kLaunchThreads = kThreads>
  __device__ static void load_queries(const ScorerArgs& a, Smem& sm) {
    const Queries& q = a.queries;
    const int tid = worker_index<kLaunchThreads>();
    bool q_s8 = false;
    if constexpr (kS8) {
      bool wide = false;
      for (int n = tid; n < kN; n += kThreads) {
        const GroupRow gr = sm.rows[n / kHeads];
        if (gr.row < 0 || gr.status != 0) continue;
        const uint32_t s4 = q_scale_word(q, gr.row, n % kHeads);
        wide |= max_block_exponent(s4) - min_block_exponent(s4) > kS8MaxShift;
      }
      q_s8 = !__syncthreads_or(wide);
      if (tid == 0) sm.q_s8 = q_s8;
    }
    constexpr int kItemsPerHead = kMx ? 4 : 8;  // 16-byte source chunks per head
    for (int it = tid; it < kN * kItemsPerHead; it += kThreads) {
      const int n = it / kItemsPerHead, c = it % kItemsPerHead;
      const GroupRow gr = sm.rows[n / kHeads];
      const int h = n % kHeads;
      uint4 v = make_uint4(0, 0, 0, 0);
      const bool live = gr.row >= 0 && gr.status == 0;
      if (live) {
        const uint8_t* src = static_cast<const uint8_t*>(q.q) + gr.row * q.q_row_stride + h * q.q_head_stride + c * 16;
        if (a.q_vec16) {
          v = *reinterpret_cast<const uint4*>(src);
        } else {
          uint32_t b[16];
#pragma unroll
          for (int i = 0; i < 16; ++i) b[i] = src[i];
          v = make_uint4(b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24, b[4] | b[5] << 8 | b[6] << 16 | b[7] << 24,
                         b[8] | b[9] << 8 | b[10] << 16 | b[11] << 24, b[12] | b[13] << 8 | b[14] << 16 | b[15] << 24);
        }
      }
      if constexpr (kMx) {
        const uint32_t s4 = live ? q_scale_word(q, gr.row, h) : 0u;
        const uint32_t e_c = block_exponent(s4, c);
        uint4 lo, hi;
        if (q_s8) {
          e2m1_block_to_s8(v, e_c - min_block_exponent(s4), lo, hi);
        } else {
          e2m1_block_to_e5m2(v, max_block_exponent(s4) - e_c, lo, hi);
        }
        if constexpr (kRegKeys) {  // the k order of mma_tile_reg: the block's even elements, then its odd ones
          constexpr uint32_t kEven = 0x6420, kOdd = 0x7531;
          const uint4 even = make_uint4(byte_permute(lo.x, lo.y, kEven), byte_permute(lo.z, lo.w, kEven),
                                        byte_permute(hi.x, hi.y, kEven), byte_permute(hi.z, hi.w, kEven));
          const uint4 odd = make_uint4(byte_permute(lo.x, lo.y, kOdd), byte_permute(lo.z, lo.w, kOdd),
                                       byte_permute(hi.x, hi.y, kOdd), byte_permute(hi.z, hi.w, kOdd));
          lo = even;
          hi = odd;
        }
        *reinterpret_cast<uint4*>(sm.q + ptx::sw128_offset(n, 2 * c)) = lo;
        *reinterpret_cast<uint4*>(sm.q + ptx::sw128_offset(n, 2 * c + 1)) = hi;
      } else if constexpr (kF16) {
        // Dimension d = 16 c + j goes to MMA step s = 4 (d / 64) + (d % 16) / 4, k index
        // kk of that step (see mma_tile_f16), atom s / 4, in-atom k 16 (s % 4) + kk.
        const uint8_t* b = reinterpret_cast<const uint8_t*>(&v);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int d = 16 * c + j, h = d / 64, t4 = (d % 64) / 16, jj = (d % 16) / 4, i = d % 4;
          const int kk = (i < 2 ? 0 : 8) + 2 * t4 + (i & 1), ka = 16 * jj + kk;
          const __half_raw hv = __nv_cvt_fp8_to_halfraw(b[j], __NV_E4M3);
          *reinterpret_cast<unsigned short*>(sm.q + h * kN * 128 + ptx::sw128_offset(n, ka / 8) + (ka % 8) * 2) = hv.x;
        }
      } else {
        *reinterpret_cast<uint4*>(sm.q + ptx::sw128_offset(q_row(n), c)) = v;
      }
    }
    for (int n = tid; n < kN; n += kThreads) {
      const GroupRow gr = sm.rows[n / kHeads];
      const int h = n % kHeads;
      float w = 0.0f;
      if (gr.row >= 0 && gr.status == 0) {
        w = load_weight(q, gr.row, h);
        if constexpr (kMx) {
          // The head's scale: 2^(e_max - 127) for E5M2 heads, 2^(e_min - 127) for s8 heads
          // (NaN if any block is NaN).
          const uint32_t s4 = q_scale_word(q, gr.row, h), emax = max_block_exponent(s4);
          w *= ue8m0_value(q_s8 && emax != 0xFF ? min_block_exponent(s4) : emax);
        }
      }
      sm.w[weight_slot(n)] = w;
    }
    if constexpr (kLinear) load_linear_columns<kLaunchThreads>(sm);
  }

  // The shared-memory row of query column n: a consumer warpgroup's kNw head columns, then its
  // kLinCols linear columns.
  __device__ static int q_row(int n) { return kLinear ? (n / kNw) * kMmaN + n % kNw : n; }

  // The linear columns of row r (of a warpgroup's kRowsW rows), term t = 0, 1, 2: on lane
  // x = 2 (r % 2) + (t == 2) of the quad, its column 2 x + (t == 1) of block r / 2, so that
  // after the quad's reduce-scatter the lanes that put row r's scores hold the terms (add_linear).
  __device__ static int linear_column(int r, int t) { return 8 * (r >> 1) + 2 * (2 * (r & 1) + (t == 2)) + (t == 1); }

  // Per row of the group: qbar[d] = sum_h w_h q[h][d] in fp32 (heads in order: the same bits in
  // every kernel), its largest magnitude, the scale 2^s that takes it to [128, 256) and the three
  // e4m3 terms of qbar 2^s into the linear columns (the rest of them zero), 2^-s to lin_scale.
  // A row whose qbar is not finite (an inf or NaN weight or query) gets NaN terms: its scores
  // are NaN, where the exact ones are NaN or, with an infinite weight, possibly inf. All threads
  // (two CTA barriers); load_queries' stores precede it.
  template <int kLaunchThreads>
  __device__ static void load_linear_columns(Smem& sm) {
    const int tid = worker_index<kLaunchThreads>();
    constexpr int kHalves = kShareTiles ? 2 : 1, kChunks = kHalves * kLinCols * 8;
    for (int i = tid; i < kChunks; i += kThreads) {
      const int half = i / (kLinCols * 8), c = i % 8, row = half * kMmaN + kNw + (i / 8) % kLinCols;
      *reinterpret_cast<uint4*>(sm.q + ptx::sw128_offset(row, c)) = make_uint4(0, 0, 0, 0);
    }
    if (tid < kRows) sm.lin_max[tid] = 0;
    __syncthreads();
    constexpr int kItems = (kRows * 128 + kThreads - 1) / kThreads;  // (row, d) items per thread
    float qbar[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int i = tid + k * kThreads, r = i / 128, d = i % 128;
      qbar[k] = 0.0f;
      if (i >= kRows * 128) continue;
#pragma unroll 8
      for (int h = 0; h < kHeads; ++h) {
        const int n = r * kHeads + h;
        const __half_raw q = __nv_cvt_fp8_to_halfraw(sm.q[ptx::sw128_offset(q_row(n), d / 16) + d % 16], __NV_E4M3);
        qbar[k] = fmaf(sm.w[weight_slot(n)], __half2float(__half(q)), qbar[k]);
      }
      atomicMax(&sm.lin_max[r], std::bit_cast<uint32_t>(fabsf(qbar[k])));
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int i = tid + k * kThreads, r = i / 128, d = i % 128;
      if (i >= kRows * 128) continue;
      const uint32_t amax = sm.lin_max[r];
      const int s = linear_scale_exponent(amax);
      E4m3Terms t{{kE4m3Nan, kE4m3Nan, kE4m3Nan}};
      if (amax < 0x7F800000u) t = e4m3_terms(qbar[k] * std::bit_cast<float>(uint32_t(127 + s) << 23));
      const int row = (r / kRowsW) * kMmaN + kNw;
#pragma unroll
      for (int j = 0; j < 3; ++j) sm.q[ptx::sw128_offset(row + linear_column(r % kRowsW, j), d / 16) + d % 16] = t.t[j];
      if (d == 0) sm.lin_scale[r] = std::bit_cast<float>(uint32_t(127 - s) << 23);
    }
  }

  // Where column c's weight lies in sm.w: column 8 b + 2 x + e (x = lane % 4 of its
  // accumulator fragment, e = 0, 1) at 16 (b / 2) + 4 x + 2 (b % 2) + e, so that a thread's
  // weights of blocks b and b + 1 (b even) are one float4 (Weights::pair).
  __device__ static int weight_slot(int c) {
    const int b = c / 8, x = (c % 8) / 2, e = c % 2;
    return 16 * (b / 2) + 4 * x + 2 * (b % 2) + e;
  }

  // ---------------------------------------------------------------- tiles
  // The tile of step i: sampled orders exist only where the sink samples (kSamples: the
  // fused operator's sampled start) and the group does (group_samples); other groups stream
  // in order.
  __device__ static int tile_at(const SampleOrder& order, int i) { return kSampledOrder ? order.tile(i) : i; }

  // Tile i of the CTA's sequence (i = tile_at(sm.order, step)): its pass, and the first
  // position it covers.
  __device__ static int pass_of(const Smem& sm, int i) {
    int p = 0;
    while (p + 1 < sm.num_passes && sm.passes[p + 1].tile_begin <= i) ++p;
    return p;
  }
  __device__ static int64_t tile_first(const Smem& sm, int p, int i) {
    return sm.passes[p].first + int64_t(i - sm.passes[p].tile_begin) * cuda::kScorerTile;
  }

  // ---------------------------------------------------------------- producer
  // Physical page of the tile of step j (the tile lies in one page, which the row checks
  // validated: the pass's union window touches it); -1 past the last step.
  __device__ static int64_t tile_page(const ScorerArgs& a, const Smem& sm, int j) {
    if (j >= sm.num_tiles) return -1;
    const int i = tile_at(sm.order, j);
    const int p = pass_of(sm, i);
    const PageMap& pm = a.cache.pages;
    const int64_t index = tile_first(sm, p, i) / pm.page_size;
    return pm.table == nullptr ? index
                               : int64_t(pm.table[int64_t(sm.passes[p].request) * pm.table_row_stride + index]);
  }

  // The key values and scales of step j's tile in global memory.
  struct TileSource {
    const uint8_t* values;  // [64, 128 | 64] bytes
    const uint8_t* scales;  // [64] fp32 | [64, 4] UE8M0
  };
  __device__ static TileSource tile_source(const ScorerArgs& a, const Smem& sm, int j, int64_t page) {
    const int i = tile_at(sm.order, j);
    const int64_t ps = a.cache.pages.page_size;
    const int64_t first = tile_first(sm, pass_of(sm, i), i);
    const int64_t token0 = (ps & (ps - 1)) == 0 ? first & (ps - 1) : first % ps;  // 64 and 128: a mask
    constexpr int kValueBytes = kMx ? 64 : 128;
    const uint8_t* base = static_cast<const uint8_t*>(a.cache.pool) + page * a.cache.page_stride;
    return {base + token0 * kValueBytes, base + ps * kValueBytes + token0 * 4};
  }

  // Tile sources 32 tiles ahead of use, for a warp that takes the tiles first + stride j
  // (j = 0, 1, ...): lane l holds the addresses of j = 32 b + l of the current batch b and
  // the page of the next one, so the page-table read never stalls the copy issue and a
  // tile's addresses cost the warp four shuffles (the pass lookup and the 64-bit address
  // arithmetic run once per 32 tiles, lane-parallel).
  struct SourceAhead {
    TileSource cur;
    int64_t next;  // page of j = 32 (b + 1) + lane; -1 past the last step
    int first, stride;
    __device__ void set(const ScorerArgs& a, const Smem& sm, int j, int64_t page) {
      if (page >= 0) cur = tile_source(a, sm, first + stride * j, page);
    }
    __device__ void start(const ScorerArgs& a, const Smem& sm, int first_tile = 0, int tile_stride = 1) {
      const int lane = threadIdx.x & 31;
      first = first_tile;
      stride = tile_stride;
      cur = {nullptr, nullptr};
      set(a, sm, lane, tile_page(a, sm, first + stride * lane));
      next = tile_page(a, sm, first + stride * (32 + lane));
    }
    __device__ TileSource source(const ScorerArgs& a, const Smem& sm, int j) {
      if (j > 0 && (j & 31) == 0) {
        const int lane = threadIdx.x & 31;
        set(a, sm, j + lane, next);
        next = tile_page(a, sm, first + stride * (j + 32 + lane));
      }
      return {ptx::shfl_pointer(cur.values, j & 31), ptx::shfl_pointer(cur.scales, j & 31)};
    }
  };

  // fp8: every byte goes straight to its swizzled place by cp.async; the stage's full
  // barrier completes when all 128 producer threads' copies have landed. Up to kStages
  // tiles in flight.
  __device__ static void produce_fp8(const ScorerArgs& a, Smem& sm) {
    const int tid = threadIdx.x;  // 0..127
    SourceAhead sources;
    sources.start(a, sm);
    for (int i = 0; i < sm.num_tiles; ++i) {
      const int stage = i % kStages;
      const TileSource src = sources.source(a, sm, i);
      ptx::mbar_wait(&sm.empty[stage], ((i / kStages) & 1) ^ 1);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int c = tid + 128 * u;  // 16-byte chunk c & 7 of token c >> 3
        ptx::cp_async16(sm.k[stage] + ptx::sw128_offset(c >> 3, c & 7), src.values + c * 16);
      }
      if (tid < 16) ptx::cp_async16(&sm.kscale[stage][4 * tid], src.scales + tid * 16);
      ptx::cp_async_arrive(&sm.full[stage]);
    }
  }

  // mxfp4: raw bytes by cp.async into a ring of kRaw tiles, kRawAhead tiles ahead. Thread t
  // copies, and then converts, blocks 2 h and 2 h + 1 of token t / 2 (h = t % 2): 32
  // contiguous bytes and the token's scale word, so it waits on its own copies only (no
  // barrier among the producers; 2026-12-02 measured a barrier with coalesced copies slower
  // in the dense scorer) and analyses one scale word per tile. It stores E5M2 or s8 swizzled
  // and fences for the tensor cores. Integer path: each token shifted to its least block
  // exponent, or unshifted if it spreads wider than kS8MaxShift, which also flags the tile (a
  // shared atomicMax of i + 1: no reset, no barrier among the producers); kscale holds the
  // scale words as stored, from which the consumers take the key scale and block factors.
  __device__ static void issue_raw(Smem& sm, int i, const TileSource& src) {
    const int tid = threadIdx.x;
    const int slot = i % Mxfp4RawRing::kRaw;
#pragma unroll
    for (int u = 0; u < 2; ++u) ptx::cp_async16(sm.ring.raw[slot] + (tid + 128 * u) * 16, src.values + tid * 32 + u * 16);
    ptx::cp_async4(&sm.ring.raw_scale[slot][tid], src.scales + (tid >> 1) * 4);
  }

  // produce_mx on two tiles per step (the dense operator's groups, produce<2>): the path (s8
  // or E5M2) a template parameter, each thread's conversions of two tiles interleaved (each
  // is a latency chain), one proxy fence per step; kRaw - 2 tiles ahead. kT = 1: an odd
  // count's last tile. Same bytes in the same places as produce_mx.
  static constexpr int kMxAhead2 = Mxfp4RawRing::kRaw - 2;
  template <bool kQs8, int kT>
  __device__ static void produce_mx_step(const ScorerArgs& a, Smem& sm, SourceAhead& sources, int i, int n) {
    const int tid = threadIdx.x;
    const int token = tid >> 1, h = tid & 1;
#pragma unroll
    for (int t = 0; t < 2; ++t) {  // two commit groups per step, whatever kT
      const int j = i + t + kMxAhead2;
      const TileSource src = sources.source(a, sm, j);
      if (j < n) issue_raw(sm, j, src);  // into tile j - kRaw's slot, converted the step before
      ptx::cp_async_commit();
    }
    ptx::cp_async_wait<kMxAhead2>();  // this thread's copies of tiles i, i + 1 have landed
    uint32_t s4[kT], emax[kT], emin[kT];
    bool wide[kT];
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      s4[t] = sm.ring.raw_scale[(i + t) % Mxfp4RawRing::kRaw][tid];
      emax[t] = max_block_exponent(s4[t]);
      emin[t] = min_block_exponent(s4[t]);
      wide[t] = kQs8 && emax[t] - emin[t] > kS8MaxShift;
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) ptx::mbar_wait(&sm.empty[(i + t) % kStages], (((i + t) / kStages) & 1) ^ 1);
#pragma unroll
    for (int u = 0; u < (FI_SCORER_PRODUCER_CONVERT != 0 ? 2 : 0); ++u) {
      const int block = 2 * h + u;
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        const int slot = (i + t) % Mxfp4RawRing::kRaw, stage = (i + t) % kStages;
        const uint4 v = *reinterpret_cast<const uint4*>(sm.ring.raw[slot] + (tid + 128 * u) * 16);
        const uint32_t e_b = block_exponent(s4[t], block);
        uint4 lo, hi;
        if constexpr (kQs8) {
          e2m1_block_to_s8(v, wide[t] ? 0 : e_b - emin[t], lo, hi);
        } else {
          e2m1_block_to_e5m2(v, emax[t] - e_b, lo, hi);
        }
        *reinterpret_cast<uint4*>(sm.k[stage] + ptx::sw128_offset(token, 2 * block)) = lo;
        *reinterpret_cast<uint4*>(sm.k[stage] + ptx::sw128_offset(token, 2 * block + 1)) = hi;
      }
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (FI_SCORER_PRODUCER_CONVERT != 0 && h == 0) {
        const int stage = (i + t) % kStages;
        sm.kscale[stage][token] = kQs8 ? __uint_as_float(s4[t]) : ue8m0_value(emax[t]);
        if (wide[t]) atomicMax(&sm.ring.wide[stage], uint32_t(i + t + 1));
      }
    }
    ptx::fence_proxy_async_smem();
#pragma unroll
    for (int t = 0; t < kT; ++t) ptx::mbar_arrive(&sm.full[(i + t) % kStages]);
  }
  template <bool kQs8>
  __device__ static void produce_mx_pairs(const ScorerArgs& a, Smem& sm) {
    const int n = sm.num_tiles;
    SourceAhead sources;
    sources.start(a, sm);
    for (int j = 0; j < kMxAhead2; ++j) {
      const TileSource src = sources.source(a, sm, j);
      if (j < n) issue_raw(sm, j, src);
      ptx::cp_async_commit();
    }
    int i = 0;
    for (; i + 1 < n; i += 2) produce_mx_step<kQs8, 2>(a, sm, sources, i, n);
    if (i < n) produce_mx_step<kQs8, 1>(a, sm, sources, i, n);
    ptx::cp_async_wait<0>();
  }

  __device__ static void produce_mx(const ScorerArgs& a, Smem& sm) {
    constexpr int kAhead = Mxfp4RawRing::kRaw - 1;
    const int tid = threadIdx.x;
    const int n = sm.num_tiles;
    const bool q_s8 = kS8 && sm.q_s8;
    const int token = tid >> 1, h = tid & 1;
    SourceAhead sources;  // indexed by the tile being issued (kAhead tiles ahead of conversion)
    sources.start(a, sm);
    for (int j = 0; j < kAhead; ++j) {
      const TileSource src = sources.source(a, sm, j);
      if (j < n) issue_raw(sm, j, src);
      ptx::cp_async_commit();
    }
    for (int i = 0; i < n; ++i) {
      const TileSource src = sources.source(a, sm, i + kAhead);
      if (i + kAhead < n) issue_raw(sm, i + kAhead, src);  // into tile i - 1's raw slot, which this thread converted
      ptx::cp_async_commit();
      ptx::cp_async_wait<kAhead>();  // this thread's copies of tile i have landed
      const int stage = i % kStages, slot = i % Mxfp4RawRing::kRaw;
      ptx::mbar_wait(&sm.empty[stage], ((i / kStages) & 1) ^ 1);
      if constexpr (FI_SCORER_PRODUCER_CONVERT != 0) {
        const uint32_t s4 = sm.ring.raw_scale[slot][tid];
        const uint32_t emax = max_block_exponent(s4), emin = min_block_exponent(s4);
        const bool wide = q_s8 && emax - emin > kS8MaxShift;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int block = 2 * h + u;
          const uint4 v = *reinterpret_cast<const uint4*>(sm.ring.raw[slot] + (tid + 128 * u) * 16);
          const uint32_t e_b = block_exponent(s4, block);
          uint4 lo, hi;
          if (q_s8) {  // s8: twice the E2M1 value, shifted to the token's least block exponent
            e2m1_block_to_s8(v, wide ? 0 : e_b - emin, lo, hi);
          } else {
            e2m1_block_to_e5m2(v, emax - e_b, lo, hi);
          }
          *reinterpret_cast<uint4*>(sm.k[stage] + ptx::sw128_offset(token, 2 * block)) = lo;
          *reinterpret_cast<uint4*>(sm.k[stage] + ptx::sw128_offset(token, 2 * block + 1)) = hi;
        }
        if (h == 0) {
          sm.kscale[stage][token] = q_s8 ? __uint_as_float(s4) : ue8m0_value(emax);
          if (wide) atomicMax(&sm.ring.wide[stage], uint32_t(i + 1));
        }
      }
      ptx::fence_proxy_async_smem();
      ptx::mbar_arrive(&sm.full[stage]);
    }
    ptx::cp_async_wait<0>();
  }

  // Register keys: raw tiles by cp.async straight to their place (values with chunks rotated
  // per token pair, raw_offset; scale words as stored). Producer warps 0 and 1 take alternate
  // tiles (two warps keep up, and the copies' address and barrier work is a quarter of four
  // warps'); a tile's full barrier completes when its warp's 32 lanes' copies have landed.
  // Up to kStages tiles in flight.
  static constexpr int kRawWarps = 2;
  __device__ static uint32_t raw_offset(int token, int chunk) {
    return uint32_t(token) * 64 + (uint32_t(chunk ^ ((token >> 1) & 3)) << 4);
  }
  __device__ static void produce_raw(const ScorerArgs& a, Smem& sm) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp >= kRawWarps) return;
    const uint32_t dst0 = raw_offset(lane >> 2, lane & 3);  // + 512 u for token + 8 u
    SourceAhead sources;
    sources.start(a, sm, warp, kRawWarps);
    for (int j = 0, i = warp; i < sm.num_tiles; ++j, i += kRawWarps) {
      const int stage = i % kStages;
      const TileSource src = sources.source(a, sm, j);
      ptx::mbar_wait(&sm.empty[stage], ((i / kStages) & 1) ^ 1);
#pragma unroll
      for (int u = 0; u < 8; ++u) {  // chunk lane & 3 of token (lane >> 2) + 8 u: the rotation is u's
        ptx::cp_async16(sm.k[stage] + dst0 + 512 * u, src.values + lane * 16 + 512 * u);
      }
      if (lane < 16) ptx::cp_async16(&sm.kscale[stage][4 * lane], src.scales + lane * 16);
      ptx::cp_async_arrive(&sm.full[stage]);
    }
  }

  // kTilesPerStep: tiles per step of the converting mxfp4 producer (N = 256): 2 where the
  // producer bounds the kernel (the dense operator: V4-Pro 8,192 x 65,536 4.3% faster), 1 where
  // the consumers do (the fused operator, 2.2% slower with 2: two tiles arrive together, later;
  // docs/experiments.md, 2026-12-02).
  template <int kTilesPerStep = 1>
  __device__ static void produce(const ScorerArgs& a, Smem& sm) {
    static_assert(kTilesPerStep == 1 || kTilesPerStep == 2);
    if constexpr (kRegKeys) {
      produce_raw(a, sm);
    } else if constexpr (kMx && kTilesPerStep == 2) {
      if constexpr (kS8) {
        if (sm.q_s8) return produce_mx_pairs<true>(a, sm);
      }
      produce_mx_pairs<false>(a, sm);
    } else if constexpr (kMx) {
      produce_mx(a, sm);
    } else {
      produce_fp8(a, sm);
    }
  }

  // ---------------------------------------------------------------- consumers
  // This thread's weights: columns col0 + 8 b + 2 (lane % 4) + {0, 1}, b < kNw / 8; in
  // registers, or (256 columns: 64 registers beside 128 accumulators) read from shared
  // memory at each use, blocks b and b + 1 (b even) in one 16-byte load (weight_slot). Four
  // consumer warpgroups with linear columns (112 registers, 68 accumulators) hold the first
  // kHeldPairs of their kNw / 16 pairs and read the rest at each use.
  struct Weights {
    static constexpr int kPairs = kNw / 16;
    static constexpr int kHeldPairs =
        kNw >= 256 ? 0
        : kLinear && kConsumerWgs == 4 && FI_SCORER_LINEAR_HELD_PAIRS < kPairs ? FI_SCORER_LINEAR_HELD_PAIRS
                                                                                : kPairs;
    float4 held[kHeldPairs > 0 ? kHeldPairs : 1];
    const float4* w4;
    __device__ Weights(const Smem& sm, int col0)
        : w4(reinterpret_cast<const float4*>(sm.w + col0) + (threadIdx.x & 3)) {
#pragma unroll
      for (int p = 0; p < kHeldPairs; ++p) held[p] = w4[4 * p];
    }
    // Blocks 2 p (x, y) and 2 p + 1 (z, w).
    __device__ float4 pair(int p) const { return p < kHeldPairs ? held[p] : w4[4 * p]; }
    __device__ float2 operator[](int b) const {
      const float4 q = pair(b >> 1);
      return (b & 1) ? make_float2(q.z, q.w) : make_float2(q.x, q.y);
    }
  };

  // Adds this thread's share of sum_c w_c term(acc_c) at its two positions (p = 0, 1: m0, m1)
  // to s, over kBlocks column blocks from block kB0 on, in column order (acc holds them from
  // its start; kE accumulators, linear columns past them included).
  template <int kB0, int kBlocks, int kE, class Term>
  __device__ static void add_weighted(const float (&acc)[kE], const Weights& wr, float (&s)[kRowsW][2], Term term) {
    static_assert(kB0 % 2 == 0 && kBlocks % 2 == 0 && 4 * kBlocks <= kE, "whole pairs of column blocks");
    auto add = [&](int e, float2 w) {
      const int r = ((kB0 + e) * 8) / kHeads;
      s[r][0] = fmaf(w.x, term(acc[4 * e], 0), s[r][0]);
      s[r][0] = fmaf(w.y, term(acc[4 * e + 1], 0), s[r][0]);
      s[r][1] = fmaf(w.x, term(acc[4 * e + 2], 1), s[r][1]);
      s[r][1] = fmaf(w.y, term(acc[4 * e + 3], 1), s[r][1]);
    };
#pragma unroll
    for (int e = 0; e < kBlocks; e += 2) {
      const float4 w = wr.pair((kB0 + e) / 2);
      add(e, make_float2(w.x, w.y));
      add(e + 1, make_float2(w.z, w.w));
    }
  }

  // Twice the head sums of this thread's two positions over its warpgroup's columns
  // (add_weighted). 2 relu(x) = x + |x| is one FADD on the FMA pipe
  // (max.NaN is an ALU op at half its rate, and the ALU pipe bounded the epilogue), exact for
  // the finite or NaN accumulators an MMA of finite operands gives; every sum is exactly twice
  // relu's, halved with the key scale (scaled_score). kSigned (fp8 keys with a negative scale
  // c, rare): relu(c x) = c min(x, 0), taken as 2 min.NaN(x, 0) (the same values as x - |x|,
  // and it keeps ptxas's WGMMA descriptor math of the N = 32 kernels on the uniform datapath).
  // kB0, kE: accumulators of kE / 4 column blocks from block kB0 on (a slice of the columns,
  // kAlternate256's rare paths); by default all of them.
  template <bool kSigned, int kB0 = 0, int kE = kNw / 2>
  __device__ static void add_head_sums(const float (&acc)[kE], const Weights& wr, bool neg0, bool neg1,
                                       float (&s)[kRowsW][2]) {
    add_weighted<kB0, kE / 4>(acc, wr, s, [&](float v, int p) {
      return kSigned && (p ? neg1 : neg0) ? 2.0f * ptx::min_nan(v, 0.0f) : v + fabsf(v);
    });
  }

  // Linear columns (kLinear): this thread's share of sum_h w_h |x_h| over its two positions
  // (add_weighted; one FFMA per accumulator, |x| is its operand modifier); acc's last
  // kLinCols / 2 (the linear columns) are add_linear's.
  __device__ static void add_abs_sums(const float (&acc)[kMmaN / 2], const Weights& wr, float (&s)[kRowsW][2]) {
    add_weighted<0, kNw / 8>(acc, wr, s, [](float v, int) { return fabsf(v); });
  }

  // acc[64 x kNw] = K_tile * Q_cols^T over D = 128. Hopper's FP8 MMA keeps a truncated
  // running sum (error relative to the accumulator, far above fp32 for same-sign
  // products), so in kExact mode each k32 step starts from zero and the four partial
  // products are added in fp32 on the CUDA cores: the error stays relative to each k32
  // partial. kProduction: one chain of four steps (2e-3 * M).
  template <int kE>  // 2 kE columns: kNw, or a 64-column slice (kAlternate256's rare path)
  __device__ static void mma_tile(float (&acc)[kE], float (&part)[kE], uint64_t desc_k, uint64_t desc_q) {
    if constexpr (FI_SCORER_MMA == 0) {
      ptx::fence_registers(acc);  // opaque values: the epilogue is not folded away
      return;
    }
    if constexpr (kAccuracy == ScoreAccuracy::kProduction) {
      ptx::fence_registers(acc);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) Wgmma<2 * kE, kKind>::mma(acc, desc_k + 2 * kk, desc_q + 2 * kk, kk);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers(acc);
      return;
    }
    ptx::fence_registers(acc);
    ptx::fence_registers(part);
    ptx::wgmma_fence();
    Wgmma<2 * kE, kKind>::mma(acc, desc_k, desc_q, 0);
    Wgmma<2 * kE, kKind>::mma(part, desc_k + 2, desc_q + 2, 0);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_registers(acc);
    ptx::fence_registers(part);
#pragma unroll
    for (int kk = 2; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < kE; ++i) acc[i] += part[i];
      ptx::fence_registers(part);
      ptx::wgmma_fence();
      Wgmma<2 * kE, kKind>::mma(part, desc_k + 2 * kk, desc_q + 2 * kk, 0);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers(part);
    }
#pragma unroll
    for (int i = 0; i < kE; ++i) acc[i] += part[i];
  }

  // Integer path: iacc[64 x kNw] = K_tile * Q_cols^T over D = 128, exact: four s8 k32
  // steps in one chain (|acc| < 128 x 96^2 < 2^21).
  __device__ static void mma_tile_s8(int32_t (&iacc)[kNw / 2], uint64_t desc_k, uint64_t desc_q) {
    if constexpr (FI_SCORER_MMA == 0) {
#pragma unroll
      for (int i = 0; i < kNw / 2; ++i) iacc[i] = 0;
      ptx::fence_registers(iacc);  // opaque values: the epilogue is not folded away
      return;
    }
    ptx::wgmma_fence();
    WgmmaS8<kNw>::first(iacc, desc_k, desc_q);
#pragma unroll
    for (int kk = 1; kk < 4; ++kk) WgmmaS8<kNw>::mma(iacc, desc_k + 2 * kk, desc_q + 2 * kk, 1);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_registers(iacc);
  }

  // Integer path: the key scale of a token from its scale word: 2^(e - 127) / 4 with e the
  // least block exponent (the single chain, every token of the tile shifted to it) or the
  // largest (mma_tile_s8_blocks); NaN if a block is NaN.
  __device__ static float s8_key_scale(uint32_t word, bool blocks) {
    const uint32_t emax = max_block_exponent(word);
    return ue8m0_value(blocks || emax == 0xFF ? emax : min_block_exponent(word)) * 0.25f;
  }

  // Integer path, a flagged tile (some token stored unshifted): acc = the sum over blocks b
  // of each k32 step from zero (exact, |partial| <= 32 x 96^2 < 2^24) times the token's block
  // factor, added in fp32 in block order: 2^(e_min - e_max) for a token shifted to e_min,
  // 2^(e_b - e_max) for an unshifted one (0 below 2^-126). word0, word1: the scale words of
  // the thread's positions m0, m0 + 8. Rare (real vectors never take it): half the columns
  // at a time (fewer registers) and the conversions through I2F.
  __device__ static float s8_block_factor(uint32_t word, int b) {
    const int emax = int(max_block_exponent(word)), emin = int(min_block_exponent(word));
    const int e = emax - emin > int(kS8MaxShift) ? int(block_exponent(word, b)) : emin;
    return __int_as_float(max(e - emax + 127, 0) << 23);
  }
  // Columns [c0, c0 + kCols) of a flagged tile: acc[i] is element c0 / 2 + i of the whole
  // tile's accumulators.
  template <int kCols>
  __device__ static void mma_tile_s8_blocks_cols(float (&acc)[kCols / 2], int c0, uint64_t desc_k, uint64_t desc_q,
                                                 uint32_t word0, uint32_t word1) {
    const uint64_t desc_qc = desc_q + uint64_t(c0 * 128 / 16);  // c0 query rows of 128 bytes further
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      int32_t part[kCols / 2];
      ptx::wgmma_fence();
      WgmmaS8<kCols>::first(part, desc_k + 2 * b, desc_qc + 2 * b);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers(part);
      const float f0 = s8_block_factor(word0, b), f1 = s8_block_factor(word1, b);
#pragma unroll
      for (int i = 0; i < kCols / 2; ++i) {
        const float v = float(part[i]) * ((i & 2) ? f1 : f0);  // element i: position m0 + 8 ((i / 2) % 2)
        acc[i] = b == 0 ? v : acc[i] + v;
      }
    }
  }
  __device__ static void mma_tile_s8_blocks(float (&acc)[kNw / 2], uint64_t desc_k, uint64_t desc_q, uint32_t word0,
                                            uint32_t word1) {
    constexpr int kHalf = kNw / 2;  // columns per MMA
#pragma unroll
    for (int h = 0; h < 2; ++h)
      mma_tile_s8_blocks_cols<kHalf>(*reinterpret_cast<float(*)[kHalf / 2]>(&acc[h * kHalf / 2]), h * kHalf, desc_k,
                                     desc_q, word0, word1);
  }

  // kAlternate256's rare fp32 paths (a flagged tile of the integer path; the E5M2 partials
  // of a group with a wide query head) score 64 columns at a time into s: with the whole
  // tile's accumulators and partials at once ptxas runs out of registers beside the integer
  // chain's 128 and serialises every WGMMA of the kernel. The same bits: a row's columns lie
  // in one slice (two rows per slice at H = 32), added in column order.
  template <bool kS8Blocks, int kQ = 0>
  __device__ static void score_slices(const Weights& wr, float (&s)[kRowsW][2], uint64_t desc_k, uint64_t desc_q,
                                      uint32_t word0, uint32_t word1) {
    float a[32];
    if constexpr (kS8Blocks) {
      mma_tile_s8_blocks_cols<64>(a, 64 * kQ, desc_k, desc_q, word0, word1);
    } else {
      float p[32];
      mma_tile(a, p, desc_k, desc_q + uint64_t(64 * kQ * 128 / 16));
    }
    add_head_sums<false, 8 * kQ, 32>(a, wr, false, false, s);
    if constexpr (kQ + 1 < kNw / 64) score_slices<kS8Blocks, kQ + 1>(wr, s, desc_k, desc_q, word0, word1);
  }

  // add_head_sums<false> over the integer chain's accumulators: kE / 4 column blocks from
  // block kB0 on (all of them, or one half's 128 columns: consume_tiles_s8_halves), into
  // twice the sums of their rows.
  template <int kB0 = 0, int kE = kNw / 2>
  __device__ static void add_head_sums_s8(const int32_t (&iacc)[kE], const Weights& wr,
                                          float (&s)[kE * 2 / kHeads][2]) {
#pragma unroll
    for (int e = 0; e < kE / 4; ++e) {
      const int b = kB0 + e, r = (b * 8) / kHeads - (kB0 * 8) / kHeads;
      const float2 w = wr[b];
      s[r][0] = fmaf(w.x, twice_relu_s8(iacc[4 * e]), s[r][0]);
      s[r][0] = fmaf(w.y, twice_relu_s8(iacc[4 * e + 1]), s[r][0]);
      s[r][1] = fmaf(w.x, twice_relu_s8(iacc[4 * e + 2]), s[r][1]);
      s[r][1] = fmaf(w.y, twice_relu_s8(iacc[4 * e + 3]), s[r][1]);
    }
  }

  // kF16: acc[64 x kNw] = K_tile * Q_cols^T over D = 128 by eight FP16 WGMMA k16 steps in
  // one chain; A (keys) from registers, converted from the fp8 tile. Step s, thread t
  // (lane % 4) and element i of its fragment (k = 2t, 2t+1, 8+2t, 9+2t) stand for dimension
  // d = 64 (s / 4) + 16 t + 4 (s % 4) + i, the order load_queries stores the queries in, so a
  // thread's key bytes for four steps are one 16-byte chunk of its row.
  __device__ static void mma_tile_f16(float (&acc)[kNw / 2], const uint8_t* ktile, int m0, uint64_t desc_q) {
    const int t4 = threadIdx.x & 3;
    uint32_t a[8][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 r0 = *reinterpret_cast<const uint4*>(ktile + ptx::sw128_offset(m0, 4 * h + t4));
      const uint4 r1 = *reinterpret_cast<const uint4*>(ktile + ptx::sw128_offset(m0 + 8, 4 * h + t4));
      const uint32_t w0[4] = {r0.x, r0.y, r0.z, r0.w}, w1[4] = {r1.x, r1.y, r1.z, r1.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        a[4 * h + j][0] = ptx::e4m3x2_to_f16x2(w0[j]);
        a[4 * h + j][1] = ptx::e4m3x2_to_f16x2(w1[j]);
        a[4 * h + j][2] = ptx::e4m3x2_to_f16x2(w0[j] >> 16);
        a[4 * h + j][3] = ptx::e4m3x2_to_f16x2(w1[j] >> 16);
      }
    }
    ptx::fence_registers(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 8; ++s)
      WgmmaF16Rs<kNw>::mma(acc, a[s], desc_q + (s / 4) * (kN * 128 / 16) + 2 * (s % 4), s);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_registers(acc);
  }

  // Register keys: acc[64 x kNw] = sum_b 2^(e_b - e_max) K_b Q_b^T over the four scale blocks
  // b (the k32 steps), each MMA from zero with A converted from the raw tile in registers
  // (E2M1 -> E5M2 times 2^-14 by bit moves, exact: e2m1x8_to_e5m2_lsb), the partials scaled
  // by 2^(e_b - e_max + 14) and added in fp32 in block order: the bits of the shifted-E5M2
  // path (mma_tile) wherever that one is exact, and no rounding where it is not
  // (e_max - e_b > 13). Fragments: thread t of a quad takes word t of each 16-byte block
  // chunk (ldmatrix); its even codes are k 4t..4t+3 of the step, its odd codes k 16+4t..,
  // so the queries are stored in that k order (load_queries).
  // ks0, ks1: the key scales 2^(e_max - 127) of the thread's positions m0, m0 + 8. Both
  // accuracy modes (a single FP8 chain would need the shifted values; kProduction gains nothing).
  // 2^(e_b - e_max + 14) for block b of a token's scale word (0 below 2^-126), the same bits
  // either way: kOffset, from the token's offset t = 141 - e_max (max(e_b + t, 0) is one
  // VIADDMNMX: V4 decode B64 2% faster, groups of N <= 64); else t = e_max (an IADD3 and a
  // VIMNMX: groups of N = 128, whose dense scorer measured 4-6% slower with the offsets;
  // docs/experiments.md, 2026-12-04).
  template <bool kOffset>
  __device__ static float block_factor(uint32_t s4, int t, int b) {
    const int e = int(block_exponent(s4, b));
    return __int_as_float(max(kOffset ? e + t : e - t + 127 + 14, 0) << 23);
  }
  __device__ static void mma_tile_reg(float (&acc)[kNw / 2], const uint8_t* raw, const uint32_t* words, int m0,
                                      uint64_t desc_q, uint64_t* empty, float& ks0, float& ks1) {
    const int lane = threadIdx.x & 31, i = lane >> 3;
    const int row = (m0 & ~15) + (lane & 7) + 8 * (i & 1);  // matrix i: rows m0 | m0 + 8, chunk i / 2 (+ 2)
    uint32_t w[8];  // (m0, c0), (m1, c0), (m0, c1), (m1, c1), then chunks 2, 3
    ptx::ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&w[0]), raw + raw_offset(row, i >> 1));
    ptx::ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&w[4]), raw + raw_offset(row, 2 + (i >> 1)));
    const uint32_t s0 = words[m0], s1 = words[m0 + 8];
    const int emax0 = int(max_block_exponent(s0)), emax1 = int(max_block_exponent(s1));
    ks0 = ue8m0_value(uint32_t(emax0));
    ks1 = ue8m0_value(uint32_t(emax1));
    ptx::mbar_arrive(empty);  // the tile's bytes are in registers: the stage is free
    if constexpr (FI_SCORER_MMA == 0) {  // timing only: no conversion, MMAs or partial adds
#pragma unroll
      for (int e = 0; e < kNw / 2; ++e) acc[e] = __uint_as_float(0x3F800000u | ((w[e % 8] ^ (e & 8 ? s1 : s0)) >> 9));
      ks0 = ks1 = 1.0f;
      return;
    }
    uint32_t a[4][4];
    auto convert = [&](int b) {
      e2m1x8_to_e5m2_lsb(w[2 * b], a[b][0], a[b][2]);
      e2m1x8_to_e5m2_lsb(w[2 * b + 1], a[b][1], a[b][3]);
    };
    // Block b's factor for accumulator element e (rows m0 | m0 + 8 by (e / 2) % 2).
    float rel0[4], rel1[4];
    constexpr bool kOffset = kNw <= 64;
    const int c0 = kOffset ? 127 + 14 - emax0 : emax0, c1 = kOffset ? 127 + 14 - emax1 : emax1;
    auto factors = [&](int b) {
      rel0[b] = block_factor<kOffset>(s0, c0, b);
      rel1[b] = block_factor<kOffset>(s1, c1, b);
    };
    auto rel = [&](int b, int e) { return (e / 2) % 2 ? rel1[b] : rel0[b]; };
    if constexpr (kNw <= 64 && kConsumerWgs == 3) {
      // Three consumer warpgroups (152 registers): two partial sets, the second group issued
      // after the first one's adds (reg_close).
      const RegTile k{{w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]}, s0, s1, c0, c1, 0.0f, 0};
      float p0[kNw / 2], p1[kNw / 2];
      uint32_t a0[4], a1[4];
      reg_convert(k, 0, a0);
      reg_convert(k, 1, a1);
      reg_issue(a0, a1, p0, p1, desc_q, 0);
      reg_close(k, p0, p1, acc, desc_q);
    } else if constexpr (kNw <= 64) {
      // Four partials in two commit groups (blocks 0, 1, then 2, 3), in four partial sets:
      // converting blocks 2, 3 and adding partials 0, 1 overlap the second group's MMAs
      // (measured 1-3% faster than one group and one wait at v4-pro decode B64, docs/experiments.md).
      float p[4][kNw / 2];
      auto issue = [&](int b0, float(&x)[kNw / 2], float(&y)[kNw / 2]) {
        ptx::wgmma_fence();
        WgmmaE5m2Rs<kNw>::mma(x, a[b0], desc_q + 2 * b0, 0);
        WgmmaE5m2Rs<kNw>::mma(y, a[b0 + 1], desc_q + 2 * b0 + 2, 0);
        ptx::wgmma_commit();
      };
      convert(0);
      convert(1);
#pragma unroll
      for (int b = 0; b < 4; ++b) ptx::fence_registers(p[b]);
      issue(0, p[0], p[1]);
      convert(2);
      convert(3);
      issue(2, p[2], p[3]);
#pragma unroll
      for (int b = 0; b < 4; ++b) factors(b);
      ptx::wgmma_wait<1>();
      ptx::fence_registers(p[0]);
      ptx::fence_registers(p[1]);
#pragma unroll
      for (int e = 0; e < kNw / 2; ++e) acc[e] = fmaf(p[1][e], rel(1, e), p[0][e] * rel(0, e));
      ptx::wgmma_wait<0>();
      ptx::fence_registers(p[2]);
      ptx::fence_registers(p[3]);
#pragma unroll
      for (int e = 0; e < kNw / 2; ++e) acc[e] = fmaf(p[3][e], rel(3, e), fmaf(p[2][e], rel(2, e), acc[e]));
    } else {  // kNw = 128: block 0 into acc, then one partial at a time (three waits)
      float p[kNw / 2];
      convert(0);
      convert(1);
      ptx::fence_registers(acc);
      ptx::fence_registers(p);
      ptx::wgmma_fence();
      WgmmaE5m2Rs<kNw>::mma(acc, a[0], desc_q, 0);
      WgmmaE5m2Rs<kNw>::mma(p, a[1], desc_q + 2, 0);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers(acc);
      ptx::fence_registers(p);
      factors(0);
      factors(1);
#pragma unroll
      for (int e = 0; e < kNw / 2; ++e) acc[e] = fmaf(p[e], rel(1, e), acc[e] * rel(0, e));
#pragma unroll
      for (int b = 2; b < 4; ++b) {
        convert(b);
        ptx::fence_registers(p);
        ptx::wgmma_fence();
        WgmmaE5m2Rs<kNw>::mma(p, a[b], desc_q + 2 * b, 0);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_registers(p);
        factors(b);
#pragma unroll
        for (int e = 0; e < kNw / 2; ++e) acc[e] = fmaf(p[e], rel(b, e), acc[e]);
      }
    }
  }

  // consume_tiles_reg_pairs: a register-key tile in two halves around its first MMA group.
  // RegTile: the tile's raw E2M1 words and scale words in registers (its stage already freed).
  struct RegTile {
    uint32_t w[8];  // as in mma_tile_reg
    uint32_t s0, s1;
    int c0, c1;     // the factors' offsets 141 - e_max (block_factor<true>)
    float ks;       // this lane's key scale after the reduce-scatter
    int tile;
  };
  __device__ static RegTile reg_open(Smem& sm, int i, int m0, int x, const SampleOrder& order) {
    const int stage = ptx::warp_uniform(i % kStages);
    ptx::mbar_wait(&sm.full[stage], (i / kStages) & 1);
    const int lane = threadIdx.x & 31, q = lane >> 3;
    const int row = (m0 & ~15) + (lane & 7) + 8 * (q & 1);
    const uint8_t* raw = sm.k[stage];
    RegTile k;
    ptx::ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&k.w[0]), raw + raw_offset(row, q >> 1));
    ptx::ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&k.w[4]), raw + raw_offset(row, 2 + (q >> 1)));
    const uint32_t* words = reinterpret_cast<const uint32_t*>(sm.kscale[stage]);
    k.s0 = words[m0];
    k.s1 = words[m0 + 8];
    const int emax0 = int(max_block_exponent(k.s0)), emax1 = int(max_block_exponent(k.s1));
    k.ks = ue8m0_value(uint32_t((x & 1) ? emax1 : emax0));
    k.c0 = 127 + 14 - emax0;
    k.c1 = 127 + 14 - emax1;
    k.tile = tile_at(order, i);
    ptx::mbar_arrive(&sm.empty[stage]);
    return k;
  }
  __device__ static void reg_convert(const RegTile& k, int b, uint32_t (&a)[4]) {
    e2m1x8_to_e5m2_lsb(k.w[2 * b], a[0], a[2]);
    e2m1x8_to_e5m2_lsb(k.w[2 * b + 1], a[1], a[3]);
  }
  // Blocks b0, b0 + 1's MMAs from zero into p0, p1 (one commit group).
  __device__ static void reg_issue(const uint32_t (&a0)[4], const uint32_t (&a1)[4], float (&p0)[kNw / 2],
                                   float (&p1)[kNw / 2], uint64_t desc_q, int b0) {
    ptx::fence_registers(p0);
    ptx::fence_registers(p1);
    ptx::wgmma_fence();
    WgmmaE5m2Rs<kNw>::mma(p0, a0, desc_q + 2 * b0, 0);
    WgmmaE5m2Rs<kNw>::mma(p1, a1, desc_q + 2 * b0 + 2, 0);
    ptx::wgmma_commit();
  }
  // The rest of the tile after its first group's issue, as mma_tile_reg (three consumers):
  // blocks 2, 3 converted, the factors, the adds of partials 0, 1, blocks 2, 3's group, their adds.
  __device__ static void reg_close(const RegTile& k, float (&p0)[kNw / 2], float (&p1)[kNw / 2],
                                   float (&acc)[kNw / 2], uint64_t desc_q) {
    uint32_t a2[4], a3[4];
    reg_convert(k, 2, a2);
    reg_convert(k, 3, a3);
    float rel0[4], rel1[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      rel0[b] = block_factor<true>(k.s0, k.c0, b);
      rel1[b] = block_factor<true>(k.s1, k.c1, b);
    }
    auto rel = [&](int b, int e) { return (e / 2) % 2 ? rel1[b] : rel0[b]; };
    ptx::wgmma_wait<0>();
    ptx::fence_registers(p0);
    ptx::fence_registers(p1);
#pragma unroll
    for (int e = 0; e < kNw / 2; ++e) acc[e] = fmaf(p1[e], rel(1, e), p0[e] * rel(0, e));
    reg_issue(a2, a3, p0, p1, desc_q, 2);
    ptx::wgmma_wait<0>();
    ptx::fence_registers(p0);
    ptx::fence_registers(p1);
#pragma unroll
    for (int e = 0; e < kNw / 2; ++e) acc[e] = fmaf(p1[e], rel(3, e), fmaf(p0[e], rel(2, e), acc[e]));
  }

  // Register keys, N <= 64, three consumer warpgroups (kRegKeyPairs sinks): the warpgroup's
  // tiles i, i2 = i + 3 per iteration, nothing in flight at the back edge (ptxas C7514):
  //   open i, G1(i) | close i | open i2, G1(i2) | put i | close i2 | put i2
  // so tile i's head sums, reduce and puts run under tile i2's first MMA group. Same scores
  // as consume_tiles (the same adds in the same order).
  template <class Sink>
  __device__ __forceinline__ static void consume_tiles_reg_pairs(Smem& sm, int cw_in, Sink& sink) {
    const int cw = ptx::warp_uniform(cw_in);
    const int t = threadIdx.x - 128;
    const int lane = t & 31, warp = (t >> 5) & 3;
    const int m0 = warp * 16 + (lane >> 2);
    const int x = lane & 3;
    const int m = (x & 1) ? m0 + 8 : m0;
    const uint64_t desc_q = ptx::smem_desc_sw128(sm.q);
    LaneRows<Sink> rows(sm, 0, x, sink);
    const Weights wr(sm, 0);
    PassCursor pass(sm);
    const int num_tiles = sm.num_tiles;
    const SampleOrder order = sm.order;
    auto finish = [&](const float(&acc)[kNw / 2], const RegTile& k) {
      float s[kRowsW][2];
#pragma unroll
      for (int r = 0; r < kRowsW; ++r) s[r][0] = s[r][1] = 0.0f;
      add_head_sums<false>(acc, wr, false, false, s);
      pass.seek(sm, k.tile);
      float out[kOut];
      quad_reduce_scatter(s, x, out);
      rows.put(sm, sink, pass.tile_first(k.tile), m, pass.mask, out, k.ks);
    };
    float acc[kNw / 2], p0[kNw / 2], p1[kNw / 2];
    for (int i = cw; i < num_tiles; i += 2 * kConsumerWgs) {
      const int i2 = i + kConsumerWgs;
      const RegTile k1 = reg_open(sm, i, m0, x, order);
      {
        uint32_t a0[4], a1[4];
        reg_convert(k1, 0, a0);
        reg_convert(k1, 1, a1);
        reg_issue(a0, a1, p0, p1, desc_q, 0);
        reg_close(k1, p0, p1, acc, desc_q);
      }
      if (i2 >= num_tiles) {
        finish(acc, k1);
        break;
      }
      const RegTile k2 = reg_open(sm, i2, m0, x, order);
      uint32_t a0[4], a1[4];
      reg_convert(k2, 0, a0);
      reg_convert(k2, 1, a1);
      reg_issue(a0, a1, p0, p1, desc_q, 0);
      finish(acc, k1);
      reg_close(k2, p0, p1, acc, desc_q);
      finish(acc, k2);
    }
    rows.flag_nan(sm);
  }

  // The pass of the tile being consumed, kept in registers (passes change rarely: only
  // in a group that spans requests); seek() advances it as the tile index grows.
  struct PassCursor {
    int p = -1, next_begin = 0, tile_begin = 0;
    int32_t first = 0;  // positions lie in int32 windows (GroupRow)
    uint32_t mask = 0;
    __device__ explicit PassCursor(const Smem& sm) { next_begin = sm.num_passes > 0 ? sm.passes[0].tile_begin : INT_MAX; }
    __device__ void seek(const Smem& sm, int i) {
      while (i >= next_begin) {
        const ScorePass& ps = sm.passes[++p];
        tile_begin = ps.tile_begin;
        first = int32_t(ps.first);
        mask = ps.mask;
        next_begin = p + 1 < sm.num_passes ? sm.passes[p + 1].tile_begin : INT_MAX;
      }
    }
    // The first position of tile i: inside the pass's union window, so an int32.
    __device__ int32_t tile_first(int i) const { return first + (i - tile_begin) * cuda::kScorerTile; }
  };

  // Scores each lane hands to the sink per tile: after the quad's reduce-scatter, lane x
  // holds position j = x & 1 of rows rw = 2 w + (x >> 1), w < kOut (kRowsW = 1: row 0, and
  // lanes x >= 2 hold a copy that they do not put).
  static constexpr int kOut = kRowsW >= 2 ? kRowsW / 2 : 1;
  __device__ static int out_row(int w, int x) { return kRowsW >= 2 ? 2 * w + (x >> 1) : 0; }

  // A lane's row windows for the tiles that cross an edge: in registers, or, where registers
  // are short (four consumer warpgroups), read from shared memory on those tiles alone.
  struct EdgesInRegisters {
    int32_t start[kOut], end[kOut];
    __device__ void set(int w, int32_t st, int32_t en) {
      start[w] = st;
      end[w] = en;
    }
    __device__ int32_t start_of(const Smem&, int, int w) const { return start[w]; }
    __device__ int32_t end_of(const Smem&, int, int w) const { return end[w]; }
  };
  struct EdgesInShared {
    __device__ void set(int, int32_t, int32_t) {}
    __device__ int32_t start_of(const Smem& sm, int r, int) const { return sm.rows[r].start; }
    __device__ int32_t end_of(const Smem& sm, int r, int) const { return sm.rows[r].end; }
  };
  // A lane's NaN flags: the max.NaN of every score put, NaN exactly when one of them is (one
  // instruction per put), set in the rows at the end. Warp puts flag a row at the put instead
  // (NoProbes).
  struct NanProbes {
    float probe[kOut];
    __device__ void clear(int w) { probe[w] = 0.0f; }
    __device__ void see(int w, float v) { probe[w] = ptx::max_nan(probe[w], v); }
    __device__ bool flagged(int w) const { return isnan(probe[w]); }
  };
  struct NoProbes {
    __device__ void clear(int) {}
    __device__ void see(int, float) {}
    __device__ bool flagged(int) const { return false; }
  };

  // This lane's rows after the quad's reduce-scatter (out_row): group index, the sink's
  // handle of the global row (sink_row), window (empty for a lane that puts nothing), gate
  // and NaN flags; the puts of one tile's sums. A tile that lies inside the windows of all
  // the lane's rows, in a pass that holds them all, puts with no per-position checks (one
  // test per tile instead of three per put; kRowsW >= 2, where every lane puts). With four
  // consumer warpgroups (112 registers) the windows stay in shared memory, read on the tiles
  // at their edges.
  // FI_FUSED_WARP_PUTS = 1 (not yet measured on a GPU): gated sinks take a whole warp's
  // scores at once (put_warp): the gate is a float compare (v < key_to_float(gate): the
  // float_key of v is below the gate), a warp with no score past it skips the put in one
  // uniform branch, and the lanes of a row append with one atomic.
  template <class Sink>
  struct LaneRows {
    static constexpr bool kInsideTiles = kRowsW >= 2;
    static constexpr bool kEdgesShared = kInsideTiles && kConsumerWgs == 4;  // owner is then every lane
    static constexpr bool kGated = GatesPuts<Sink>;
    static constexpr bool kWarpPuts = kGated && FI_FUSED_WARP_PUTS;
    // A row's gate as of the last step that raised it: its ordered bits (a score passes with
    // ordered_bits >= gate, also for a NaN: exact), or with warp puts key_to_float of it.
    using Gate = std::conditional_t<kWarpPuts, float, uint32_t>;
    __device__ static Gate gate_of(uint32_t g) {
      if constexpr (kWarpPuts) {
        return key_to_float(g);  // 0 -> NaN
      } else {
        return g;
      }
    }
    int r_of[kOut];
    int64_t row_of[kOut];
    std::conditional_t<kEdgesShared, EdgesInShared, EdgesInRegisters> edges;
    std::conditional_t<kWarpPuts, NoProbes, NanProbes> nan;
    Gate gate[kOut];
    uint32_t rows_mask = 0;
    int32_t lo = 0, hi = -1;  // tiles whose first position p has lo <= p <= hi lie in every window
    __device__ LaneRows(const Smem& sm, int row0, int x, const Sink& sink) {
      int32_t lo32 = INT32_MIN, hi32 = INT32_MAX;
#pragma unroll
      for (int w = 0; w < kOut; ++w) {
        r_of[w] = row0 + out_row(w, x);
        const GroupRow& gr = sm.rows[r_of[w]];
        const bool owner = kRowsW >= 2 || x < 2;
        row_of[w] = ptx::held(sink_row(sink, gr.row));
        const int32_t st = owner ? gr.start : 0, en = owner ? gr.end : 0;
        edges.set(w, st, en);
        nan.clear(w);
        gate[w] = gate_of(0u);  // no score is below it
        rows_mask |= 1u << r_of[w];
        lo32 = max(lo32, st);
        hi32 = min(hi32, en);
      }
      lo = lo32;
      hi = hi32 - cuda::kScorerTile;  // hi32 = the least end >= 0
    }
    __device__ void regate(const Sink& sink) {
#pragma unroll
      for (int w = 0; w < kOut; ++w) gate[w] = gate_of(sink.gate(r_of[w]));
    }
    // Whether score v of output w goes to the sink: every score without a gate, else those
    // not below it (with warp puts !(v < gate): NaNs and the gate's own float pass, and the
    // sink's exact compare decides them).
    __device__ bool passes(int w, float v) const {
      if constexpr (kWarpPuts) {
        return !(v < gate[w]);
      } else if constexpr (kGated) {
        return ordered_bits(v) >= gate[w];
      } else {
        return true;
      }
    }
    // The tile whose first position is `first`, in the pass whose row mask is `mask`: out[w] *
    // ks at position first + m to every row in window. The whole warp, converged.
    __device__ void put(Smem& sm, Sink& sink, int32_t first, int m, uint32_t mask, const float (&out)[kOut],
                        float ks) {
      const int64_t pos = int64_t(first) + m;
      if constexpr (kWarpPuts) {
        const bool inside = kInsideTiles && (mask & rows_mask) == rows_mask && first >= lo && first <= hi;
        // The lanes that put to this lane's row: x >> 1 picks it (out_row).
        const uint32_t mates = kRowsW >= 2 ? ((threadIdx.x & 2) ? 0xCCCCCCCCu : 0x33333333u) : ~0u;
#pragma unroll
        for (int w = 0; w < kOut; ++w) {
          const float v = scaled_score(out[w], ks);
          bool in = inside;
          if (!in) {
            const int32_t st = edges.start_of(sm, r_of[w], w), en = edges.end_of(sm, r_of[w], w);
            in = ((mask >> r_of[w]) & 1) && pos >= st && pos < en;
          }
          const bool past = in && passes(w, v);
          if (sink.put_warp(r_of[w], pos, v, past, gate[w], mates) && past && isnan(v)) sm.rows[r_of[w]].nan = 1;
        }
        return;
      }
      if (kInsideTiles && (mask & rows_mask) == rows_mask && first >= lo && first <= hi) {
#pragma unroll
        for (int w = 0; w < kOut; ++w) {
          const float v = scaled_score(out[w], ks);
          nan.see(w, v);
          if (passes(w, v)) sink.put(r_of[w], row_of[w], pos, v);
        }
        return;
      }
#pragma unroll
      for (int w = 0; w < kOut; ++w) {
        const int32_t st = edges.start_of(sm, r_of[w], w), en = edges.end_of(sm, r_of[w], w);
        if (((mask >> r_of[w]) & 1) && pos >= st && pos < en) {
          const float v = scaled_score(out[w], ks);
          nan.see(w, v);
          if (passes(w, v)) sink.put(r_of[w], row_of[w], pos, v);
        }
      }
    }
    __device__ void flag_nan(Smem& sm) const {
#pragma unroll
      for (int w = 0; w < kOut; ++w)
        if (nan.flagged(w)) sm.rows[r_of[w]].nan = 1;
    }
  };

  // A position's score from twice its head sum and the key scale: the product, halved
  // (exact unless the score is subnormal or above 2^127 in magnitude).
  __device__ static float scaled_score(float twice_sum, float ks) { return (twice_sum * ks) * 0.5f; }

  // Sums the head sums s[rw][j] of the quad's four lanes, scattering the results: each
  // sum is (a + b) + (c + d) of the lanes' partials (xor 1, then xor 2), the same bits on
  // every lane that an all-reduce in that order gives, with a quarter of its shuffles.
  // kR < kRowsW: the first kR rows of a set (one half's, consume_tiles_s8_halves); output w
  // depends on rows 2 w and 2 w + 1 alone.
  template <int kR = kRowsW>
  __device__ static void quad_reduce_scatter(const float (&s)[kR][2], int x, float (&out)[kR >= 2 ? kR / 2 : 1]) {
    const bool b0 = x & 1, b1 = x & 2;
    float h[kR];
#pragma unroll
    for (int rw = 0; rw < kR; ++rw) {
      const float keep = b0 ? s[rw][1] : s[rw][0];
      const float send = b0 ? s[rw][0] : s[rw][1];
      h[rw] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, 1);
    }
    if constexpr (kR == 1) {
      out[0] = h[0] + __shfl_xor_sync(0xFFFFFFFFu, h[0], 2);
    } else {
#pragma unroll
      for (int w = 0; w < kR / 2; ++w) {
        const float keep = b1 ? h[2 * w + 1] : h[2 * w];
        const float send = b1 ? h[2 * w] : h[2 * w + 1];
        out[w] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, 2);
      }
    }
  }

  // Linear columns: out[w] (the quad's sum of add_abs_sums at this lane's row out_row(w, x) and
  // position x & 1) plus the row's linear part, (t0 + t1) + t2 times 2^-s, taken with the sign
  // of the key scale: 2 relu(c x) = c (x - |x|) for a key scale c < 0, and the caller scales by
  // |c|. Lanes 2 y and 2 y + 1 hold terms t0, t1 and t2, 0 of row 2 w + y at both positions
  // (linear_column): each adds its pair and swaps the other position's sum with its partner.
  __device__ static void add_linear(const float (&acc)[kMmaN / 2], int x, const float (&lin_c)[kOut], bool neg,
                                    float (&out)[kOut]) {
#pragma unroll
    for (int w = 0; w < kOut; ++w) {
      const float* e = acc + kNw / 2 + 4 * w;
      const float p0 = e[0] + e[1], p1 = e[2] + e[3];
      const bool b0 = x & 1;
      const float keep = b0 ? p1 : p0, send = b0 ? p0 : p1;
      const float lin = keep + __shfl_xor_sync(0xFFFFFFFFu, send, 1);
      out[w] = fmaf(lin, neg ? -lin_c[w] : lin_c[w], out[w]);
    }
  }

  // Warpgroups 1, 2 (cw = 0, 1). N = 256: both take every tile, each its half of the
  // columns (kNw = 128, whole rows), unless kAlternate256. N <= 128 (or kAlternate256):
  // they take alternate tiles, all columns.
  // sink.put(r, row, position, score) for every in-window position of the tile's pass;
  // lockstep sinks: sink.step(sm, t) before each step (see the file comment). Row windows,
  // the pass and the NaN flags live in registers: the loop reads only the key scales.
  // The integer path's loop is its own instance (kUseS8), so neither path holds the
  // other's accumulators.
  template <class Sink>
  __device__ __forceinline__ static void consume(Smem& sm, int cw, Sink& sink) {
    if constexpr (AsksRegKeyPairs<Sink> && FI_SCORER_MMA != 0 && FI_SCORER_EPILOGUE != 0 && kRegKeys && kNw <= 64 &&
                  kConsumerWgs == 3 && !Sink::kLockstep) {
      consume_tiles_reg_pairs(sm, cw, sink);
      return;
    }
    if constexpr (kS8) {
      if (sm.q_s8) {
        if constexpr (kAlternate256 && !Sink::kLockstep) {
          consume_tiles_s8_halves(sm, cw, sink);
        } else {
          consume_tiles<true>(sm, cw, sink);
        }
        return;
      }
    }
    consume_tiles<false>(sm, cw, sink);
  }

  // kAlternate256's integer path, software-pipelined within the warpgroup. A tile's
  // columns are two halves of 128 (whole rows: H = 64, rows 0-1 | 2-3; H = 32, 0-3 | 4-7),
  // each one s8 m64n128 chain of four k32 steps, so one half's MMAs run under the other's
  // head sums. ptxas serialises every WGMMA of the kernel when a group stays in flight
  // across a loop's back edge (C7514), so each iteration takes two of the warpgroup's
  // tiles, i and i2 = i + 2, and ends with nothing in flight:
  //   A(i) B(i) | wait A(i), put A(i) | A(i2) | wait B(i), put B(i) | B(i2) |
  //   wait A(i2), put A(i2) | wait B(i2), put B(i2)
  // Three of the four halves' MMAs run under head sums. Where tile i or i2 is flagged
  // (wide), i2 is past the end, or a lockstep sink's step between them acts (votes,
  // compactions: they run with no MMA in flight), the tiles go one at a time instead
  // (A B | wait A, put A | wait B, put B; a flagged tile: score_slices). Every put of a
  // tile precedes the sink's next acting step, as in consume_tiles.
  // Registers: 2 x 64 accumulators, as the m64n256 chain's 128.
  template <class Sink>
  __device__ __forceinline__ static void consume_tiles_s8_halves(Smem& sm, int cw_in, Sink& sink) {
    static_assert(kAlternate256 && kRowsW % 2 == 0 && kOut % 2 == 0, "two halves of whole rows");
    constexpr int kHalfOut = kOut / 2;
    const int cw = ptx::warp_uniform(cw_in);  // alternate tiles: known-uniform, as consume_tiles
    const int t = threadIdx.x - 128;
    const int lane = t & 31, warp = (t >> 5) & 3;
    const int m0 = warp * 16 + (lane >> 2), m1 = m0 + 8;
    const int x = lane & 3;
    const int m = (x & 1) ? m1 : m0;
    const uint64_t desc_q = ptx::smem_desc_sw128(sm.q);
    const uint64_t desc_q_b = desc_q + uint64_t(128 * 128 / 16);  // column 128 on
    int r_of[kOut];
    int64_t row_of[kOut];
    int32_t start[kOut], end[kOut];
    bool nan[kOut];
#pragma unroll
    for (int w = 0; w < kOut; ++w) {
      r_of[w] = out_row(w, x);
      const GroupRow& gr = sm.rows[r_of[w]];
      row_of[w] = sink_row(sink, gr.row);
      start[w] = gr.start;
      end[w] = gr.end;
      nan[w] = false;
    }
    const Weights wr(sm, 0);
    PassCursor pass(sm);
    const int num_tiles = sm.num_tiles;
    const SampleOrder order = sm.order;
    const int steps = Sink::kLockstep ? (num_tiles + 1) / 2 : (num_tiles - cw + 1) / 2;
    // One tile of this warpgroup: its stage, scale words and position, after its full barrier.
    struct Tile {
      int index, stage, tile;
      uint32_t word0, word1;
      bool wide;
      float ks;
      uint64_t desc_k;
    };
    auto open = [&](int i) {
      Tile tl;
      tl.index = i;
      tl.stage = ptx::warp_uniform(i % kStages);
      tl.tile = tile_at(order, i);
      ptx::mbar_wait(&sm.full[tl.stage], (i / kStages) & 1);
      tl.word0 = __float_as_uint(sm.kscale[tl.stage][m0]);
      tl.word1 = __float_as_uint(sm.kscale[tl.stage][m1]);
      tl.wide = sm.ring.wide[tl.stage] == uint32_t(i + 1);
      const float ks0 = s8_key_scale(tl.word0, tl.wide), ks1 = s8_key_scale(tl.word1, tl.wide);
      tl.ks = (x & 1) ? ks1 : ks0;
      tl.desc_k = ptx::smem_desc_sw128(sm.k[tl.stage]);
      return tl;
    };
    auto put = [&](int w, int64_t pos, float v) {
      if (((pass.mask >> r_of[w]) & 1) && pos >= start[w] && pos < end[w]) {
        nan[w] |= isnan(v);
        sink.put(r_of[w], row_of[w], pos, v);
      }
    };
    auto issue = [](int32_t (&acc)[64], uint64_t desc_k, uint64_t dq) {
      ptx::wgmma_fence();
      WgmmaS8<128>::first(acc, desc_k, dq);
#pragma unroll
      for (int kk = 1; kk < 4; ++kk) WgmmaS8<128>::mma(acc, desc_k + 2 * kk, dq + 2 * kk, 1);
      ptx::wgmma_commit();
    };
    // Puts half h of tile tl from its accumulators (their group retired); half B also
    // releases the stage.
    auto finish = [&](auto half, int32_t (&acc)[64], const Tile& tl) {
      constexpr int h = decltype(half)::value;
      ptx::fence_registers(acc);
      if constexpr (h == 1) ptx::mbar_arrive(&sm.empty[tl.stage]);
      pass.seek(sm, tl.tile);
      const int64_t pos = int64_t(pass.tile_first(tl.tile)) + m;
      float s[kRowsW / 2][2];
#pragma unroll
      for (int r = 0; r < kRowsW / 2; ++r) s[r][0] = s[r][1] = 0.0f;
      add_head_sums_s8<h * 16, 64>(acc, wr, s);
      float out[kHalfOut];
      quad_reduce_scatter<kRowsW / 2>(s, x, out);
#pragma unroll
      for (int w = 0; w < kHalfOut; ++w) put(h * kHalfOut + w, pos, scaled_score(out[w], tl.ks));
    };
    using HalfA = std::integral_constant<int, 0>;
    using HalfB = std::integral_constant<int, 1>;
    int32_t acc_a[64], acc_b[64];
    auto one_tile = [&](const Tile& tl) {
      if (tl.wide) {  // rare: the whole tile in fp32 slices
        float s[kRowsW][2];
#pragma unroll
        for (int r = 0; r < kRowsW; ++r) s[r][0] = s[r][1] = 0.0f;
        score_slices<true>(wr, s, tl.desc_k, desc_q, tl.word0, tl.word1);
        ptx::mbar_arrive(&sm.empty[tl.stage]);
        pass.seek(sm, tl.tile);
        float out[kOut];
        quad_reduce_scatter(s, x, out);
        const int64_t pos = int64_t(pass.tile_first(tl.tile)) + m;
#pragma unroll
        for (int w = 0; w < kOut; ++w) put(w, pos, scaled_score(out[w], tl.ks));
        return;
      }
      issue(acc_a, tl.desc_k, desc_q);
      issue(acc_b, tl.desc_k, desc_q_b);
      ptx::wgmma_wait<1>();
      finish(HalfA{}, acc_a, tl);
      ptx::wgmma_wait<0>();
      finish(HalfB{}, acc_b, tl);
    };
    // j: this warpgroup's tile index (tile i = cw + 2 j), also the lockstep step.
    for (int j = 0; j < steps; j += 2) {
      const int i = cw + 2 * j, i2 = i + 2;
      if constexpr (Sink::kLockstep) sink.step(sm, t, j);
      if (i >= num_tiles) {  // lockstep: the second warpgroup's missing last tile
        if constexpr (Sink::kLockstep) {
          if (j + 1 < steps) sink.step(sm, t, j + 1);
        }
        continue;
      }
      bool pair = j + 1 < steps && i2 < num_tiles;
      if constexpr (Sink::kLockstep) pair = pair && !sink.acts(j + 1);
      const Tile t1 = open(i);
      if (!pair || t1.wide) {
        one_tile(t1);
        if (j + 1 < steps) {
          if constexpr (Sink::kLockstep) sink.step(sm, t, j + 1);
          if (i2 < num_tiles) one_tile(open(i2));
        }
        continue;
      }
      issue(acc_a, t1.desc_k, desc_q);
      issue(acc_b, t1.desc_k, desc_q_b);
      ptx::wgmma_wait<1>();
      finish(HalfA{}, acc_a, t1);
      const Tile t2 = open(i2);
      if (t2.wide) {
        ptx::wgmma_wait<0>();
        finish(HalfB{}, acc_b, t1);
        one_tile(t2);
        continue;
      }
      issue(acc_a, t2.desc_k, desc_q);
      ptx::wgmma_wait<1>();
      finish(HalfB{}, acc_b, t1);
      issue(acc_b, t2.desc_k, desc_q_b);
      ptx::wgmma_wait<1>();
      finish(HalfA{}, acc_a, t2);
      ptx::wgmma_wait<0>();
      finish(HalfB{}, acc_b, t2);
    }
#pragma unroll
    for (int w = 0; w < kOut; ++w)
      if (nan[w]) sm.rows[r_of[w]].nan = 1;
  }

  template <bool kUseS8, class Sink>
  __device__ static void consume_tiles(Smem& sm, int cw_in, Sink& sink) {
    // cw and the stage index are the same on every lane. Where it measured faster, the loop
    // takes them as known-uniform values (ptx::warp_uniform), so descriptors and barrier
    // addresses derived from them can live in uniform registers: the lockstep fp8 loop (fused
    // prefill; its query descriptors, V3.2 2.1-2.7% faster) and the loops of warpgroups that
    // take alternate tiles (decode; cw and the stage). The shared-tile loops (N = 256: dense
    // prefill, the integer path) measured 1-10% slower that way and keep plain values
    // (docs/experiments.md, 2026-12-01).
    constexpr bool kUniformStage = !kShareTiles || kConsumerWgs == 4;
    constexpr bool kUniformCw = kUniformStage || (kF16 && Sink::kLockstep);
    const int cw = kUniformCw ? ptx::warp_uniform(cw_in) : cw_in;
    constexpr bool kPingPong =
        (kShareTiles && kF16) || (!kShareTiles && Sink::kLockstep && kConsumerWgs == 2 && !kAlternate256);
    const int t = threadIdx.x - 128;  // 0..(128 x kConsumerWgs - 1)
    const int lane = t & 31, warp = (t >> 5) & 3;
    const int m0 = warp * 16 + (lane >> 2), m1 = m0 + 8;
    const int x = lane & 3;
    const int m = (x & 1) ? m1 : m0;  // this lane's position in the tile after the reduce-scatter
    // Shared tiles: warpgroup cw takes column half cw % 2 of every (kConsumerWgs / 2)-th tile.
    const int col0 = kShareTiles ? (kConsumerWgs == 4 ? cw % 2 : cw) * kNw : 0;
    const int row0 = col0 / kHeads;
    const uint64_t desc_q = ptx::smem_desc_sw128(sm.q + q_row(col0) * 128);
    const uint64_t desc_k0 = ptx::smem_desc_sw128(sm.k[0]);
    LaneRows<Sink> rows(sm, row0, x, sink);

    // part stays untouched (and costs no registers) in kProduction, where it is unused.
    // The E5M2 path's four k32 partials (kExact); kAlternate256 keeps them per 64-column slice.
    constexpr bool kPartials = kAccuracy != ScoreAccuracy::kProduction && !kF16 && !kRegKeys && !kUseS8;
    constexpr int kPart = kPartials && !kAlternate256 ? kNw / 2 : 0;
    float acc[kMmaN / 2], part[kMmaN / 2];
#pragma unroll
    for (int i = 0; i < (kUseS8 ? 0 : kMmaN / 2); ++i) acc[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPart; ++i) part[i] = 0.0f;
    const Weights wr(sm, col0);
    PassCursor pass(sm);
    // Most CTAs score one pass (a group within one request): its cursor is set here, and a
    // seek in the loop is then one compare with INT_MAX.
    pass.seek(sm, 0);
    // Lockstep sinks count their steps by the loop index j; the fp8 lockstep loop takes its
    // tile count as a known-uniform value, so the vote check is a uniform branch (V4 fused
    // prefill 1.5-1.8% faster, V3.2 unchanged: docs/experiments.md, 2026-12-01).
    const int num_tiles = kF16 && Sink::kLockstep ? ptx::warp_uniform(sm.num_tiles) : sm.num_tiles;
    const SampleOrder order = sm.order;
    const int first = kShareTiles ? (kConsumerWgs == 4 ? cw / 2 : 0) : cw;
    const int step = kShareTiles ? kConsumerWgs / 2 : kConsumerWgs;
    // Lockstep: every consumer thread runs the same number of steps (a warpgroup skips a
    // missing last tile of the count but still steps).
    const int steps = Sink::kLockstep ? (num_tiles + step - 1) / step : 0;
    // Ping-pong: warpgroup 0 takes the first turn; each hands the tensor cores over once its
    // MMAs are done (shared tiles: warpgroup 1 not after its last tile, for which no turn is
    // waited; alternate tiles: not after the last tile, the turns following the tile order).
    if constexpr (kPingPong) {
      if (cw == 1 && num_tiles > 0) ptx::named_barrier_arrive(kTurnBarrier, 256);
    }
    for (int j = 0, i = first; Sink::kLockstep ? j < steps : i < num_tiles; ++j, i += step) {
      if constexpr (Sink::kLockstep) {
        if constexpr (GatesPuts<Sink>) {
          // (acts first: with step's own early return, ptxas tested its result on every step)
          if (sink.acts(j) && sink.step(sm, t, j)) rows.regate(sink);
        } else {
          sink.step(sm, t, j);
        }
        if (i >= num_tiles) continue;
      }
      const int stage_i = int(uint32_t(i) % kStages);
      const int stage = kUniformStage ? ptx::warp_uniform(stage_i) : stage_i;
      const int tile = tile_at(order, i);
      // mxfp4: the producer fenced its converted tile before the full barrier.
      ptx::mbar_wait(&sm.full[stage], (uint32_t(i) / kStages) & 1);
      if constexpr (!kMx && !kF16) ptx::fence_proxy_async_smem();  // cp.async (generic proxy) bytes -> WGMMA (async proxy)
      float ks0 = 0.0f, ks1 = 0.0f;  // register keys: from the tile's scale words, in mma_tile_reg
      if constexpr (!kRegKeys) {
        ks0 = sm.kscale[stage][m0];
        ks1 = sm.kscale[stage][m1];
      }
      bool wide = false;  // integer path: a token of the tile is stored unshifted (mma_tile_s8_blocks)
      const uint32_t word0 = __float_as_uint(ks0), word1 = __float_as_uint(ks1);  // integer path: scale words
      if constexpr (kUseS8) {
        wide = sm.ring.wide[stage] == uint32_t(i + 1);
        ks0 = s8_key_scale(word0, wide);
        ks1 = s8_key_scale(word1, wide);
      }
      const uint64_t desc_k = desc_k0 + uint64_t(stage) * (sizeof(sm.k[0]) >> 4);  // the stage's tile
      const bool neg = !kMx && !kLinear && (ks0 < 0.0f || ks1 < 0.0f);
      // Gated sinks take this lane's scale before the MMAs: one register through the head
      // sums instead of two, which the gate's register needs there (at 112, the fused fp8
      // loop otherwise spills it per tile); the other sinks keep the form their SASS has.
      // Register keys get their scales from mma_tile_reg, so they take them after it.
      constexpr bool kScaleEarly = (GatesPuts<Sink> || kLinear) && !kRegKeys;
      const float ks_early = (x & 1) ? ks1 : ks0;
      float s[kRowsW][2];
#pragma unroll
      for (int r = 0; r < kRowsW; ++r) s[r][0] = s[r][1] = 0.0f;
      if constexpr (kPingPong) ptx::named_barrier(kTurnBarrier + cw, 256);  // my turn
      // After the tile's MMAs: the tensor cores to the other warpgroup, the stage to the producer.
      auto release = [&] {
        if constexpr (kPingPong) {
          const bool next = kShareTiles ? cw == 0 || i + step < num_tiles : i + 1 < num_tiles;
          if (next) ptx::named_barrier_arrive(kTurnBarrier + (cw ^ 1), 256);
        }
        if constexpr (!kRegKeys) ptx::mbar_arrive(&sm.empty[stage]);
      };
      bool summed = false;  // integer chain: the head sums come straight from the int32 accumulators
      if constexpr (kUseS8) {
        if (!wide) {
          int32_t iacc[kNw / 2];
          mma_tile_s8(iacc, desc_k, desc_q);
          release();
          add_head_sums_s8(iacc, wr, s);
          summed = true;
        } else if constexpr (kAlternate256) {
          score_slices<true>(wr, s, desc_k, desc_q, word0, word1);
          release();
          summed = true;
        } else {
          mma_tile_s8_blocks(acc, desc_k, desc_q, word0, word1);
          release();
        }
      } else if constexpr (kAlternate256 && kPartials) {  // the E5M2 partials (mxfp4, kExact)
        score_slices<false>(wr, s, desc_k, desc_q, 0u, 0u);
        release();
        summed = true;
      } else {
        if constexpr (kRegKeys) {  // arrives on the empty barrier itself, before its MMAs
          mma_tile_reg(acc, sm.k[stage], reinterpret_cast<const uint32_t*>(sm.kscale[stage]), m0, desc_q,
                       &sm.empty[stage], ks0, ks1);
        } else if constexpr (kF16) {
          mma_tile_f16(acc, sm.k[stage], m0, desc_q);
        } else {
          mma_tile(acc, part, desc_k, desc_q);
        }
        release();
      }
      if (!summed) {
        if constexpr (FI_SCORER_EPILOGUE == 0) {  // plain adds: every accumulator stays live
#pragma unroll
          for (int e = 0; e < kNw / 8; ++e) {
            const int r = (e * 8) / kHeads;
            s[r][0] += acc[4 * e] + acc[4 * e + 1];
            s[r][1] += acc[4 * e + 2] + acc[4 * e + 3];
          }
        } else if constexpr (kLinear) {
          add_abs_sums(acc, wr, s);
        } else if (neg) {
          add_head_sums<true>(acc, wr, ks0 < 0.0f, ks1 < 0.0f, s);
        } else {
          add_head_sums<false>(acc, wr, false, false, s);
        }
      }
      pass.seek(sm, tile);  // sampled orders have one pass: seek needs no monotone order
      float out[kOut];
      quad_reduce_scatter(s, x, out);
      const float ks = kScaleEarly ? ks_early : (x & 1) ? ks1 : ks0;
      if constexpr (kLinear && FI_SCORER_EPILOGUE != 0) {
        float lin_c[kOut];  // 2^-s of this lane's rows (from shared memory: a register less through the loop)
#pragma unroll
        for (int w = 0; w < kOut; ++w) lin_c[w] = sm.lin_scale[row0 + out_row(w, x)];
        add_linear(acc, x, lin_c, ks < 0.0f, out);
      }
      rows.put(sm, sink, pass.tile_first(tile), m, pass.mask, out, kLinear ? fabsf(ks) : ks);
    }
    rows.flag_nan(sm);
  }
};

}  // namespace flashindexer::sm90
