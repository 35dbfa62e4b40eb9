#include "oracle/fp64_oracle.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace oracle {
using namespace flashindexer;

double e2m1(uint8_t nibble) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (nibble & 8) ? -mag[nibble & 7] : mag[nibble & 7];
}

double e4m3(uint8_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double v = e == 0 ? m * std::pow(2.0, -9) : (8 + m) * std::pow(2.0, e - 10);
  return (c & 0x80) ? -v : v;
}

double ue8m0(uint8_t c) { return c == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::pow(2.0, c - 127); }

Window window(const Rows& rows, int64_t row) {
  if (rows.form == RowForm::kDecode) {
    const auto b = static_cast<int32_t>(row / rows.next_n);
    const int64_t end = rows.context_lens[b] - (rows.next_n - 1 - row % rows.next_n);
    return {b, 0, end < 0 ? 0 : end};
  }
  return {rows.row_batch[row], rows.window_start[row], rows.window_end[row]};
}

namespace {

void decode_mx(const uint8_t* packed, const uint8_t* scales, double* out) {
  for (int d = 0; d < kHeadDim; ++d)
    out[d] = e2m1((d & 1) ? packed[d / 2] >> 4 : packed[d / 2] & 15) * ue8m0(scales[d / 32]);
}

}  // namespace

KeyBytes key_bytes(const IndexerProblem& p, int64_t row, int64_t s) {
  const Window w = window(p.rows, row);
  const PageMap& pm = p.cache.pages;
  const int64_t idx = s / pm.page_size, tok = s % pm.page_size;
  const int64_t page = pm.table ? pm.table[int64_t{w.request} * pm.table_row_stride + idx] : idx;
  const auto* base = static_cast<const uint8_t*>(p.cache.pool) + page * p.cache.page_stride;
  const int vb = p.cache.format == CacheFormat::kMxfp4 ? 64 : 128;
  return {base + tok * vb, base + int64_t{pm.page_size} * vb + tok * 4};
}

const uint8_t* query_bytes(const IndexerProblem& p, int64_t row, int h) {
  return static_cast<const uint8_t*>(p.queries.q) + row * p.queries.q_row_stride + h * p.queries.q_head_stride;
}

Exact score(const IndexerProblem& p, int64_t row, int64_t s) {
  const bool mx = p.cache.format == CacheFormat::kMxfp4;
  const auto [kv, ks] = key_bytes(p, row, s);
  double k[kHeadDim];
  if (mx) {
    decode_mx(kv, ks, k);
  } else {
    float scale;
    std::memcpy(&scale, ks, 4);
    for (int d = 0; d < kHeadDim; ++d) k[d] = e4m3(kv[d]) * scale;
  }
  const Queries& q = p.queries;
  Exact e{0, 0};
  for (int h = 0; h < q.num_heads; ++h) {
    const uint8_t* qv = query_bytes(p, row, h);
    double qh[kHeadDim];
    if (mx) {
      decode_mx(qv, q.q_scale + row * q.q_scale_row_stride + h * q.q_scale_head_stride, qh);
    } else {
      for (int d = 0; d < kHeadDim; ++d) qh[d] = e4m3(qv[d]);
    }
    const int64_t wi = row * q.weights_row_stride + h;
    const double wraw = q.weight_type == WeightType::kF32
                            ? static_cast<const float*>(q.weights)[wi]
                            : std::bit_cast<float>(uint32_t{static_cast<const uint16_t*>(q.weights)[wi]} << 16);
    const double weff = wraw * q.weight_scale;
    double dot = 0, absdot = 0;
    for (int d = 0; d < kHeadDim; ++d) {
      dot += qh[d] * k[d];
      absdot += std::fabs(qh[d] * k[d]);
    }
    e.score += weff * (std::isnan(dot) ? dot : (dot > 0 ? dot : 0.0));  // relu keeps NaN (docs/semantics.md)
    e.m += std::fabs(weff) * absdot;
  }
  return e;
}

}  // namespace oracle
