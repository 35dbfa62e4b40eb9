// Layouts (CONTRACT §2): page sizes, page strides, shuffled / identity / no page
// tables, strided queries and weights, windows with nonzero starts, windows crossing
// page boundaries, and a pool addressed beyond 4 GiB.
#include <sys/mman.h>

#include <cstring>

#include "test_util.h"

namespace fit {
namespace {

// Positions and scores (not slots) of two runs over the same logical content.
void expect_same_selection(const HostResults& a, const HostResults& b) {
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_EQ(a.status, b.status);
  ASSERT_EQ(a.scores.size(), b.scores.size());
  for (size_t i = 0; i < a.scores.size(); ++i) ASSERT_EQ(bits(a.scores[i]), bits(b.scores[i])) << i;
}

void expect_slots_follow_table(const HostProblem& p, const HostResults& r) {
  const IndexerProblem v = p.view();
  for (int64_t row = 0; row < r.rows; ++row) {
    const int32_t request = p.form == RowForm::kDecode ? int32_t(row / p.next_n) : p.row_batch[size_t(row)];
    for (int32_t i = 0; i < r.counts[size_t(row)]; ++i) {
      const int32_t pos = r.positions[size_t(row * r.k + i)];
      const PageToken pt = locate(v.cache.pages, request, pos);
      ASSERT_EQ(r.slots[size_t(row * r.k + i)], pt.page * p.page_size + pt.token);
    }
  }
}

TEST(Layouts, PageSizes64And128StridesAndTablesSelectTheSame) {
  for (CacheFormat f : {CacheFormat::kMxfp4, CacheFormat::kFp8E4M3}) {
    SyntheticSpec s = small_spec(Generator::kStructured, f);
    s.requests = 1;
    const HostProblem ref = make(s);
    const HostResults want = fused(ref);
    struct Variant {
      int32_t page_size;
      int64_t extra_stride;
      bool shuffle, contiguous;
    } variants[] = {{64, 0, false, false}, {128, 0, true, false}, {128, 4096, true, false},
                    {64, 16, true, true},  {16, 32, true, false}, {48, 0, true, false}};
    for (const Variant& var : variants) {
      SyntheticSpec t = s;
      t.page_size = var.page_size;
      t.page_stride = var.extra_stride ? (page_payload_bytes(f, var.page_size) + 15) / 16 * 16 + var.extra_stride : 0;
      t.shuffle_pages = var.shuffle;
      t.contiguous = var.contiguous;
      const HostProblem p = make(t);
      const HostResults got = fused(p);
      SCOPED_TRACE(::testing::Message() << to_string(f) << " page " << var.page_size << " stride+" << var.extra_stride
                                        << " shuffle " << var.shuffle << " contiguous " << var.contiguous);
      expect_same_selection(want, got);
      expect_slots_follow_table(p, got);
      EXPECT_EQ(first_difference(got, dense_topk(p)), "");
    }
  }
}

TEST(Layouts, ShuffledTableChangesSlotsNotPositions) {
  SyntheticSpec s = small_spec();
  s.shuffle_pages = false;
  const HostProblem a = make(s);
  s.shuffle_pages = true;
  const HostProblem b = make(s);
  ASSERT_NE(a.page_table, b.page_table);
  const HostResults ra = fused(a), rb = fused(b);
  expect_same_selection(ra, rb);
  EXPECT_NE(ra.slots, rb.slots);
  expect_slots_follow_table(b, rb);
}

TEST(Layouts, NonzeroWindowStartsEmptyWindowsAndPageBoundaries) {
  SyntheticSpec s = small_spec(Generator::kGaussian, CacheFormat::kFp8E4M3);
  s.rows = 8;
  s.requests = 1;
  s.k = 16;
  HostProblem p = make(s);
  const std::pair<int32_t, int32_t> windows[] = {{60, 70}, {63, 65}, {127, 129}, {64, 64},
                                                 {0, 0},   {1, 700}, {640, 699}, {100, 117}};
  for (int i = 0; i < 8; ++i) set_window(p, i, 0, windows[i].first, windows[i].second);
  const HostResults r = fused(p);
  EXPECT_EQ(first_difference(r, dense_topk(p)), "");
  for (int i = 0; i < 8; ++i) {
    const int32_t len = windows[i].second - windows[i].first;
    EXPECT_EQ(r.counts[size_t(i)], std::min(16, len)) << i;
    for (int32_t j = 0; j < r.counts[size_t(i)]; ++j) {
      EXPECT_GE(r.positions[size_t(i * 16 + j)], windows[i].first);
      EXPECT_LT(r.positions[size_t(i * 16 + j)], windows[i].second);
    }
  }
  // A window's selection does not depend on what lies outside it: the sliding
  // window [100, 117) equals the top 16 of its own 17 positions by score.
  const HostResults d = dense_topk(p, true);
  std::vector<int32_t> idx;
  for (int32_t c = 100; c < 117; ++c) idx.push_back(c);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return d.logits[size_t(7 * d.logits_width + a)] > d.logits[size_t(7 * d.logits_width + b)];
  });
  idx.resize(16);
  std::sort(idx.begin(), idx.end());
  EXPECT_EQ(std::vector<int32_t>(r.positions.begin() + 7 * 16, r.positions.begin() + 8 * 16), idx);
}

