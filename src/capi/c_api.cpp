// The C ABI of include/flashindexer/c_api.h: converts the C structs to problem.h's and calls
// operators.h. Enum values outside their range pass through unchanged, so the operators'
// own checks name them ("accuracy: expected production or exact, got 7").
#include "flashindexer/c_api.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "flashindexer/operators.h"

namespace fi = flashindexer;

namespace {

// The row description and the page map, which both C problem structs spell the same way.
template <class CProblem>
fi::Rows rows_of(const CProblem& c) {
  fi::Rows r;
  r.form = static_cast<fi::RowForm>(c.row_form);
  r.num_requests = c.num_requests;
  r.next_n = c.next_n;
  r.num_rows = c.num_rows;
  r.row_batch = c.row_batch;
  r.window_start = c.window_start;
  r.window_end = c.window_end;
  r.context_lens = c.context_lens;
  r.max_context = c.max_context;
  return r;
}

template <class CProblem>
fi::PageMap pages_of(const CProblem& c) {
  fi::PageMap m;
  m.page_size = c.page_size;
  m.num_pages = c.num_pages;
  m.table = c.table;
  m.table_width = c.table_width;
  m.table_row_stride = c.table_row_stride;
  return m;
}

fi::IndexerProblem to_cpp(const fi_indexer_problem& c) {
  fi::IndexerProblem p;
  p.cache.format = static_cast<fi::CacheFormat>(c.format);
  p.cache.pool = c.pool;
  p.cache.page_stride = c.page_stride;
  p.cache.pages = pages_of(c);
  p.queries.num_heads = c.num_heads;
  p.queries.weight_type = static_cast<fi::WeightType>(c.weight_type);
  p.queries.q = c.q;
  p.queries.q_row_stride = c.q_row_stride;
  p.queries.q_head_stride = c.q_head_stride;
  p.queries.q_scale = c.q_scale;
  p.queries.q_scale_row_stride = c.q_scale_row_stride;
  p.queries.q_scale_head_stride = c.q_scale_head_stride;
  p.queries.weights = c.weights;
  p.queries.weights_row_stride = c.weights_row_stride;
  p.queries.weight_scale = c.weight_scale;
  p.rows = rows_of(c);
  p.k = c.k;
  p.order = static_cast<fi::OutputOrder>(c.order);
  p.accuracy = static_cast<fi::ScoreAccuracy>(c.accuracy);
  return p;
}

fi::TopKProblem to_cpp(const fi_topk_problem& c) {
  fi::TopKProblem p;
  p.logits = c.logits;
  p.logits_row_stride = c.logits_row_stride;
  p.rows = rows_of(c);
  p.pages = pages_of(c);
  p.k = c.k;
  p.order = static_cast<fi::OutputOrder>(c.order);
  return p;
}

fi::TopKOutputs to_cpp(const fi_topk_outputs& c) {
  return {c.positions, c.positions_row_stride, c.slots, c.slots_row_stride, c.scores,
          c.scores_row_stride, c.counts, c.status};
}

fi::Launch to_cpp(const fi_launch& c) {
  fi::Launch l;
  l.backend = static_cast<fi::Backend>(c.backend);
  l.cpu_threads = c.cpu_threads;
  l.workspace = c.workspace;
  l.workspace_bytes = c.workspace_bytes;
  l.stream = c.stream;
  return l;
}

int finish(const fi::Status& s, char* msg, size_t msg_len) {
  if (msg && msg_len > 0) {
    const std::string text = s.to_string();
    const size_t n = std::min(text.size(), msg_len - 1);
    std::memcpy(msg, text.data(), n);
    msg[n] = '\0';
  }
  return static_cast<int>(s.code());
}

fi::Status null_argument(const char* name) {
  return {fi::StatusCode::kNullPointer, std::string(name) + ": expected non-null, got null"};
}

// Runs f() unless a struct pointer is null; a C caller never sees a C++ exception.
template <class F>
int guarded(char* msg, size_t msg_len, std::initializer_list<std::pair<const void*, const char*>> args, F&& f) {
  for (const auto& [ptr, name] : args)
    if (ptr == nullptr) return finish(null_argument(name), msg, msg_len);
  try {
    return finish(f(), msg, msg_len);
  } catch (const std::exception& e) {
    return finish({fi::StatusCode::kInternal, std::string("unexpected exception: ") + e.what()}, msg, msg_len);
  } catch (...) {
    return finish({fi::StatusCode::kInternal, "unexpected exception"}, msg, msg_len);
  }
}

}  // namespace

