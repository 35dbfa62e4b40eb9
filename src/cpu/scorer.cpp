#include "scorer.h"

#include <cmath>

namespace flashindexer::cpu {
namespace {

inline float dot128(const float* __restrict a, const float* __restrict b) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int d = 0; d < kHeadDim; d += 8)
    for (int j = 0; j < 8; ++j) p[j] += a[d + j] * b[d + j];
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

inline float relu(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }

}  // namespace

size_t score_scratch_floats(int num_heads) {
  return size_t(num_heads) * kHeadDim + size_t(num_heads) + size_t(kScoreTile) * kHeadDim + kScoreTile;
}

ScoreScratch carve_score_scratch(float* base, int num_heads) {
  ScoreScratch sc;
  sc.q = base;
  sc.w = sc.q + size_t(num_heads) * kHeadDim;
  sc.k = sc.w + num_heads;
  sc.scores = sc.k + size_t(kScoreTile) * kHeadDim;
  return sc;
}

void load_row_query(const IndexerProblem& p, int64_t row, const ScoreScratch& sc) {
  for (int32_t h = 0; h < p.queries.num_heads; ++h) {
    load_query_head(p, row, h, sc.q + size_t(h) * kHeadDim);
    sc.w[h] = effective_weight(p.queries, row, h);
  }
}

void score_tile(const IndexerProblem& p, int32_t request, int64_t s0, int n, const ScoreScratch& sc) {
  for (int i = 0; i < n; ++i) {
    const PageToken pt = locate(p.cache.pages, request, s0 + i);
    load_key(p.cache, pt.page, pt.token, sc.k + size_t(i) * kHeadDim);
  }
  const int H = p.queries.num_heads;
  for (int i = 0; i < n; ++i) {
    const float* k = sc.k + size_t(i) * kHeadDim;
    float acc = 0.0f;
    for (int h = 0; h < H; ++h) acc += sc.w[h] * relu(dot128(sc.q + size_t(h) * kHeadDim, k));
    sc.scores[i] = acc;
  }
}

}  // namespace flashindexer::cpu
