// The C ABI (c_api.h, libflashindexer_c.so) on the CPU backend: the same results as the C++
// operators bit for bit, the C++ defaults in fi_*_init, statuses and messages through the ABI.
#include "flashindexer/c_api.h"

#include "test_util.h"

namespace fit {
namespace {

fi_indexer_problem c_view(const HostProblem& h) {
  const IndexerProblem p = h.view();
  fi_indexer_problem c;
  fi_indexer_problem_init(&c);
  c.format = int32_t(p.cache.format);
  c.page_size = p.cache.pages.page_size;
  c.pool = p.cache.pool;
  c.page_stride = p.cache.page_stride;
  c.num_pages = p.cache.pages.num_pages;
  c.table = p.cache.pages.table;
  c.table_width = p.cache.pages.table_width;
  c.table_row_stride = p.cache.pages.table_row_stride;
  c.num_heads = p.queries.num_heads;
  c.weight_type = int32_t(p.queries.weight_type);
  c.q = p.queries.q;
  c.q_row_stride = p.queries.q_row_stride;
  c.q_head_stride = p.queries.q_head_stride;
  c.q_scale = p.queries.q_scale;
  c.q_scale_row_stride = p.queries.q_scale_row_stride;
  c.q_scale_head_stride = p.queries.q_scale_head_stride;
  c.weights = p.queries.weights;
  c.weights_row_stride = p.queries.weights_row_stride;
  c.weight_scale = p.queries.weight_scale;
  c.row_form = int32_t(p.rows.form);
  c.num_requests = p.rows.num_requests;
  c.next_n = p.rows.next_n;
  c.num_rows = p.rows.num_rows;
  c.row_batch = p.rows.row_batch;
  c.window_start = p.rows.window_start;
  c.window_end = p.rows.window_end;
  c.context_lens = p.rows.context_lens;
  c.max_context = p.rows.max_context;
  c.k = p.k;
  c.order = int32_t(p.order);
  c.accuracy = int32_t(p.accuracy);
  return c;
}

fi_topk_outputs c_outputs(HostResults& r) {
  const TopKOutputs o = r.outputs();
  return {o.positions, o.positions_row_stride, o.slots, o.slots_row_stride, o.scores, o.scores_row_stride, o.counts,
          o.status};
}

fi_launch c_cpu() {
  fi_launch l;
  fi_launch_init(&l);
  l.backend = int32_t(Backend::kCpu);
  l.cpu_threads = 2;
  return l;
}

TEST(CApi, InitFillsTheCppDefaults) {
  EXPECT_EQ(fi_abi_version(), FI_C_ABI_VERSION);
  fi_indexer_problem c;
  std::memset(&c, 0x5A, sizeof c);
  fi_indexer_problem_init(&c);
  const IndexerProblem p;
  EXPECT_EQ(c.format, int32_t(p.cache.format));
  EXPECT_EQ(c.page_size, p.cache.pages.page_size);
  EXPECT_EQ(c.num_heads, p.queries.num_heads);
  EXPECT_EQ(c.weight_scale, p.queries.weight_scale);
  EXPECT_EQ(c.next_n, p.rows.next_n);
  EXPECT_EQ(c.k, p.k);
  EXPECT_EQ(c.accuracy, int32_t(ScoreAccuracy::kProduction));
  EXPECT_EQ(c.pool, nullptr);
  EXPECT_EQ(c.max_context, 0);
  fi_launch l;
  std::memset(&l, 0x5A, sizeof l);
  fi_launch_init(&l);
  EXPECT_EQ(l.backend, int32_t(Backend::kAuto));
  EXPECT_EQ(l.workspace, nullptr);
  EXPECT_EQ(l.stream, nullptr);
}

// Fused, dense logits and TopK over those logits through the ABI equal the C++ operators'.
TEST(CApi, OperatorsMatchTheCppApiBitForBit) {
  for (const RowForm form : {RowForm::kRagged, RowForm::kDecode}) {
    SyntheticSpec s = small_spec(Generator::kStructured, form == RowForm::kDecode ? CacheFormat::kFp8E4M3
                                                                                    : CacheFormat::kMxfp4);
    s.form = form;
    s.next_n = 2;
    const HostProblem h = make(s);
    const fi_indexer_problem c = c_view(h);
    fi_launch l = c_cpu();
    char msg[256];
    ASSERT_EQ(fi_can_implement(&c, int32_t(Operator::kFusedTopK), &l, msg, sizeof msg), 0) << msg;
    EXPECT_STREQ(msg, "ok");
    size_t bytes = 0;
    ASSERT_EQ(fi_workspace_size(&c, int32_t(Operator::kFusedTopK), &l, &bytes, msg, sizeof msg), 0) << msg;
    size_t cpp_bytes = 0;
    ASSERT_TRUE(workspace_size(h.view(), Operator::kFusedTopK, cpu(), &cpp_bytes).is_ok());
    EXPECT_EQ(bytes, cpp_bytes);
    std::vector<uint8_t> ws(bytes + 16);
    l.workspace = ws.data();
    l.workspace_bytes = bytes;
    HostResults got;
    got.reset(h.rows(), h.k, true);
    fi_topk_outputs o = c_outputs(got);
    ASSERT_EQ(fi_fused_topk(&c, &o, &l, msg, sizeof msg), 0) << msg;
    const HostResults want = fused(h);
    EXPECT_EQ(first_difference(got, want), "");

    // Dense logits, then the TopK over them, through the ABI: the same outputs (CONTRACT §3).
    const int64_t width = h.max_context;
    std::vector<float> logits(size_t(h.rows() * width), 0.0f);
    std::vector<uint32_t> status(size_t(h.rows()), 0xFFu);
    const fi_logits_output lo{logits.data(), width, status.data()};
    ASSERT_EQ(fi_workspace_size(&c, int32_t(Operator::kDenseLogits), &l, &bytes, msg, sizeof msg), 0) << msg;
    ws.assign(bytes + 16, 0);
    l.workspace = ws.data();
    l.workspace_bytes = bytes;
    ASSERT_EQ(fi_dense_logits(&c, &lo, &l, msg, sizeof msg), 0) << msg;
    fi_topk_problem t;
    fi_topk_problem_init(&t);
    t.logits = logits.data();
    t.logits_row_stride = width;
    t.row_form = c.row_form;
    t.num_requests = c.num_requests;
    t.next_n = c.next_n;
    t.num_rows = c.num_rows;
    t.row_batch = c.row_batch;
    t.window_start = c.window_start;
    t.window_end = c.window_end;
    t.context_lens = c.context_lens;
    t.max_context = c.max_context;
    t.page_size = c.page_size;
    t.num_pages = c.num_pages;
    t.table = c.table;
    t.table_width = c.table_width;
    t.table_row_stride = c.table_row_stride;
    t.k = c.k;
    t.order = c.order;
    ASSERT_EQ(fi_topk_can_implement(&t, &l, msg, sizeof msg), 0) << msg;
    ASSERT_EQ(fi_topk_workspace_size(&t, &l, &bytes, msg, sizeof msg), 0) << msg;
    ws.assign(bytes + 16, 0);
    l.workspace = ws.data();
    l.workspace_bytes = bytes;
    HostResults via_logits;
    via_logits.reset(h.rows(), h.k, true);
    fi_topk_outputs vo = c_outputs(via_logits);
    ASSERT_EQ(fi_topk_over_logits(&t, &vo, &l, msg, sizeof msg), 0) << msg;
    EXPECT_EQ(first_difference(via_logits, want), "");
  }
}

TEST(CApi, ErrorsComeBackAsCodesAndMessages) {
  const HostProblem h = make(small_spec());
  fi_indexer_problem c = c_view(h);
  fi_launch l = c_cpu();
  char msg[256];
  size_t bytes = 0;
  EXPECT_EQ(fi_workspace_size(nullptr, 2, &l, &bytes, msg, sizeof msg), int(StatusCode::kNullPointer));
  EXPECT_NE(std::string(msg).find("problem: expected non-null"), std::string::npos) << msg;
  EXPECT_EQ(fi_workspace_size(&c, 2, &l, nullptr, msg, sizeof msg), int(StatusCode::kNullPointer));
  EXPECT_NE(std::string(msg).find("bytes"), std::string::npos) << msg;
  c.accuracy = 7;
  EXPECT_EQ(fi_can_implement(&c, 2, &l, msg, sizeof msg), int(StatusCode::kInvalidArgument));
  EXPECT_NE(std::string(msg).find("accuracy: expected production or exact, got 7"), std::string::npos) << msg;
  c = c_view(h);
  c.k = 0;
  char tiny[8];
  EXPECT_NE(fi_can_implement(&c, 2, &l, tiny, sizeof tiny), 0);
  EXPECT_EQ(std::strlen(tiny), sizeof tiny - 1);  // truncated, NUL-terminated
  EXPECT_NE(fi_can_implement(&c, 2, &l, nullptr, 0), 0);  // no message buffer
  // A workspace below the query's size is refused before any output is written.
  c = c_view(h);
  ASSERT_EQ(fi_workspace_size(&c, 2, &l, &bytes, msg, sizeof msg), 0);
  ASSERT_GT(bytes, 0u);
  std::vector<uint8_t> ws(bytes);
  l.workspace = ws.data();
  l.workspace_bytes = bytes - 1;
  HostResults r;
  r.reset(h.rows(), h.k, true);
  const std::vector<int32_t> poisoned = r.positions;
  fi_topk_outputs o = c_outputs(r);
  EXPECT_EQ(fi_fused_topk(&c, &o, &l, msg, sizeof msg), int(StatusCode::kWorkspaceTooSmall)) << msg;
  EXPECT_EQ(r.positions, poisoned);
}

}  // namespace
}  // namespace fit
