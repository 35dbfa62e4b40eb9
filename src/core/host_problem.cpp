// HostProblem views, HostResults buffers, and problem / result files (CONTRACT §7).
#include "flashindexer/host_problem.h"
#include "flashindexer/operators.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend.h"
#include "check.h"
#include "safetensors.h"

namespace flashindexer {
namespace {

int64_t q_head_bytes(CacheFormat f) { return f == CacheFormat::kMxfp4 ? kHeadDim / 2 : kHeadDim; }

template <typename T>
const T* data_or_null(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

Status format_error(const std::string& msg) { return Status(StatusCode::kFormatError, msg); }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Looks up a tensor and checks its dtype and shape (-1 = any extent, recorded into *dims).
Status get_tensor(const safetensors::File& f, const std::string& name, std::initializer_list<const char*> dtypes,
                  std::vector<int64_t> expect, const safetensors::Tensor** out) {
  auto it = f.tensors.find(name);
  if (it == f.tensors.end()) return format_error(name + ": expected the tensor, got none");
  const safetensors::Tensor& t = it->second;
  bool dtype_ok = false;
  std::string names;
  for (const char* d : dtypes) {
    dtype_ok |= t.dtype == d;
    names += (names.empty() ? "" : " or ") + std::string(d);
  }
  if (!dtype_ok) return format_error(name + ".dtype: expected " + names + ", got " + t.dtype);
  bool shape_ok = t.shape.size() == expect.size();
  for (size_t i = 0; shape_ok && i < expect.size(); ++i) shape_ok = expect[i] < 0 || expect[i] == t.shape[i];
  if (!shape_ok) return format_error(name + ".shape: expected " + shape_str(expect) + " (-1 = any), got " +
                                     shape_str(t.shape));
  *out = &t;
  return Status::ok();
}

template <typename T>
void copy_to(const safetensors::Tensor& t, std::vector<T>* v) {
  v->resize(t.bytes / sizeof(T));
  if (t.bytes) std::memcpy(v->data(), t.data, t.bytes);
}

Status get_int(const std::map<std::string, std::string>& md, const std::string& key, bool required,
               int64_t lo, int64_t hi, int64_t* out) {
  auto it = md.find(key);
  if (it == md.end()) {
    if (required) return format_error("__metadata__." + key + ": expected an integer, got none");
    return Status::ok();
  }
  const std::string& s = it->second;
  size_t used = 0;
  long long v = 0;
  bool ok = !s.empty();
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    ok = false;
  }
  if (!ok || used != s.size() || v < lo || v > hi)
    return format_error("__metadata__." + key + ": expected an integer in " + std::to_string(lo) + ".." +
                        std::to_string(hi) + ", got \"" + s + "\"");
  *out = v;
  return Status::ok();
}

}  // namespace

IndexerProblem HostProblem::view() const {
  IndexerProblem p;
  p.cache.format = format;
  p.cache.pool = data_or_null(pool);
  p.cache.page_stride = page_stride;
  p.cache.pages.page_size = page_size;
  p.cache.pages.num_pages = num_pages;
  p.cache.pages.table = table_width > 0 ? data_or_null(page_table) : nullptr;
  p.cache.pages.table_width = table_width;
  p.cache.pages.table_row_stride = table_width;
  const int64_t hb = q_head_bytes(format);
  p.queries.num_heads = num_heads;
  p.queries.q = data_or_null(q);
  p.queries.q_head_stride = hb;
  p.queries.q_row_stride = hb * num_heads;
  p.queries.q_scale = format == CacheFormat::kMxfp4 ? data_or_null(q_scale) : nullptr;
  p.queries.q_scale_head_stride = kHeadDim / 32;
  p.queries.q_scale_row_stride = int64_t{kHeadDim / 32} * num_heads;
  p.queries.weight_type = weight_type;
  p.queries.weights = data_or_null(weights);
  p.queries.weights_row_stride = num_heads;
  p.queries.weight_scale = weight_scale;
  p.rows.form = form;
  p.rows.num_requests = num_requests;
  p.rows.num_rows = num_rows;
  p.rows.row_batch = data_or_null(row_batch);
  p.rows.window_start = data_or_null(window_start);
  p.rows.window_end = data_or_null(window_end);
  p.rows.next_n = next_n;
  p.rows.context_lens = data_or_null(context_lens);
  p.rows.max_context = max_context;
  p.k = k;
  p.order = order;
  p.accuracy = accuracy;
  return p;
}

void HostResults::reset(int64_t n, int32_t kk, bool with_slots) {
  rows = n;
  k = kk;
  workspace_bytes = 0;
  const size_t cells = size_t(n) * size_t(kk);
  positions.assign(cells, INT32_MIN + 7);
  slots.assign(with_slots ? cells : 0, INT32_MIN + 7);
  scores.assign(cells, std::numeric_limits<float>::quiet_NaN());
  counts.assign(size_t(n), INT32_MIN + 7);
  status.assign(size_t(n), 0xDEADBEEFu);
}

TopKOutputs HostResults::outputs() {
  TopKOutputs o;
  o.positions = positions.data();
  o.positions_row_stride = k;
  o.slots = slots.empty() ? nullptr : slots.data();
  o.slots_row_stride = k;
  o.scores = scores.data();
  o.scores_row_stride = k;
  o.counts = counts.data();
  o.status = status.data();
  return o;
}

Status parse_problem(const uint8_t* data, size_t size, HostProblem* out) {
  safetensors::File f;
  FI_RETURN_IF_ERROR(safetensors::parse(data, size, &f));
  HostProblem p;
  const auto& md = f.metadata;
  auto fmt = md.find("format");
  if (fmt == md.end() || (fmt->second != "mxfp4" && fmt->second != "fp8_e4m3"))
    return format_error("__metadata__.format: expected \"mxfp4\" or \"fp8_e4m3\", got " +
                        (fmt == md.end() ? std::string("none") : "\"" + fmt->second + "\""));
  p.format = fmt->second == "mxfp4" ? CacheFormat::kMxfp4 : CacheFormat::kFp8E4M3;
  int64_t page_size = 0, k = 0, max_context = 0, next_n = 1;
  FI_RETURN_IF_ERROR(get_int(md, "page_size", true, 1, 1 << 20, &page_size));
  FI_RETURN_IF_ERROR(get_int(md, "k", true, 1, INT32_MAX, &k));
  FI_RETURN_IF_ERROR(get_int(md, "max_context", true, 0, INT32_MAX, &max_context));
  FI_RETURN_IF_ERROR(get_int(md, "next_n", false, 1, 1 << 20, &next_n));
  p.page_size = static_cast<int32_t>(page_size);
  p.k = static_cast<int32_t>(k);
  p.max_context = max_context;
  p.next_n = static_cast<int32_t>(next_n);
  if (auto it = md.find("order"); it != md.end()) {
    if (it->second != "position" && it->second != "rank")
      return format_error("__metadata__.order: expected \"position\" or \"rank\", got \"" + it->second + "\"");
    p.order = it->second == "rank" ? OutputOrder::kRank : OutputOrder::kPosition;
  }
  if (auto it = md.find("accuracy"); it != md.end() && !parse_accuracy(it->second.c_str(), &p.accuracy))
    return format_error("__metadata__.accuracy: expected \"production\" or \"exact\", got \"" + it->second + "\"");
  if (auto it = md.find("weight_scale"); it != md.end()) {
    char* end = nullptr;
    const float ws = std::strtof(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !std::isfinite(ws))
      return format_error("__metadata__.weight_scale: expected a finite number, got \"" + it->second + "\"");
    p.weight_scale = ws;
  }

  const safetensors::Tensor *q = nullptr, *qs = nullptr, *w = nullptr, *pool = nullptr, *table = nullptr;
  const int64_t hb = q_head_bytes(p.format);
  FI_RETURN_IF_ERROR(get_tensor(f, "q", {"U8"}, {-1, -1, hb}, &q));
  const int64_t rows = q->shape[0];
  p.num_heads = static_cast<int32_t>(std::min<int64_t>(q->shape[1], INT32_MAX));
  if (p.format == CacheFormat::kMxfp4)
    FI_RETURN_IF_ERROR(get_tensor(f, "q_scale", {"U8"}, {rows, p.num_heads, kHeadDim / 32}, &qs));
  FI_RETURN_IF_ERROR(get_tensor(f, "weights", {"F32", "BF16"}, {rows, p.num_heads}, &w));
  p.weight_type = w->dtype == "F32" ? WeightType::kF32 : WeightType::kBF16;
  FI_RETURN_IF_ERROR(get_tensor(f, "kv_pool", {"U8"}, {-1, -1}, &pool));
  p.num_pages = pool->shape[0];
  p.page_stride = pool->shape[1];
  if (f.tensors.count("page_table")) {
    FI_RETURN_IF_ERROR(get_tensor(f, "page_table", {"I32"}, {-1, -1}, &table));
    p.table_width = table->shape[1];
    if (p.table_width == 0) return format_error("page_table.shape: expected a nonzero width, got 0");
  }

  const bool ragged = f.tensors.count("row_batch") || f.tensors.count("window_start") || f.tensors.count("window_end");
  const bool decode = f.tensors.count("context_lens") > 0;
  if (ragged == decode)
    return format_error("rows: expected either row_batch/window_start/window_end or context_lens, got " +
                        std::string(ragged ? "both" : "neither"));
  if (ragged) {
    p.form = RowForm::kRagged;
    p.num_rows = rows;
    const safetensors::Tensor *rb = nullptr, *ws = nullptr, *we = nullptr;
    FI_RETURN_IF_ERROR(get_tensor(f, "row_batch", {"I32"}, {rows}, &rb));
    FI_RETURN_IF_ERROR(get_tensor(f, "window_start", {"I32"}, {rows}, &ws));
    FI_RETURN_IF_ERROR(get_tensor(f, "window_end", {"I32"}, {rows}, &we));
    copy_to(*rb, &p.row_batch);
    copy_to(*ws, &p.window_start);
    copy_to(*we, &p.window_end);
    int64_t nreq = table ? table->shape[0] : 1;
    FI_RETURN_IF_ERROR(get_int(md, "num_requests", false, 0, INT32_MAX, &nreq));
    p.num_requests = static_cast<int32_t>(nreq);
  } else {
    p.form = RowForm::kDecode;
    const safetensors::Tensor* cl = nullptr;
    FI_RETURN_IF_ERROR(get_tensor(f, "context_lens", {"I32"}, {-1}, &cl));
    if (cl->shape[0] > INT32_MAX) return format_error("context_lens.shape: too many requests");
    p.num_requests = static_cast<int32_t>(cl->shape[0]);
    if (rows != int64_t{p.num_requests} * p.next_n)
      return format_error("q.shape[0]: expected num_requests * next_n = " +
                          std::to_string(int64_t{p.num_requests} * p.next_n) + ", got " + std::to_string(rows));
    copy_to(*cl, &p.context_lens);
  }
  if (table && table->shape[0] < p.num_requests)
    return format_error("page_table.shape[0]: expected >= num_requests " + std::to_string(p.num_requests) +
                        ", got " + std::to_string(table->shape[0]));

  copy_to(*q, &p.q);
  if (qs) copy_to(*qs, &p.q_scale);
  copy_to(*w, &p.weights);
  copy_to(*pool, &p.pool);
  if (table) copy_to(*table, &p.page_table);
  *out = std::move(p);
  return Status::ok();
}

Status read_problem_file(const std::string& path, HostProblem* out) {
  std::vector<uint8_t> bytes;
  FI_RETURN_IF_ERROR(safetensors::read_file(path, &bytes));
  return parse_problem(bytes.data(), bytes.size(), out);
}

Status write_problem_file(const std::string& path, const HostProblem& p) {
  safetensors::Writer w;
  w.metadata("format", to_string(p.format));
  w.metadata("page_size", std::to_string(p.page_size));
  w.metadata("k", std::to_string(p.k));
  w.metadata("max_context", std::to_string(p.max_context));
  w.metadata("order", p.order == OutputOrder::kRank ? "rank" : "position");
  w.metadata("accuracy", to_string(p.accuracy));
  if (p.weight_scale != 1.0f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", p.weight_scale);
    w.metadata("weight_scale", buf);
  }
  const int64_t rows = p.rows(), H = p.num_heads;
  w.add("q", "U8", {rows, H, q_head_bytes(p.format)}, p.q.data(), p.q.size());
  if (p.format == CacheFormat::kMxfp4) w.add("q_scale", "U8", {rows, H, kHeadDim / 32}, p.q_scale.data(), p.q_scale.size());
  w.add("weights", p.weight_type == WeightType::kF32 ? "F32" : "BF16", {rows, H}, p.weights.data(), p.weights.size());
  w.add("kv_pool", "U8", {p.num_pages, p.page_stride}, p.pool.data(), p.pool.size());
  if (p.table_width > 0)
    w.add("page_table", "I32", {int64_t(p.page_table.size()) / p.table_width, p.table_width}, p.page_table.data(),
          p.page_table.size() * 4);
  if (p.form == RowForm::kRagged) {
    w.metadata("num_requests", std::to_string(p.num_requests));
    w.add("row_batch", "I32", {rows}, p.row_batch.data(), p.row_batch.size() * 4);
    w.add("window_start", "I32", {rows}, p.window_start.data(), p.window_start.size() * 4);
    w.add("window_end", "I32", {rows}, p.window_end.data(), p.window_end.size() * 4);
  } else {
    w.metadata("next_n", std::to_string(p.next_n));
    w.add("context_lens", "I32", {p.num_requests}, p.context_lens.data(), p.context_lens.size() * 4);
  }
  return w.write(path);
}

Status write_result_file(const std::string& path, const HostResults& r) {
  safetensors::Writer w;
  w.add("positions", "I32", {r.rows, r.k}, r.positions.data(), r.positions.size() * 4);
  if (!r.slots.empty()) w.add("slots", "I32", {r.rows, r.k}, r.slots.data(), r.slots.size() * 4);
  w.add("scores", "F32", {r.rows, r.k}, r.scores.data(), r.scores.size() * 4);
  w.add("counts", "I32", {r.rows}, r.counts.data(), r.counts.size() * 4);
  w.add("status", "U32", {r.rows}, r.status.data(), r.status.size() * 4);
  if (!r.logits.empty()) w.add("logits", "F32", {r.rows, r.logits_width}, r.logits.data(), r.logits.size() * 4);
  return w.write(path);
}

Status read_result_file(const std::string& path, HostResults* out) {
  std::vector<uint8_t> bytes;
  FI_RETURN_IF_ERROR(safetensors::read_file(path, &bytes));
  safetensors::File f;
  FI_RETURN_IF_ERROR(safetensors::parse(bytes.data(), bytes.size(), &f));
  const safetensors::Tensor *pos = nullptr, *sc = nullptr, *cnt = nullptr, *st = nullptr;
  FI_RETURN_IF_ERROR(get_tensor(f, "positions", {"I32"}, {-1, -1}, &pos));
  const int64_t rows = pos->shape[0], k = pos->shape[1];
  FI_RETURN_IF_ERROR(get_tensor(f, "scores", {"F32"}, {rows, k}, &sc));
  FI_RETURN_IF_ERROR(get_tensor(f, "counts", {"I32"}, {rows}, &cnt));
  FI_RETURN_IF_ERROR(get_tensor(f, "status", {"U32"}, {rows}, &st));
  HostResults r;
  r.rows = rows;
  r.k = static_cast<int32_t>(k);
  copy_to(*pos, &r.positions);
  copy_to(*sc, &r.scores);
  copy_to(*cnt, &r.counts);
  copy_to(*st, &r.status);
  if (f.tensors.count("slots")) {
    const safetensors::Tensor* sl = nullptr;
    FI_RETURN_IF_ERROR(get_tensor(f, "slots", {"I32"}, {rows, k}, &sl));
    copy_to(*sl, &r.slots);
  }
  if (f.tensors.count("logits")) {
    const safetensors::Tensor* lg = nullptr;
    FI_RETURN_IF_ERROR(get_tensor(f, "logits", {"F32"}, {rows, -1}, &lg));
    r.logits_width = lg->shape[1];
    copy_to(*lg, &r.logits);
  }
  *out = std::move(r);
  return Status::ok();
}

}  // namespace flashindexer

