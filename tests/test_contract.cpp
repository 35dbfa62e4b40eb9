// One test per rule of CONTRACT §3 (selection), §5 (failure behaviour) and §6 (workspace).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "test_util.h"

namespace fit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<int32_t> row_positions(const HostResults& r, int64_t row) {
  return {r.positions.begin() + row * r.k, r.positions.begin() + row * r.k + r.counts[size_t(row)]};
}

// Both paths, checked equal; returns the fused results.
HostResults run_both(const HostProblem& p) {
  HostResults f = fused(p), d = dense_topk(p);
  EXPECT_EQ(first_difference(f, d), "");
  return f;
}

// ---- §3 selection -----------------------------------------------------------------

TEST(Contract3, TotalOrder_NaNRanksBelowNegativeInfinity) {
  const HostProblem p = controlled_problem({kNaN, -kInf, kNaN, -1.0f, kNaN}, 2, {{0, 5}});
  const HostResults r = run_both(p);
  EXPECT_EQ(row_positions(r, 0), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(r.status[0], row_status::kHasNaN);
}

TEST(Contract3, TotalOrder_InfinitiesAboveAndBelowFiniteScores) {
  const float big = std::ldexp(1.0f, 100);
  const HostProblem p = controlled_problem({1.0f, kInf, -kInf, big, -big}, 3, {{0, 5}});
  const HostResults r = run_both(p);
  EXPECT_EQ(row_positions(r, 0), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(r.scores[0], 1.0f);
  EXPECT_EQ(r.scores[1], kInf);
}

TEST(Contract3, TotalOrder_PositiveZeroAboveNegativeZero) {
  // ±0 cannot both come out of the scorer for one row; state it on TopK over logits.
  std::vector<float> logits = {-0.0f, -0.0f, 0.0f, -0.0f};
  std::vector<int32_t> rb{0}, ws{0}, we{4};
  TopKProblem t;
  t.logits = logits.data();
  t.logits_row_stride = 4;
  t.rows.num_rows = 1;
  t.rows.num_requests = 1;
  t.rows.row_batch = rb.data();
  t.rows.window_start = ws.data();
  t.rows.window_end = we.data();
  t.rows.max_context = 4;
  t.pages.page_size = 0;
  t.k = 2;
  t.order = OutputOrder::kRank;
  std::vector<uint8_t> wsbuf(1 << 16);
  Launch l = cpu();
  l.workspace = wsbuf.data();
  l.workspace_bytes = wsbuf.size();
  HostResults r;
  r.reset(1, 2, false);
  ASSERT_TRUE(topk_over_logits(t, r.outputs(), l).is_ok());
  EXPECT_EQ(r.positions[0], 2);
  EXPECT_EQ(r.positions[1], 0);
  EXPECT_EQ(bits(r.scores[0]), bits(0.0f));
  EXPECT_EQ(bits(r.scores[1]), bits(-0.0f));
}

TEST(Contract3, TotalOrder_EqualScoresBreakTiesByLowerPosition) {
  const HostProblem p = controlled_problem(std::vector<float>(300, 2.0f), 5, {{100, 300}});
  EXPECT_EQ(row_positions(run_both(p), 0), (std::vector<int32_t>{100, 101, 102, 103, 104}));
}

TEST(Contract3, LongRows_KHighestRankedPositionsOfTheWindow) {
  std::vector<float> s(400);
  for (size_t i = 0; i < s.size(); ++i) s[i] = float((i * 37) % 101) - 50.0f;  // many ties
  const HostProblem p = controlled_problem(s, 20, {{13, 390}});
  std::vector<int32_t> idx;
  for (int32_t i = 13; i < 390; ++i) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return s[size_t(a)] > s[size_t(b)]; });
  idx.resize(20);
  std::sort(idx.begin(), idx.end());
  EXPECT_EQ(row_positions(run_both(p), 0), idx);
}