TEST(Layouts, SlidingWindowRows) {
  SyntheticSpec s = small_spec(Generator::kPlateau);
  s.sliding_window = 200;
  const HostProblem p = make(s);
  for (int32_t st : p.window_start) EXPECT_GT(st, 0);
  EXPECT_EQ(first_difference(fused(p), dense_topk(p)), "");
}

TEST(Layouts, StridedQueriesScalesAndWeights) {
  for (CacheFormat f : {CacheFormat::kMxfp4, CacheFormat::kFp8E4M3}) {
    const HostProblem p = make(small_spec(Generator::kGaussian, f));
    const HostResults want = fused(p);
    IndexerProblem v = p.view();
    const int64_t rows = p.rows(), H = p.num_heads;
    const int64_t hb = v.queries.q_head_stride, head_pad = 48, row_pad = 96;
    std::vector<uint8_t> q(size_t(rows * (H * (hb + head_pad) + row_pad)), 0xEE);
    std::vector<uint8_t> qs(size_t(rows * (H * 8 + 8)), 0xEE);
    std::vector<float> w(size_t(rows * (H + 3)), std::nanf(""));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < H; ++h) {
        std::memcpy(&q[size_t(r * (H * (hb + head_pad) + row_pad) + h * (hb + head_pad))],
                    &p.q[size_t((r * H + h) * hb)], size_t(hb));
        if (f == CacheFormat::kMxfp4) std::memcpy(&qs[size_t(r * (H * 8 + 8) + h * 8)], &p.q_scale[size_t((r * H + h) * 4)], 4);
        std::memcpy(&w[size_t(r * (H + 3) + h)], &p.weights[size_t((r * H + h) * 4)], 4);
      }
    v.queries.q = q.data();
    v.queries.q_head_stride = hb + head_pad;
    v.queries.q_row_stride = H * (hb + head_pad) + row_pad;
    v.queries.q_scale = f == CacheFormat::kMxfp4 ? qs.data() : nullptr;
    v.queries.q_scale_head_stride = 8;
    v.queries.q_scale_row_stride = H * 8 + 8;
    v.queries.weights = w.data();
    v.queries.weights_row_stride = H + 3;
    HostResults got;
    got.reset(rows, p.k, true);
    std::vector<uint8_t> ws(4 << 20);
    Launch l = cpu();
    l.workspace = ws.data();
    l.workspace_bytes = ws.size();
    ASSERT_TRUE(fused_topk(v, got.outputs(), l).is_ok());
    EXPECT_EQ(first_difference(want, got), "") << to_string(f);
  }
}

// The pool lives in a sparse 5 GiB mapping and the table points past 4 GiB.
TEST(Layouts, PoolAddressedBeyond4GiB) {
  SyntheticSpec s = small_spec(Generator::kStructured, CacheFormat::kMxfp4);
  const HostProblem p = make(s);
  const HostResults want = fused(p);
  const size_t map_bytes = size_t(5) << 30;
  void* mem = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) GTEST_SKIP() << "cannot map 5 GiB of address space here";
  const int64_t first = ((int64_t{1} << 32) + 12345) / p.page_stride + 1;  // first page past 4 GiB
  const int64_t num_pages = int64_t(map_bytes) / p.page_stride;
  ASSERT_LT(first + p.num_pages, num_pages);
  auto* pool = static_cast<uint8_t*>(mem);
  std::memcpy(pool + first * p.page_stride, p.pool.data(), p.pool.size());
  std::vector<int32_t> table = p.page_table;
  for (int32_t& e : table)
    if (e >= 0) e += int32_t(first);
  IndexerProblem v = p.view();
  v.cache.pool = pool;
  v.cache.pages.num_pages = num_pages;
  v.cache.pages.table = table.data();
  HostResults got;
  got.reset(p.rows(), p.k, true);
  std::vector<uint8_t> ws(4 << 20);
  Launch l = cpu();
  l.workspace = ws.data();
  l.workspace_bytes = ws.size();
  ASSERT_TRUE(fused_topk(v, got.outputs(), l).is_ok());
  expect_same_selection(want, got);
  for (size_t i = 0; i < got.slots.size(); ++i)
    if (want.slots[i] >= 0) {
      ASSERT_EQ(int64_t(got.slots[i]), int64_t(want.slots[i]) + first * p.page_size);
    }
  munmap(mem, map_bytes);
}

}  // namespace
}  // namespace fit