namespace flashindexer {
namespace {

// A host runner's buffers in the memory of the backend that runs the problem: the host
// vectors themselves (identity) unless the launch asks for a usable CUDA device, which gets
// device copies, freed on destruction. Errors stick: status() is the first one.
class Mirror {
 public:
  explicit Mirror(const Launch& l) {
    const BackendImpl* cuda = cuda_backend();
    if (l.backend == Backend::kCuda && cuda != nullptr && cuda->info().usable) be_ = cuda;
  }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  ~Mirror() {
    for (void* p : owned_) be_->release(p);
  }

  // v in the backend's memory (nullptr for an empty v).
  template <typename T>
  T* in(const std::vector<T>& v) {
    if (v.empty()) return nullptr;
    if (identity()) return const_cast<T*>(v.data());
    void* p = allocate(v.size() * sizeof(T));
    if (p != nullptr) keep(be_->copy(p, v.data(), v.size() * sizeof(T)));
    return static_cast<T*>(p);
  }
  // Copies the backend's p back into v (nothing to do for the identity).
  template <typename T>
  void back(std::vector<T>& v, const T* p) {
    if (!identity() && p != nullptr && !v.empty()) keep(be_->copy(v.data(), p, v.size() * sizeof(T)));
  }
  // Points l at `bytes` of fresh workspace, 64-byte aligned.
  Status give_workspace(size_t bytes, Launch* l) {
    auto* p = static_cast<uint8_t*>(allocate(bytes + 64));
    l->workspace = p == nullptr ? nullptr : p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
    l->workspace_bytes = bytes;
    return status_;
  }
  void synchronize(const Launch& l) { keep(be_->synchronize(l)); }
  Status status() const { return status_; }