TEST(Contract3, ShortRows_EveryPositionOfTheWindowWhateverItsScore) {
  const HostProblem p = controlled_problem({kNaN, -kInf, 3.0f, kNaN, -0.5f}, 8, {{0, 5}, {1, 4}});
  const HostResults r = run_both(p);
  EXPECT_EQ(row_positions(r, 0), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(row_positions(r, 1), (std::vector<int32_t>{1, 2, 3}));
}

TEST(Contract3, Count_IsMinOfKAndWindowLength_ZeroForAnEmptyWindow) {
  const HostProblem p = controlled_problem(std::vector<float>(200, 1.0f), 16, {{0, 200}, {10, 20}, {50, 50}, {0, 16}});
  const HostResults r = run_both(p);
  EXPECT_EQ(r.counts, (std::vector<int32_t>{16, 10, 0, 16}));
  EXPECT_EQ(r.status, (std::vector<uint32_t>{0, 0, 0, 0}));
}

TEST(Contract3, OutputOrder_AscendingPositionByDefault) {
  const HostProblem p = controlled_problem({1, 5, 3, 4, 2, 0}, 3, {{0, 6}});
  EXPECT_EQ(row_positions(run_both(p), 0), (std::vector<int32_t>{1, 2, 3}));
}

TEST(Contract3, OutputOrder_DescendingRankOnRequest) {
  HostProblem p = controlled_problem({1, 5, 3, 4, 2, 0, 5}, 4, {{0, 7}});
  p.order = OutputOrder::kRank;
  const HostResults r = run_both(p);
  EXPECT_EQ(row_positions(r, 0), (std::vector<int32_t>{1, 6, 3, 2}));
  EXPECT_EQ(std::vector<float>(r.scores.begin(), r.scores.begin() + 4), (std::vector<float>{5, 5, 4, 3}));
}

TEST(Contract3, Padding_PositionMinusOneSlotMinusOneScoreNegativeInfinity) {
  const HostProblem p = controlled_problem({1, 2, 3}, 6, {{0, 3}, {1, 1}});
  const HostResults r = run_both(p);
  for (int64_t row = 0; row < 2; ++row)
    for (int32_t i = r.counts[size_t(row)]; i < 6; ++i) {
      const size_t o = size_t(row * 6 + i);
      EXPECT_EQ(r.positions[o], -1);
      EXPECT_EQ(r.slots[o], -1);
      EXPECT_EQ(bits(r.scores[o]), bits(-kInf));
    }
}

TEST(Contract3, Slots_LogicalPositionMappedThroughThePageTable) {
  std::vector<float> s(300);
  for (size_t i = 0; i < s.size(); ++i) s[i] = float(i % 7);
  const HostProblem p = controlled_problem(s, 40, {{30, 290}});
  const HostResults r = run_both(p);
  for (int32_t i = 0; i < r.counts[0]; ++i) {
    const int32_t pos = r.positions[size_t(i)];
    EXPECT_EQ(r.slots[size_t(i)], p.page_table[size_t(pos / 64)] * 64 + pos % 64);
  }
}

TEST(Contract3, Scores_AreTheScoresOfTheSelectedPositions) {
  const HostProblem p = make(small_spec());
  const HostResults d = dense_topk(p, true);
  const HostResults f = fused(p);
  for (int64_t row = 0; row < f.rows; ++row)
    for (int32_t i = 0; i < f.counts[size_t(row)]; ++i) {
      const size_t o = size_t(row * f.k + i);
      EXPECT_EQ(bits(f.scores[o]), bits(d.logits[size_t(row * d.logits_width + f.positions[o])]));
    }
}

TEST(Contract3, Exactness_FusedBitIdenticalToDenseThenTopK) {
  for (OutputOrder order : {OutputOrder::kPosition, OutputOrder::kRank}) {
    SyntheticSpec s = small_spec();
    s.order = order;
    const HostProblem p = make(s);
    EXPECT_EQ(first_difference(fused(p), dense_topk(p)), "");
  }
}

TEST(Contract3, Determinism_RepeatedCallsAndThreadCountsBitIdentical) {
  const HostProblem p = make(small_spec(Generator::kTies));
  const HostResults first = fused(p, 1);
  for (int threads : {1, 2, 3, 5})
    for (int rep = 0; rep < 2; ++rep) EXPECT_EQ(first_difference(first, fused(p, threads)), "") << threads;
}

// ---- §5 failure behaviour ------------------------------------------------------------

TEST(Contract5, FailClosed_HostProblemsRejectedBeforeAnyOutputIsWritten) {
  HostProblem p = make(small_spec());
  p.k = 0;
  HostResults r;
  const Status st = run_fused(p, cpu(), &r);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("k: expected"), std::string::npos) << st.message();
  for (uint32_t s : r.status) EXPECT_EQ(s, 0xDEADBEEFu);  // poison untouched
}

