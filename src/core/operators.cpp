// Public operator entry points: validate, pick a backend and make the call's plan once
// (support, workspace, decisions), then run that plan. The run path neither allocates nor
// synchronises, and no exception escapes.
#include "flashindexer/operators.h"

#include <atomic>
#include <exception>
#include <initializer_list>
#include <string>

#include "backend.h"
#include "check.h"
#include "validate.h"

namespace flashindexer {
namespace {

std::atomic<uint64_t> g_plans{0};

// The host shape a plan is made for (FNV-1a over the fields the backends plan from).
uint64_t shape_of(std::initializer_list<int64_t> fields) {
  uint64_t h = 1469598103934665603ull;
  for (const int64_t f : fields) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((uint64_t(f) >> (8 * b)) & 0xFF)) * 1099511628211ull;
  }
  return h;
}
uint64_t shape_of(const IndexerProblem& p, Operator op) {
  return shape_of({int64_t(op), int64_t(p.rows.form), p.rows.rows(), p.rows.next_n, p.rows.num_requests,
                   p.rows.max_context, int64_t(p.cache.format), p.cache.pages.page_size, p.queries.num_heads, p.k,
                   int64_t(p.order), int64_t(p.accuracy)});
}
uint64_t shape_of(const TopKProblem& p) {
  return shape_of({int64_t(Operator::kTopKOverLogits), int64_t(p.rows.form), p.rows.rows(), p.rows.next_n,
                   p.rows.num_requests, p.rows.max_context, p.pages.page_size, p.k, int64_t(p.order)});
}

// Resolves the backend and asks it for the plan. kAuto takes cuda when it is usable, addresses
// `data` and plans the problem; that plan is the call's (nothing is planned twice).
Status pick_and_plan(Backend wanted, const void* data, const auto& plan_on, Plan* plan) {
  const BackendImpl* cuda = cuda_backend();
  const BackendImpl* be = nullptr;
  if (wanted == Backend::kCpu) {
    be = &cpu_backend();
  } else if (wanted == Backend::kCuda) {
    if (cuda == nullptr)
      return Status(StatusCode::kBackendUnavailable, "backend cuda: not compiled in (no nvcc at build time)");
    const BackendInfo info = cuda->info();
    if (!info.usable) return Status(StatusCode::kBackendUnavailable, "backend cuda: " + info.detail);
    if (data != nullptr && !cuda->addresses(data))
      return Status(StatusCode::kInvalidArgument,
                    "backend cuda: expected device memory for the cache pool / logits, got a host pointer");
    be = cuda;
  } else if (wanted == Backend::kAuto) {
    if (cuda != nullptr && cuda->info().usable && cuda->addresses(data) && plan_on(*cuda, plan).is_ok()) {
      plan->backend = Backend::kCuda;
      return Status::ok();
    }
    be = &cpu_backend();
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "launch.backend: expected auto, cpu or cuda, got " + std::to_string(static_cast<int>(wanted)));
  }
  Status s = plan_on(*be, plan);
  if (!s.is_ok()) return Status(s.code(), std::string("backend ") + to_string(be->info().backend) + ": " + s.message());
  plan->backend = be->info().backend;
  return Status::ok();
}

const BackendImpl& backend_of(const Plan& plan) {
  return plan.backend == Backend::kCuda && cuda_backend() != nullptr ? *cuda_backend() : cpu_backend();
}

// The plan was made by this library for this problem's shape and operator.
Status check_plan(const Plan& plan, Operator op, uint64_t shape) {
  FI_CHECK_ARG(plan.op == op, kInvalidArgument, "plan.op", to_string(op), to_string(plan.op));
  FI_CHECK_ARG(plan.backend == Backend::kCpu || (plan.backend == Backend::kCuda && cuda_backend() != nullptr),
               kInvalidArgument, "plan.backend", "cpu or a compiled cuda", to_string(plan.backend));
  if (plan.shape != shape)
    return Status(StatusCode::kInvalidArgument,
                  "plan: expected a plan made for this problem's shape (rows, max_context, k, formats, order), "
                  "got one made for another");
  return Status::ok();
}

// Backends report failures through Status; this guards against a library bug
// (e.g. std::bad_alloc from a thread spawn) escaping through the C++ API.
template <typename F>
Status guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("unexpected exception: ") + e.what());
  }
}

}  // namespace

uint64_t plans_made() { return g_plans.load(); }
void count_plan() { g_plans.fetch_add(1); }

Status make_plan(const IndexerProblem& p, Operator op, const Launch& l, Plan* plan) {
  FI_CHECK_ARG(plan != nullptr, kInvalidArgument, "plan", "non-null", "null");
  if (op != Operator::kDenseLogits && op != Operator::kFusedTopK)
    return Status(StatusCode::kInvalidArgument, "op: expected dense_logits or fused_topk, got " +
                                                    std::string(to_string(op)));
  FI_RETURN_IF_ERROR(check_problem(p));
  Plan made;
  made.op = op;
  made.shape = shape_of(p, op);
  FI_RETURN_IF_ERROR(guarded([&] {
    return pick_and_plan(l.backend, p.cache.pool,
                         [&](const BackendImpl& b, Plan* pl) { return b.plan(p, op, l, pl); }, &made);
  }));
  *plan = made;
  return Status::ok();
}