 private:
  bool identity() const { return be_ == &cpu_backend(); }
  void* allocate(size_t bytes) {
    void* p = nullptr;
    if (!keep(be_->allocate(bytes, &p))) return nullptr;
    owned_.push_back(p);
    return p;
  }
  bool keep(Status s) {
    if (status_.is_ok() && !s.is_ok()) status_ = std::move(s);
    return status_.is_ok();
  }

  const BackendImpl* be_ = &cpu_backend();
  std::vector<void*> owned_;
  Status status_;
};

IndexerProblem mirrored(const HostProblem& hp, Mirror& m) {
  IndexerProblem p = hp.view();
  p.cache.pool = m.in(hp.pool);
  if (p.cache.pages.table != nullptr) p.cache.pages.table = m.in(hp.page_table);
  p.queries.q = m.in(hp.q);
  if (p.queries.q_scale != nullptr) p.queries.q_scale = m.in(hp.q_scale);
  p.queries.weights = m.in(hp.weights);
  p.rows.row_batch = m.in(hp.row_batch);
  p.rows.window_start = m.in(hp.window_start);
  p.rows.window_end = m.in(hp.window_end);
  p.rows.context_lens = m.in(hp.context_lens);
  return p;
}

// The outputs of r (poisoned by reset()) in the backend's memory.
TopKOutputs mirrored(HostResults& r, Mirror& m) {
  TopKOutputs o = r.outputs();
  o.positions = m.in(r.positions);
  o.slots = m.in(r.slots);
  o.scores = m.in(r.scores);
  o.counts = m.in(r.counts);
  o.status = m.in(r.status);
  return o;
}
void copy_back(HostResults& r, const TopKOutputs& o, Mirror& m) {
  m.back(r.positions, o.positions);
  m.back(r.slots, o.slots);
  m.back(r.scores, o.scores);
  m.back(r.counts, o.counts);
  m.back(r.status, o.status);
}

template <typename T>
std::string diff_array(const char* name, const std::vector<T>& a, const std::vector<T>& b, int64_t width) {
  if (a.size() != b.size())
    return std::string(name) + ": sizes differ (" + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      const int64_t w = std::max<int64_t>(width, 1);
      return std::string(name) + "[" + std::to_string(int64_t(i) / w) + ", " + std::to_string(int64_t(i) % w) +
             "]: " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
    }
  return "";
}

}  // namespace