// A row whose metadata is broken fails alone, with the given status bit.
void expect_row_fails(HostProblem& p, int64_t row, uint32_t bit) {
  const HostResults r = run_both(p);
  for (int64_t i = 0; i < r.rows; ++i) {
    if (i == row) {
      EXPECT_EQ(r.status[size_t(i)], bit) << "row " << i;
      EXPECT_EQ(r.counts[size_t(i)], 0);
      for (int32_t j = 0; j < r.k; ++j) EXPECT_EQ(r.positions[size_t(i * r.k + j)], -1);
    } else {
      EXPECT_EQ(r.status[size_t(i)] & row_status::kFailMask, 0u) << "row " << i;
      EXPECT_GT(r.counts[size_t(i)], 0) << "row " << i;
    }
  }
}

TEST(Contract5, RowStatus_WindowStartBelowZeroFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  p.window_start[2] = -1;
  expect_row_fails(p, 2, row_status::kFailWindow);
}

TEST(Contract5, RowStatus_WindowEndBelowStartFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  p.window_start[1] = 50;
  p.window_end[1] = 49;
  expect_row_fails(p, 1, row_status::kFailWindow);
}

TEST(Contract5, RowStatus_WindowEndAboveMaxContextFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  p.window_end[0] = int32_t(p.max_context + 1);
  expect_row_fails(p, 0, row_status::kFailWindow);
}

TEST(Contract5, RowStatus_RequestIdOutOfRangeFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  p.row_batch[3] = p.num_requests;
  expect_row_fails(p, 3, row_status::kFailRequest);
  p.row_batch[3] = -1;
  expect_row_fails(p, 3, row_status::kFailRequest);
}

TEST(Contract5, RowStatus_PageEntryOutOfRangeInsideTheWindowFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  // Rows 3..5 belong to request 1; only row 4's window touches its page 8.
  set_window(p, 3, 1, 200, 400);
  set_window(p, 5, 1, 0, 100);
  p.page_table[size_t(1 * p.table_width + 8)] = int32_t(p.num_pages);
  expect_row_fails(p, 4, row_status::kFailPage);
  p.page_table[size_t(1 * p.table_width + 8)] = -7;
  expect_row_fails(p, 4, row_status::kFailPage);
}

TEST(Contract5, RowStatus_WindowBeyondTheTableWidthFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  p.table_width = 5;  // covers 320 positions; windows reach ~700
  p.page_table.resize(size_t(p.num_requests * 5));
  const HostResults r = run_both(p);
  for (uint32_t s : r.status) EXPECT_EQ(s, row_status::kFailPage);
}

TEST(Contract5, RowStatus_PhysicalSlotAboveInt32MaxFailsThatRowOnly) {
  HostProblem p = make(small_spec());
  // Declare a pool of 2^26 pages (never read for the failing row) and point one
  // entry of request 0's window at a page whose slots exceed INT32_MAX.
  p.num_pages = int64_t{1} << 26;
  p.page_table[1] = (1 << 25) + 3;
  const HostResults r = run_both(p);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(r.status[size_t(i)], row_status::kFailSlot) << i;
  for (int64_t i = 3; i < 6; ++i) EXPECT_EQ(r.status[size_t(i)], 0u) << i;
}

