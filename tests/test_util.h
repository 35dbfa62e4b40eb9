// Shared helpers for the CPU test suite.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <random>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "flashindexer/host_problem.h"
#include "flashindexer/operators.h"
#include "flashindexer/quantize.h"

namespace fit {
using namespace flashindexer;

// A small problem that still has long rows (window > K) for K = 64.
inline SyntheticSpec small_spec(Generator g = Generator::kGaussian, CacheFormat f = CacheFormat::kMxfp4) {
  SyntheticSpec s;
  s.format = f;
  s.num_heads = 64;
  s.k = 64;
  s.rows = 6;
  s.requests = 2;
  s.context = 700;
  s.generator = g;
  s.seed = 20261129;
  return s;
}

inline HostProblem make(const SyntheticSpec& s) {
  HostProblem p;
  const Status st = make_synthetic(s, &p);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return p;
}

inline Launch cpu(int threads = 2) {
  Launch l;
  l.backend = Backend::kCpu;
  l.cpu_threads = threads;
  return l;
}

inline HostResults fused(const HostProblem& p, int threads = 2) {
  HostResults r;
  const Status st = run_fused(p, cpu(threads), &r);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return r;
}

// The CPU TopK over p's logits into *out (poisoned first), with a workspace sized by the query.
inline Status cpu_topk(const TopKProblem& p, bool with_slots, HostResults* out) {
  size_t bytes = 0;
  if (Status st = workspace_size(p, cpu(), &bytes); !st.is_ok()) return st;
  std::vector<uint8_t> ws(bytes + 64);
  Launch l = cpu();
  l.workspace = ws.data();
  l.workspace_bytes = bytes;
  out->reset(p.rows.rows(), p.k, with_slots);
  return topk_over_logits(p, out->outputs(), l);
}

inline HostResults dense_topk(const HostProblem& p, bool keep_logits = false) {
  HostResults r;
  const Status st = run_dense_then_topk(p, cpu(), &r, keep_logits);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return r;
}

inline uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

// Adversarial fp32 rows for TopK over logits (REFERENCE §3 pitfalls).
enum class Dist { kGaussian, kEqual, kZeroPlateau, kUlpPacked, kAscending, kDescending, kOffset, kTiny, kSpecials };
inline const Dist kDists[] = {Dist::kGaussian,  Dist::kEqual,      Dist::kZeroPlateau, Dist::kUlpPacked, Dist::kAscending,
                       Dist::kDescending, Dist::kOffset, Dist::kTiny,        Dist::kSpecials};

inline std::vector<float> make_row(Dist d, int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float z = normal(g);
    switch (d) {
      case Dist::kGaussian: v[size_t(i)] = z; break;
      case Dist::kEqual: v[size_t(i)] = 0.125f; break;
      case Dist::kZeroPlateau: v[size_t(i)] = g() % 4 ? ((g() & 1) ? 0.0f : -0.0f) : std::fabs(z); break;
      case Dist::kUlpPacked: v[size_t(i)] = std::bit_cast<float>(uint32_t(0x3F800000u + g() % 5)); break;
      case Dist::kAscending: v[size_t(i)] = float(i) * 0.5f; break;
      case Dist::kDescending: v[size_t(i)] = -float(i); break;
      case Dist::kOffset: v[size_t(i)] = 100.0f + z; break;
      case Dist::kTiny: v[size_t(i)] = 1e-8f * z; break;
      case Dist::kSpecials: {
        const float specials[] = {std::bit_cast<float>(0x7FC00000u), std::bit_cast<float>(0xFFC00001u), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, z};
        v[size_t(i)] = specials[g() % 7];
        break;
      }
    }
  }
  return v;
}


// Independent statement of the order of CONTRACT §3: does (a, pa) rank above (b, pb)?
inline bool ranks_above(float a, int64_t pa, float b, int64_t pb) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na && nb ? pa < pb : nb;
  if (a != b) return a > b;
  if (a == 0 && std::signbit(a) != std::signbit(b)) return std::signbit(b);  // +0 above -0
  return pa < pb;
}

// Sort-based TopK of row[start, end): the oracle for every selector.
inline std::vector<int32_t> oracle_topk(const float* row, int64_t start, int64_t end, int32_t k, OutputOrder order) {
  std::vector<int32_t> idx;
  for (int64_t s = start; s < end; ++s) idx.push_back(int32_t(s));
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return ranks_above(row[a], a, row[b], b); });
  if (int64_t(idx.size()) > k) idx.resize(size_t(k));
  if (order == OutputOrder::kPosition) std::sort(idx.begin(), idx.end());
  return idx;
}