Status run_fused(const HostProblem& hp, const Launch& launch, HostResults* out) {
  Mirror m(launch);
  const IndexerProblem p = mirrored(hp, m);
  out->reset(hp.rows(), hp.k, true);
  const TopKOutputs o = mirrored(*out, m);
  FI_RETURN_IF_ERROR(m.status());
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, Operator::kFusedTopK, launch, &plan));
  out->workspace_bytes = plan.workspace_bytes;
  out->plan = describe(plan);
  Launch l = launch;
  FI_RETURN_IF_ERROR(m.give_workspace(plan.workspace_bytes, &l));
  FI_RETURN_IF_ERROR(fused_topk(plan, p, o, l));
  m.synchronize(l);
  copy_back(*out, o, m);
  return m.status();
}

Status run_dense_then_topk(const HostProblem& hp, const Launch& launch, HostResults* out, bool keep_logits) {
  Mirror m(launch);
  const IndexerProblem p = mirrored(hp, m);
  const int64_t rows = hp.rows(), width = std::max<int64_t>(hp.max_context, 1);
  std::vector<float> logits(size_t(rows * width), std::numeric_limits<float>::quiet_NaN());
  std::vector<uint32_t> dense_status(size_t(rows), 0xDEADBEEFu);
  float* logits_b = m.in(logits);
  uint32_t* dense_status_b = m.in(dense_status);
  out->reset(rows, hp.k, true);
  const TopKOutputs o = mirrored(*out, m);
  FI_RETURN_IF_ERROR(m.status());
  size_t bytes = 0;
  FI_RETURN_IF_ERROR(workspace_size(p, Operator::kDenseLogits, launch, &bytes));
  Launch l = launch;
  FI_RETURN_IF_ERROR(m.give_workspace(bytes, &l));
  FI_RETURN_IF_ERROR(dense_logits(p, LogitsOutput{logits_b, width, dense_status_b}, l));

  TopKProblem t;
  t.logits = logits_b;
  t.logits_row_stride = width;
  t.rows = p.rows;
  t.pages = p.cache.pages;
  t.k = p.k;
  t.order = p.order;
  FI_RETURN_IF_ERROR(workspace_size(t, launch, &bytes));
  FI_RETURN_IF_ERROR(m.give_workspace(bytes, &l));
  FI_RETURN_IF_ERROR(topk_over_logits(t, o, l));
  m.synchronize(l);
  copy_back(*out, o, m);
  m.back(dense_status, dense_status_b);
  if (keep_logits) m.back(logits, logits_b);
  FI_RETURN_IF_ERROR(m.status());
  for (int64_t r = 0; r < rows; ++r)
    if (dense_status[size_t(r)] != out->status[size_t(r)])
      return Status(StatusCode::kInternal, "row " + std::to_string(r) + ": dense status " +
                                               std::to_string(dense_status[size_t(r)]) + " != topk status " +
                                               std::to_string(out->status[size_t(r)]));
  if (keep_logits) {
    out->logits = std::move(logits);
    out->logits_width = width;
  }
  return Status::ok();
}

