// Host-checkable invalid inputs (CONTRACT §5): each is rejected before any launch
// with a status code and a message that names the argument, expected and actual.
#include <climits>
#include <functional>

#include "test_util.h"

namespace fit {
namespace {

struct Invalid {
  const char* what;
  std::function<void(IndexerProblem&, TopKOutputs&, Launch&)> mutate;
  StatusCode code;
  const char* arg;  // the message starts with this argument name
};

TEST(Validation, InvalidInputsTable) {
  const HostProblem hp = make(small_spec());
  alignas(16) static uint8_t scratch[64];
  const std::vector<Invalid> cases = {
      {"format", [](auto& p, auto&, auto&) { p.cache.format = static_cast<CacheFormat>(7); }, StatusCode::kUnsupported, "cache.format"},
      {"H = 48", [](auto& p, auto&, auto&) { p.queries.num_heads = 48; }, StatusCode::kUnsupported, "queries.num_heads"},
      {"K = 0", [](auto& p, auto&, auto&) { p.k = 0; }, StatusCode::kUnsupported, "k"},
      {"K = -5", [](auto& p, auto&, auto&) { p.k = -5; }, StatusCode::kUnsupported, "k"},
      {"K too large", [](auto& p, auto&, auto&) { p.k = 1 << 20; }, StatusCode::kUnsupported, "k"},
      {"order", [](auto& p, auto&, auto&) { p.order = static_cast<OutputOrder>(3); }, StatusCode::kInvalidArgument, "order"},
      {"accuracy", [](auto& p, auto&, auto&) { p.accuracy = static_cast<ScoreAccuracy>(5); }, StatusCode::kInvalidArgument, "accuracy"},
      {"page size 0", [](auto& p, auto&, auto&) { p.cache.pages.page_size = 0; }, StatusCode::kUnsupported, "pages.page_size"},
      {"num_pages 0", [](auto& p, auto&, auto&) { p.cache.pages.num_pages = 0; }, StatusCode::kInvalidArgument, "pages.num_pages"},
      {"table width 0", [](auto& p, auto&, auto&) { p.cache.pages.table_width = 0; }, StatusCode::kInvalidArgument, "pages.table_width"},
      {"table stride", [](auto& p, auto&, auto&) { p.cache.pages.table_row_stride = 3; }, StatusCode::kInvalidArgument, "pages.table_row_stride"},
      {"null pool", [](auto& p, auto&, auto&) { p.cache.pool = nullptr; }, StatusCode::kNullPointer, "cache.pool"},
      {"misaligned pool", [](auto& p, auto&, auto&) { p.cache.pool = static_cast<const uint8_t*>(p.cache.pool) + 4; }, StatusCode::kMisaligned, "cache.pool"},
      {"page stride below payload", [](auto& p, auto&, auto&) { p.cache.page_stride = 64 * 68 - 16; }, StatusCode::kInvalidArgument, "cache.page_stride"},
      {"page stride not x16", [](auto& p, auto&, auto&) { p.cache.page_stride += 8; }, StatusCode::kMisaligned, "cache.page_stride"},
      {"pool bytes overflow", [](auto& p, auto&, auto&) { p.cache.pages.num_pages = INT64_MAX / 1000; }, StatusCode::kOverflow, "cache.num_pages * page_stride"},
      {"null q", [](auto& p, auto&, auto&) { p.queries.q = nullptr; }, StatusCode::kNullPointer, "queries.q"},
      {"q head stride", [](auto& p, auto&, auto&) { p.queries.q_head_stride = 32; }, StatusCode::kInvalidArgument, "queries.q_head_stride"},
      {"q row stride", [](auto& p, auto&, auto&) { p.queries.q_row_stride = 100; }, StatusCode::kInvalidArgument, "queries.q_row_stride"},
      {"q rows overflow", [](auto& p, auto&, auto&) { p.queries.q_row_stride = INT64_MAX / 2; }, StatusCode::kOverflow, "queries.q_row_stride * rows"},
      {"null q_scale", [](auto& p, auto&, auto&) { p.queries.q_scale = nullptr; }, StatusCode::kNullPointer, "queries.q_scale"},
      {"q_scale stride", [](auto& p, auto&, auto&) { p.queries.q_scale_head_stride = 2; }, StatusCode::kInvalidArgument, "queries.q_scale_head_stride"},
      {"null weights", [](auto& p, auto&, auto&) { p.queries.weights = nullptr; }, StatusCode::kNullPointer, "queries.weights"},
      {"misaligned weights", [](auto& p, auto&, auto&) { p.queries.weights = static_cast<const uint8_t*>(p.queries.weights) + 2; }, StatusCode::kMisaligned, "queries.weights"},
      {"weights stride", [](auto& p, auto&, auto&) { p.queries.weights_row_stride = 63; }, StatusCode::kInvalidArgument, "queries.weights_row_stride"},
      {"weight type", [](auto& p, auto&, auto&) { p.queries.weight_type = static_cast<WeightType>(9); }, StatusCode::kUnsupported, "queries.weight_type"},
      {"weight_scale NaN", [](auto& p, auto&, auto&) { p.queries.weight_scale = std::nanf(""); }, StatusCode::kInvalidArgument, "queries.weight_scale"},
      {"max_context < 0", [](auto& p, auto&, auto&) { p.rows.max_context = -1; }, StatusCode::kInvalidArgument, "rows.max_context"},
      {"max_context > int32", [](auto& p, auto&, auto&) { p.rows.max_context = int64_t{1} << 31; }, StatusCode::kInvalidArgument, "rows.max_context"},
      {"rows < 0", [](auto& p, auto&, auto&) { p.rows.num_rows = -3; }, StatusCode::kInvalidArgument, "rows.num_rows"},
      {"null row_batch", [](auto& p, auto&, auto&) { p.rows.row_batch = nullptr; }, StatusCode::kNullPointer, "rows.row_batch"},
      {"null window_end", [](auto& p, auto&, auto&) { p.rows.window_end = nullptr; }, StatusCode::kNullPointer, "rows.window_end"},
      {"row form", [](auto& p, auto&, auto&) { p.rows.form = static_cast<RowForm>(4); }, StatusCode::kInvalidArgument, "rows.form"},
      {"next_n 5", [](auto& p, auto&, auto&) { p.rows.form = RowForm::kDecode; p.rows.next_n = 5; }, StatusCode::kUnsupported, "rows.next_n"},
      {"null context_lens", [](auto& p, auto&, auto&) { p.rows.form = RowForm::kDecode; p.rows.context_lens = nullptr; }, StatusCode::kNullPointer, "rows.context_lens"},
      {"null positions", [](auto&, auto& o, auto&) { o.positions = nullptr; }, StatusCode::kNullPointer, "outputs.positions"},
      {"positions too narrow", [](auto& p, auto& o, auto&) { o.positions_row_stride = p.k - 1; }, StatusCode::kInvalidArgument, "outputs.positions_row_stride"},
      {"slots too narrow", [](auto&, auto& o, auto&) { o.slots_row_stride = 1; }, StatusCode::kInvalidArgument, "outputs.slots_row_stride"},
      {"scores too narrow", [](auto&, auto& o, auto&) { o.scores_row_stride = 0; }, StatusCode::kInvalidArgument, "outputs.scores_row_stride"},
      {"misaligned counts", [](auto&, auto& o, auto&) { o.counts = reinterpret_cast<int32_t*>(scratch + 2); }, StatusCode::kMisaligned, "outputs.counts"},
      {"outputs overflow", [](auto&, auto& o, auto&) { o.positions_row_stride = INT64_MAX / 3; }, StatusCode::kOverflow, "outputs.positions_row_stride * rows"},
      {"slots overflow", [](auto&, auto& o, auto&) { o.slots_row_stride = INT64_MAX / 3; }, StatusCode::kOverflow, "outputs.slots_row_stride * rows"},
      {"misaligned positions", [](auto&, auto& o, auto&) { o.positions = reinterpret_cast<int32_t*>(scratch + 2); }, StatusCode::kMisaligned, "outputs.positions"},
      {"misaligned scores", [](auto&, auto& o, auto&) { o.scores = reinterpret_cast<float*>(scratch + 2); }, StatusCode::kMisaligned, "outputs.scores"},
      {"workspace too small", [](auto&, auto&, auto& l) { l.workspace_bytes = 16; }, StatusCode::kWorkspaceTooSmall, "launch.workspace_bytes"},
      {"null workspace", [](auto&, auto&, auto& l) { l.workspace = nullptr; }, StatusCode::kNullPointer, "launch.workspace"},
      {"misaligned workspace", [](auto&, auto&, auto& l) { l.workspace = static_cast<uint8_t*>(l.workspace) + 8; }, StatusCode::kMisaligned, "launch.workspace"},
      {"backend", [](auto&, auto&, auto& l) { l.backend = static_cast<Backend>(9); }, StatusCode::kInvalidArgument, "launch.backend"},
  };
  for (const Invalid& c : cases) {
    IndexerProblem p = hp.view();
    HostResults r;
    r.reset(hp.rows(), hp.k, true);
    TopKOutputs o = r.outputs();
    std::vector<uint8_t> ws(1 << 20);
    Launch l = cpu();
    l.workspace = ws.data();
    l.workspace_bytes = ws.size();
    c.mutate(p, o, l);
    const Status st = fused_topk(p, o, l);
    EXPECT_EQ(st.code(), c.code) << c.what << ": " << st.to_string();
    EXPECT_EQ(st.message().rfind(std::string(c.arg) + ": expected", 0), 0u) << c.what << ": " << st.message();
    for (uint32_t s : r.status) ASSERT_EQ(s, 0xDEADBEEFu) << c.what << ": an output was written";
  }
}

TEST(Validation, DenseAndTopKOperatorsCheckTheirOwnOutputs) {
  const HostProblem hp = make(small_spec());
  const IndexerProblem p = hp.view();
  std::vector<uint8_t> ws(1 << 20);
  Launch l = cpu();
  l.workspace = ws.data();
  l.workspace_bytes = ws.size();
  std::vector<float> logits(size_t(hp.rows() * hp.max_context));
  Status st = dense_logits(p, LogitsOutput{logits.data(), hp.max_context - 1, nullptr}, l);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("out.row_stride: expected >= max_context", 0), 0u) << st.message();
  st = dense_logits(p, LogitsOutput{nullptr, hp.max_context, nullptr}, l);
  EXPECT_EQ(st.code(), StatusCode::kNullPointer);

  TopKProblem t;
  t.logits = logits.data();
  t.logits_row_stride = hp.max_context;
  t.rows = p.rows;
  t.pages.page_size = 0;  // no page map -> no slots
  t.k = hp.k;
  HostResults r;
  r.reset(hp.rows(), hp.k, true);
  st = topk_over_logits(t, r.outputs(), l);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("outputs.slots: expected null when no page map is given", 0), 0u) << st.message();
  t.logits_row_stride = 3;
  EXPECT_EQ(topk_over_logits(t, r.outputs(), l).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(can_implement(p, Operator::kTopKOverLogits, l).code(), StatusCode::kInvalidArgument);
}

TEST(Validation, MessagesNameExpectedAndActualValues) {
  IndexerProblem p = make(small_spec()).view();
  p.k = 0;
  const Status st = can_implement(p, Operator::kFusedTopK, cpu());
  EXPECT_EQ(st.to_string(), "unsupported: k: expected 1..65536, got 0");
}

}  // namespace
}  // namespace fit