extern "C" {

int fi_abi_version(void) { return FI_C_ABI_VERSION; }

void fi_indexer_problem_init(fi_indexer_problem* c) {
  if (!c) return;
  const fi::IndexerProblem p;
  *c = fi_indexer_problem{};
  c->format = static_cast<int32_t>(p.cache.format);
  c->page_size = p.cache.pages.page_size;
  c->num_heads = p.queries.num_heads;
  c->weight_type = static_cast<int32_t>(p.queries.weight_type);
  c->weight_scale = p.queries.weight_scale;
  c->row_form = static_cast<int32_t>(p.rows.form);
  c->next_n = p.rows.next_n;
  c->k = p.k;
  c->order = static_cast<int32_t>(p.order);
  c->accuracy = static_cast<int32_t>(p.accuracy);
}

void fi_topk_problem_init(fi_topk_problem* c) {
  if (!c) return;
  const fi::TopKProblem p;
  *c = fi_topk_problem{};
  c->row_form = static_cast<int32_t>(p.rows.form);
  c->next_n = p.rows.next_n;
  c->page_size = p.pages.page_size;
  c->k = p.k;
  c->order = static_cast<int32_t>(p.order);
}

void fi_launch_init(fi_launch* c) {
  if (!c) return;
  *c = fi_launch{};
  c->backend = static_cast<int32_t>(fi::Launch{}.backend);
}

int fi_can_implement(const fi_indexer_problem* p, int32_t op, const fi_launch* l, char* msg, size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {l, "launch"}},
                 [&] { return fi::can_implement(to_cpp(*p), static_cast<fi::Operator>(op), to_cpp(*l)); });
}

int fi_workspace_size(const fi_indexer_problem* p, int32_t op, const fi_launch* l, size_t* bytes, char* msg,
                      size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {l, "launch"}, {bytes, "bytes"}},
                 [&] { return fi::workspace_size(to_cpp(*p), static_cast<fi::Operator>(op), to_cpp(*l), bytes); });
}

int fi_dense_logits(const fi_indexer_problem* p, const fi_logits_output* out, const fi_launch* l, char* msg,
                    size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {out, "out"}, {l, "launch"}}, [&] {
    return fi::dense_logits(to_cpp(*p), fi::LogitsOutput{out->logits, out->row_stride, out->status}, to_cpp(*l));
  });
}

int fi_fused_topk(const fi_indexer_problem* p, const fi_topk_outputs* out, const fi_launch* l, char* msg,
                  size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {out, "out"}, {l, "launch"}},
                 [&] { return fi::fused_topk(to_cpp(*p), to_cpp(*out), to_cpp(*l)); });
}

int fi_topk_can_implement(const fi_topk_problem* p, const fi_launch* l, char* msg, size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {l, "launch"}},
                 [&] { return fi::can_implement(to_cpp(*p), to_cpp(*l)); });
}

int fi_topk_workspace_size(const fi_topk_problem* p, const fi_launch* l, size_t* bytes, char* msg, size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {l, "launch"}, {bytes, "bytes"}},
                 [&] { return fi::workspace_size(to_cpp(*p), to_cpp(*l), bytes); });
}

int fi_topk_over_logits(const fi_topk_problem* p, const fi_topk_outputs* out, const fi_launch* l, char* msg,
                        size_t msg_len) {
  return guarded(msg, msg_len, {{p, "problem"}, {out, "out"}, {l, "launch"}},
                 [&] { return fi::topk_over_logits(to_cpp(*p), to_cpp(*out), to_cpp(*l)); });
}

}  // extern "C"