HostProblem take_row_sample(HostProblem& p, int64_t max_rows, std::vector<int64_t>* rows) {
  HostProblem s;
  s.format = p.format;
  s.num_heads = p.num_heads;
  s.page_size = p.page_size;
  s.page_stride = p.page_stride;
  s.num_pages = p.num_pages;
  s.k = p.k;
  s.order = p.order;
  s.accuracy = p.accuracy;
  s.weight_scale = p.weight_scale;
  s.weight_type = p.weight_type;
  s.form = p.form;
  s.next_n = p.next_n;
  s.max_context = p.max_context;
  s.table_width = p.table_width;
  // Units: rows (ragged) or requests (decode), picked evenly.
  const int64_t per = p.form == RowForm::kDecode ? p.next_n : 1;
  const int64_t units = p.form == RowForm::kDecode ? p.num_requests : p.num_rows;
  const int64_t want = std::clamp<int64_t>(max_rows / per, units > 0 ? 1 : 0, units);
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < want; ++i) picked.push_back(want == 1 ? 0 : i * (units - 1) / (want - 1));
  const size_t qb = p.q.size() / size_t(std::max<int64_t>(p.rows(), 1));
  const size_t qsb = p.q_scale.size() / size_t(std::max<int64_t>(p.rows(), 1));
  const size_t wb = p.weights.size() / size_t(std::max<int64_t>(p.rows(), 1));
  rows->clear();
  for (int64_t u : picked) {
    for (int64_t n = 0; n < per; ++n) {
      const int64_t r = u * per + n;
      rows->push_back(r);
      s.q.insert(s.q.end(), p.q.begin() + int64_t(qb) * r, p.q.begin() + int64_t(qb) * (r + 1));
      s.q_scale.insert(s.q_scale.end(), p.q_scale.begin() + int64_t(qsb) * r, p.q_scale.begin() + int64_t(qsb) * (r + 1));
      s.weights.insert(s.weights.end(), p.weights.begin() + int64_t(wb) * r, p.weights.begin() + int64_t(wb) * (r + 1));
    }
    if (p.form == RowForm::kDecode) {
      s.context_lens.push_back(p.context_lens[size_t(u)]);
      if (p.table_width > 0)
        s.page_table.insert(s.page_table.end(), p.page_table.begin() + p.table_width * u,
                            p.page_table.begin() + p.table_width * (u + 1));
    } else {
      s.row_batch.push_back(p.row_batch[size_t(u)]);
      s.window_start.push_back(p.window_start[size_t(u)]);
      s.window_end.push_back(p.window_end[size_t(u)]);
    }
  }
  if (p.form == RowForm::kDecode) {
    s.num_requests = int32_t(picked.size());
  } else {
    s.num_requests = p.num_requests;  // row_batch keeps naming p's requests
    s.num_rows = int64_t(picked.size());
    s.page_table = p.page_table;
  }
  s.pool = std::move(p.pool);
  return s;
}