// Checks every row's positions against oracle_topk over the dense logits in d.
inline void expect_oracle_selection(const HostProblem& p, const HostResults& d, const HostResults& got) {
  for (int64_t r = 0; r < got.rows; ++r) {
    if (got.status[size_t(r)] & row_status::kFailMask) continue;
    int64_t start = 0, end = 0;
    if (p.form == RowForm::kDecode) {
      end = std::max<int64_t>(0, p.context_lens[size_t(r / p.next_n)] - (p.next_n - 1 - r % p.next_n));
    } else {
      start = p.window_start[size_t(r)];
      end = p.window_end[size_t(r)];
    }
    const std::vector<int32_t> want = oracle_topk(&d.logits[size_t(r * d.logits_width)], start, end, p.k, p.order);
    const std::vector<int32_t> have(got.positions.begin() + r * got.k,
                                    got.positions.begin() + r * got.k + got.counts[size_t(r)]);
    ASSERT_EQ(have, want) << "row " << r;
  }
}

// Mutable copy of a problem's int32 metadata, e.g. to corrupt one row.
inline void set_window(HostProblem& p, int64_t row, int32_t request, int32_t start, int32_t end) {
  p.row_batch[size_t(row)] = request;
  p.window_start[size_t(row)] = start;
  p.window_end[size_t(row)] = end;
}

}  // namespace fit

namespace fit {

// An fp8 problem whose score at position s is exactly scores[s] (finite values
// with <= 19 significant bits, +-inf, or NaN): every key is ones(128) * scores[s]
// (NaN: an e4m3 NaN byte); heads 0..31 have q = +1, w = +1/4096, heads 32..63
// q = -1, w = -1/4096, so exactly one half contributes. One request, paged
// through a reversed page table (page_size 64), ragged rows with the given windows.
inline HostProblem controlled_problem(const std::vector<float>& scores, int32_t k,
                                      const std::vector<std::pair<int32_t, int32_t>>& windows) {
  HostProblem p;
  p.format = CacheFormat::kFp8E4M3;
  p.num_heads = 64;
  p.page_size = 64;
  p.page_stride = page_payload_bytes(p.format, 64);
  p.k = k;
  p.num_requests = 1;
  p.num_rows = int64_t(windows.size());
  p.max_context = int64_t(scores.size());
  p.table_width = std::max<int64_t>(1, (p.max_context + 63) / 64);
  p.num_pages = p.table_width;
  for (int64_t i = 0; i < p.table_width; ++i) p.page_table.push_back(int32_t(p.num_pages - 1 - i));
  p.pool.assign(size_t(p.num_pages * p.page_stride), 0);
  const KvCache cache = p.view().cache;
  for (size_t s = 0; s < scores.size(); ++s) {
    uint8_t values[kHeadDim];
    const bool nan = std::isnan(scores[s]);
    std::fill(values, values + kHeadDim, uint8_t{0x38});  // e4m3 1.0
    if (nan) values[0] = 0x7F;
    const float scale = nan ? 1.0f : scores[s];
    uint8_t scale4[4];
    std::memcpy(scale4, &scale, 4);
    const PageToken pt = locate(cache.pages, 0, int64_t(s));
    store_key_bytes(cache, p.pool.data(), pt.page, pt.token, values, scale4);
  }
  p.q.assign(size_t(p.num_rows * 64 * kHeadDim), 0);
  p.weights.assign(size_t(p.num_rows * 64 * 4), 0);
  for (int64_t r = 0; r < p.num_rows; ++r) {
    for (int h = 0; h < 64; ++h) {
      std::fill_n(&p.q[size_t((r * 64 + h) * kHeadDim)], kHeadDim, uint8_t(h < 32 ? 0x38 : 0xB8));
      const float w = h < 32 ? 1.0f / 4096 : -1.0f / 4096;
      std::memcpy(&p.weights[size_t(r * 64 + h) * 4], &w, 4);
    }
    p.row_batch.push_back(0);
    p.window_start.push_back(windows[size_t(r)].first);
    p.window_end.push_back(windows[size_t(r)].second);
  }
  return p;
}

}  // namespace fit
