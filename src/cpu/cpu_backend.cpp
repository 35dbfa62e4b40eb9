// flashindexer CPU reference backend: all three operators, both formats, both row forms.
//
// Rows are independent: workers take rows from an atomic counter, and each worker
// owns a fixed slice of the caller's workspace (score scratch and/or a StreamSelector
// buffer of K + max(K, 256) rank keys). Results do not depend on the thread count.
// The fused operator holds O(K) state per row in flight, never a logits row.
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "../core/backend.h"
#include "../core/row_window.h"
#include "../core/stream_select.h"
#include "scorer.h"

namespace flashindexer {
namespace cpu {
namespace {

constexpr size_t kAlign = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t round_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

int64_t selector_capacity(int32_t k) { return int64_t{k} + std::max<int64_t>(k, 256); }

int workers_for(const Launch& l, int64_t rows) {
  int t = l.cpu_threads > 0 ? l.cpu_threads : static_cast<int>(std::thread::hardware_concurrency());
  t = std::max(t, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(t, rows)));
}

// Per-worker slice layout: [score scratch floats][selector rank keys].
struct Slice {
  size_t score_bytes = 0;
  size_t select_bytes = 0;
  size_t bytes() const { return score_bytes + select_bytes; }
};

Slice slice_for(int num_heads, bool scores, int32_t k_or_0) {
  Slice s;
  if (scores) s.score_bytes = round_up(score_scratch_floats(num_heads) * sizeof(float));
  if (k_or_0 > 0) s.select_bytes = round_up(size_t(selector_capacity(k_or_0)) * sizeof(uint64_t));
  return s;
}

// Runs body(worker, row) for every row on `workers` threads (the caller is worker 0).
template <typename Body>
void parallel_rows(int64_t rows, int workers, Body&& body) {
  std::atomic<int64_t> next{0};
  auto loop = [&](int worker) {
    for (int64_t r = next.fetch_add(1); r < rows; r = next.fetch_add(1)) body(worker, r);
  };
  std::vector<std::thread> threads;
  threads.reserve(size_t(workers) - 1);
  for (int w = 1; w < workers; ++w) threads.emplace_back(loop, w);
  loop(0);
  for (auto& t : threads) t.join();
}

void write_padding(const TopKOutputs& o, int64_t row, int32_t from, int32_t k) {
  for (int32_t i = from; i < k; ++i) {
    o.positions[row * o.positions_row_stride + i] = -1;
    if (o.slots) o.slots[row * o.slots_row_stride + i] = -1;
    if (o.scores) o.scores[row * o.scores_row_stride + i] = kNegInf;
  }
}

// Writes one row of TopK outputs from the selector's final keys.
void write_row(const TopKOutputs& o, const PageMap& pages, int64_t row, const RowWindow& w,
               const uint64_t* keys, int32_t count, int32_t k, uint32_t status) {
  for (int32_t i = 0; i < count; ++i) {
    const int32_t pos = rank_key_position(keys[i]);
    o.positions[row * o.positions_row_stride + i] = pos;
    if (o.slots) o.slots[row * o.slots_row_stride + i] = static_cast<int32_t>(physical_slot(pages, w.request, pos));
    if (o.scores) o.scores[row * o.scores_row_stride + i] = rank_key_score(keys[i]);
  }
  write_padding(o, row, count, k);
  if (o.counts) o.counts[row] = count;
  if (o.status) o.status[row] = status;
}

class CpuBackend final : public BackendImpl {
 public:
  BackendInfo info() const override {
    return {Backend::kCpu, true, true,
            "reference backend, " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads"};
  }
  bool addresses(const void*) const override { return true; }

  // The plan: worker threads and each one's workspace slice (score scratch, selector keys).
  struct CpuPlan {
    int workers;
    Slice slice;
  };
  Status plan(const IndexerProblem& p, Operator op, const Launch& l, Plan* plan) const override {
    count_plan();
    const CpuPlan c{workers_for(l, p.rows.rows()),
                    slice_for(p.queries.num_heads, true, op == Operator::kFusedTopK ? p.k : 0)};
    plan->workspace_bytes = size_t(c.workers) * c.slice.bytes();
    set_plan_decisions(plan, c);
    return Status::ok();
  }
  Status plan(const TopKProblem& p, const Launch& l, Plan* plan) const override {
    count_plan();
    const CpuPlan c{workers_for(l, p.rows.rows()), slice_for(0, false, p.k)};
    plan->workspace_bytes = size_t(c.workers) * c.slice.bytes();
    set_plan_decisions(plan, c);
    return Status::ok();
  }
  std::string describe(const Plan& plan) const override {
    const CpuPlan c = plan_decisions<CpuPlan>(plan);
    return std::string(to_string(plan.op)) + ": " + std::to_string(c.workers) + " worker threads, " +
           std::to_string(c.slice.bytes()) + " bytes of workspace each\n";
  }

  Status dense_logits(const Plan& plan, const IndexerProblem& p, const LogitsOutput& out,
                      const Launch& l) const override {
    const int64_t rows = p.rows.rows();
    const CpuPlan c = plan_decisions<CpuPlan>(plan);
    const Slice slice = c.slice;
    auto* ws = static_cast<uint8_t*>(l.workspace);
    parallel_rows(rows, c.workers, [&](int worker, int64_t r) {
      const ScoreScratch sc =
          carve_score_scratch(reinterpret_cast<float*>(ws + size_t(worker) * slice.bytes()), p.queries.num_heads);
      float* dst = out.logits + r * out.row_stride;
      const RowWindow w = resolve_row(p.rows, p.cache.pages, r);
      std::fill(dst, dst + p.rows.max_context, kNegInf);
      uint32_t status = w.status;
      score_window(p, r, w, sc, [&](int64_t s0, const float* s, int n) {
        for (int i = 0; i < n; ++i) {
          dst[s0 + i] = s[i];
          if (std::isnan(s[i])) status |= row_status::kHasNaN;
        }
      });
      if (out.status) out.status[r] = status;
    });
    return Status::ok();
  }

  Status topk_over_logits(const Plan& plan, const TopKProblem& p, const TopKOutputs& out,
                          const Launch& l) const override {
    const int64_t rows = p.rows.rows();
    const CpuPlan c = plan_decisions<CpuPlan>(plan);
    const Slice slice = c.slice;
    auto* ws = static_cast<uint8_t*>(l.workspace);
    parallel_rows(rows, c.workers, [&](int worker, int64_t r) {
      StreamSelector sel(reinterpret_cast<uint64_t*>(ws + size_t(worker) * slice.bytes()),
                         selector_capacity(p.k), p.k);
      const RowWindow w = resolve_row(p.rows, p.pages, r);
      uint32_t status = w.status;
      const float* src = p.logits + r * p.logits_row_stride;
      for (int64_t s = w.start; s < w.end; ++s) {
        if (std::isnan(src[s])) status |= row_status::kHasNaN;
        sel.push(src[s], static_cast<int32_t>(s));
      }
      const int32_t count = sel.finish(p.order);
      write_row(out, p.pages, r, w, sel.keys(), count, p.k, status);
    });
    return Status::ok();
  }

  Status fused_topk(const Plan& plan, const IndexerProblem& p, const TopKOutputs& out,
                    const Launch& l) const override {
    const int64_t rows = p.rows.rows();
    const CpuPlan c = plan_decisions<CpuPlan>(plan);
    const Slice slice = c.slice;
    auto* ws = static_cast<uint8_t*>(l.workspace);
    parallel_rows(rows, c.workers, [&](int worker, int64_t r) {
      uint8_t* base = ws + size_t(worker) * slice.bytes();
      const ScoreScratch sc = carve_score_scratch(reinterpret_cast<float*>(base), p.queries.num_heads);
      StreamSelector sel(reinterpret_cast<uint64_t*>(base + slice.score_bytes), selector_capacity(p.k), p.k);
      const RowWindow w = resolve_row(p.rows, p.cache.pages, r);
      uint32_t status = w.status;
      score_window(p, r, w, sc, [&](int64_t s0, const float* s, int n) {
        for (int i = 0; i < n; ++i) {
          if (std::isnan(s[i])) status |= row_status::kHasNaN;
          sel.push(s[i], static_cast<int32_t>(s0 + i));
        }
      });
      const int32_t count = sel.finish(p.order);
      write_row(out, p.cache.pages, r, w, sel.keys(), count, p.k, status);
    });
    return Status::ok();
  }

  // Host memory: the host runners' buffers are the host's own.
  Status allocate(size_t bytes, void** ptr) const override {
    *ptr = std::malloc(std::max<size_t>(bytes, 1));
    return *ptr ? Status::ok()
                : Status(StatusCode::kInternal, "host allocation of " + std::to_string(bytes) + " bytes failed");
  }
  void release(void* ptr) const override { std::free(ptr); }
  Status copy(void* dst, const void* src, size_t bytes) const override {
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status synchronize(const Launch&) const override { return Status::ok(); }
};

}  // namespace
}  // namespace cpu

const BackendImpl& cpu_backend() {
  static const cpu::CpuBackend backend;
  return backend;
}

}  // namespace flashindexer