HostResults select_rows(const HostResults& r, const std::vector<int64_t>& rows) {
  HostResults s;
  s.rows = int64_t(rows.size());
  s.k = r.k;
  const auto take = [&](const auto& v, int64_t width, auto& out) {
    if (v.empty()) return;
    for (int64_t row : rows) out.insert(out.end(), v.begin() + row * width, v.begin() + (row + 1) * width);
  };
  take(r.positions, r.k, s.positions);
  take(r.slots, r.k, s.slots);
  take(r.scores, r.k, s.scores);
  take(r.counts, 1, s.counts);
  take(r.status, 1, s.status);
  return s;
}

std::string first_difference(const HostResults& a, const HostResults& b) {
  if (a.rows != b.rows || a.k != b.k)
    return "shapes differ: [" + std::to_string(a.rows) + ", " + std::to_string(a.k) + "] vs [" +
           std::to_string(b.rows) + ", " + std::to_string(b.k) + "]";
  for (std::string d : {diff_array("counts", a.counts, b.counts, 1), diff_array("status", a.status, b.status, 1),
                        diff_array("positions", a.positions, b.positions, a.k),
                        diff_array("slots", a.slots, b.slots, a.k), diff_array("scores", a.scores, b.scores, a.k)})
    if (!d.empty()) return d;
  return "";
}

}  // namespace flashindexer