TEST(Contract5, RowStatus_TableEntriesOutsideTheWindowAreNeverRead) {
  // Request 0's table row ends exactly at a PROT_NONE guard page: an entry read
  // past the window would crash the test.
  HostProblem p = make(small_spec());
  const long page = sysconf(_SC_PAGESIZE);
  auto* mem = static_cast<uint8_t*>(mmap(nullptr, size_t(2 * page), PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(mem + page, size_t(page), PROT_NONE), 0);
  // Windows of request 0 end at <= 700 positions = 11 pages: table row of 11 readable
  // entries; the declared width is 64 (entries 11.. lie in the guard page).
  auto* table = reinterpret_cast<int32_t*>(mem + page) - 11;
  for (int i = 0; i < 11; ++i) table[i] = p.page_table[size_t(i)];
  IndexerProblem v = p.view();
  v.cache.pages.table = table;
  v.cache.pages.table_width = 64;
  v.cache.pages.table_row_stride = 64;
  v.rows.num_rows = 3;  // request 0 only
  HostResults r;
  r.reset(3, p.k, true);
  std::vector<uint8_t> ws(1 << 20);
  Launch l = cpu();
  l.workspace = ws.data();
  l.workspace_bytes = ws.size();
  ASSERT_TRUE(fused_topk(v, r.outputs(), l).is_ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.status[size_t(i)], 0u);
  munmap(mem, size_t(2 * page));
}

TEST(Contract5, NaNScore_IsNotAnErrorRanksLowestAndIsFlagged) {
  const HostProblem p = controlled_problem({kNaN, 1.0f, kNaN, 2.0f}, 3, {{0, 4}});
  const HostResults r = run_both(p);
  EXPECT_EQ(r.status[0], row_status::kHasNaN);
  EXPECT_EQ(r.counts[0], 3);
  EXPECT_EQ(row_positions(r, 0), (std::vector<int32_t>{0, 1, 3}));  // the lower-position NaN
  EXPECT_TRUE(std::isnan(r.scores[0]));
}

TEST(Contract5, Decode_EndBelowZeroIsAnEmptyWindowNotAnError) {
  SyntheticSpec s = small_spec();
  s.form = RowForm::kDecode;
  s.requests = 2;
  s.next_n = 4;
  HostProblem p = make(s);
  p.context_lens[1] = 2;  // rows 4..7: windows 2-3, 2-2, 2-1, 2-0 -> 0, 0, 1, 2
  const HostResults r = run_both(p);
  EXPECT_EQ(std::vector<int32_t>(r.counts.begin() + 4, r.counts.end()), (std::vector<int32_t>{0, 0, 1, 2}));
  for (uint32_t st : r.status) EXPECT_EQ(st, 0u);
}

TEST(Contract5, Decode_ContextLengthAboveMaxContextFailsThatRequestsRows) {
  SyntheticSpec s = small_spec();
  s.form = RowForm::kDecode;
  s.requests = 3;
  s.next_n = 2;
  HostProblem p = make(s);
  p.context_lens[1] = int32_t(p.max_context + 1);
  const HostResults r = run_both(p);
  EXPECT_EQ(r.status, (std::vector<uint32_t>{0, 0, row_status::kFailWindow, row_status::kFailWindow, 0, 0}));
}

// ---- §6 memory ---------------------------------------------------------------------

TEST(Contract6, Workspace_IndependentOfContextLengthAndFarBelowLogits) {
  size_t small = 0, large = 0;
  const HostProblem hp = make(small_spec());
  for (int64_t context : {int64_t{1024}, int64_t{262144}}) {
    IndexerProblem p = hp.view();
    p.rows.max_context = context;
    p.k = 2048;
    size_t& out = context == 1024 ? small : large;
    ASSERT_TRUE(workspace_size(p, Operator::kFusedTopK, cpu(16), &out).is_ok());
  }
  EXPECT_EQ(small, large);
  EXPECT_LE(large, size_t(64) << 20);
}

// The host runner gives the operator exactly the workspace the query asks for, and says so.
TEST(Contract6, Workspace_HostRunnerUsesTheQueriedSize) {
  const HostProblem hp = make(small_spec());
  size_t queried = 0;
  ASSERT_TRUE(workspace_size(hp.view(), Operator::kFusedTopK, cpu(3), &queried).is_ok());
  ASSERT_GT(queried, 0u);
  HostResults r;
  ASSERT_TRUE(run_fused(hp, cpu(3), &r).is_ok());
  EXPECT_EQ(r.workspace_bytes, queried);
}

}  // namespace
}  // namespace fit