Status make_plan(const TopKProblem& p, const Launch& l, Plan* plan) {
  FI_CHECK_ARG(plan != nullptr, kInvalidArgument, "plan", "non-null", "null");
  FI_RETURN_IF_ERROR(check_problem(p));
  Plan made;
  made.op = Operator::kTopKOverLogits;
  made.shape = shape_of(p);
  FI_RETURN_IF_ERROR(guarded([&] {
    return pick_and_plan(l.backend, p.logits, [&](const BackendImpl& b, Plan* pl) { return b.plan(p, l, pl); },
                         &made);
  }));
  *plan = made;
  return Status::ok();
}

std::string describe(const Plan& plan) {
  return std::string("backend ") + to_string(plan.backend) + "\n" + backend_of(plan).describe(plan);
}

Status can_implement(const IndexerProblem& p, Operator op, const Launch& l) {
  Plan plan;
  return make_plan(p, op, l, &plan);
}

Status can_implement(const TopKProblem& p, const Launch& l) {
  Plan plan;
  return make_plan(p, l, &plan);
}

Status resolve_backend(const IndexerProblem& p, Operator op, const Launch& l, Backend* resolved) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, op, l, &plan));
  *resolved = plan.backend;
  return Status::ok();
}

Status resolve_backend(const TopKProblem& p, const Launch& l, Backend* resolved) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, l, &plan));
  *resolved = plan.backend;
  return Status::ok();
}

Status workspace_size(const IndexerProblem& p, Operator op, const Launch& l, size_t* bytes) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, op, l, &plan));
  *bytes = plan.workspace_bytes;
  return Status::ok();
}

Status workspace_size(const TopKProblem& p, const Launch& l, size_t* bytes) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, l, &plan));
  *bytes = plan.workspace_bytes;
  return Status::ok();
}

// The runs of a plan whose problem was checked (by make_plan, or by the caller's run below).
namespace {
Status run_planned(const Plan& plan, const IndexerProblem& p, const LogitsOutput& out, const Launch& l) {
  FI_RETURN_IF_ERROR(check_outputs(out, p.rows));
  FI_RETURN_IF_ERROR(check_workspace(l, plan.workspace_bytes));
  return guarded([&] { return backend_of(plan).dense_logits(plan, p, out, l); });
}
Status run_planned(const Plan& plan, const TopKProblem& p, const TopKOutputs& out, const Launch& l) {
  FI_RETURN_IF_ERROR(check_outputs(out, p.rows, p.k, p.pages.page_size > 0));
  FI_RETURN_IF_ERROR(check_workspace(l, plan.workspace_bytes));
  return guarded([&] { return backend_of(plan).topk_over_logits(plan, p, out, l); });
}
Status run_planned(const Plan& plan, const IndexerProblem& p, const TopKOutputs& out, const Launch& l) {
  FI_RETURN_IF_ERROR(check_outputs(out, p.rows, p.k, true));
  FI_RETURN_IF_ERROR(check_workspace(l, plan.workspace_bytes));
  return guarded([&] { return backend_of(plan).fused_topk(plan, p, out, l); });
}
}  // namespace

Status dense_logits(const Plan& plan, const IndexerProblem& p, const LogitsOutput& out, const Launch& l) {
  FI_RETURN_IF_ERROR(check_problem(p));
  FI_RETURN_IF_ERROR(check_plan(plan, Operator::kDenseLogits, shape_of(p, Operator::kDenseLogits)));
  return run_planned(plan, p, out, l);
}

Status topk_over_logits(const Plan& plan, const TopKProblem& p, const TopKOutputs& out, const Launch& l) {
  FI_RETURN_IF_ERROR(check_problem(p));
  FI_RETURN_IF_ERROR(check_plan(plan, Operator::kTopKOverLogits, shape_of(p)));
  return run_planned(plan, p, out, l);
}

Status fused_topk(const Plan& plan, const IndexerProblem& p, const TopKOutputs& out, const Launch& l) {
  FI_RETURN_IF_ERROR(check_problem(p));
  FI_RETURN_IF_ERROR(check_plan(plan, Operator::kFusedTopK, shape_of(p, Operator::kFusedTopK)));
  return run_planned(plan, p, out, l);
}

// The one-call runs: make_plan checks the problem once; the plan is this problem's.
Status dense_logits(const IndexerProblem& p, const LogitsOutput& out, const Launch& l) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, Operator::kDenseLogits, l, &plan));
  return run_planned(plan, p, out, l);
}

Status topk_over_logits(const TopKProblem& p, const TopKOutputs& out, const Launch& l) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, l, &plan));
  return run_planned(plan, p, out, l);
}

Status fused_topk(const IndexerProblem& p, const TopKOutputs& out, const Launch& l) {
  Plan plan;
  FI_RETURN_IF_ERROR(make_plan(p, Operator::kFusedTopK, l, &plan));
  return run_planned(plan, p, out, l);
}

std::vector<BackendInfo> list_backends() {
  std::vector<BackendInfo> all{cpu_backend().info()};
  if (const BackendImpl* cuda = cuda_backend()) {
    all.push_back(cuda->info());
  } else {
    all.push_back({Backend::kCuda, false, false, "not compiled in (no nvcc at build time)"});
  }
  return all;
}

}  // namespace flashindexer
