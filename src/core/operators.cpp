// Public operator entry points: validate once, pick a backend, check support and
// workspace, run. No allocation, no synchronisation, no exceptions escape.
#include "flashindexer/operators.h"

#include <exception>
#include <string>

#include "backend.h"
#include "check.h"
#include "validate.h"

namespace flashindexer {
namespace {

Status pick(Backend wanted, const void* data, const auto& supports, const BackendImpl** out) {
  const BackendImpl* cuda = cuda_backend();
  if (wanted == Backend::kCpu) {
    *out = &cpu_backend();
  } else if (wanted == Backend::kCuda) {
    if (cuda == nullptr)
      return Status(StatusCode::kBackendUnavailable, "backend cuda: not compiled in (no nvcc at build time)");
    const BackendInfo info = cuda->info();
    if (!info.usable) return Status(StatusCode::kBackendUnavailable, "backend cuda: " + info.detail);
    if (data != nullptr && !cuda->addresses(data))
      return Status(StatusCode::kInvalidArgument,
                    "backend cuda: expected device memory for the cache pool / logits, got a host pointer");
    *out = cuda;
  } else if (wanted == Backend::kAuto) {
    const bool use_cuda = cuda != nullptr && cuda->info().usable && cuda->addresses(data) && supports(*cuda).is_ok();
    *out = use_cuda ? cuda : &cpu_backend();
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "launch.backend: expected auto, cpu or cuda, got " + std::to_string(static_cast<int>(wanted)));
  }
  Status s = supports(**out);
  if (!s.is_ok()) return Status(s.code(), std::string("backend ") + to_string((*out)->info().backend) + ": " + s.message());
  return Status::ok();
}

Status prepare(const IndexerProblem& p, Operator op, const Launch& l, const BackendImpl** be) {
  if (op != Operator::kDenseLogits && op != Operator::kFusedTopK)
    return Status(StatusCode::kInvalidArgument, "op: expected dense_logits or fused_topk, got " +
                                                    std::string(to_string(op)));
  FI_RETURN_IF_ERROR(check_problem(p));
  return pick(l.backend, p.cache.pool, [&](const BackendImpl& b) { return b.supports(p, op); }, be);
}

Status prepare(const TopKProblem& p, const Launch& l, const BackendImpl** be) {
  FI_RETURN_IF_ERROR(check_problem(p));
  return pick(l.backend, p.logits, [&](const BackendImpl& b) { return b.supports(p); }, be);
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

Status can_implement(const IndexerProblem& p, Operator op, const Launch& l) {
  const BackendImpl* be = nullptr;
  return prepare(p, op, l, &be);
}

Status can_implement(const TopKProblem& p, const Launch& l) {
  const BackendImpl* be = nullptr;
  return prepare(p, l, &be);
}

Status resolve_backend(const IndexerProblem& p, Operator op, const Launch& l, Backend* resolved) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, op, l, &be));
  *resolved = be->info().backend;
  return Status::ok();
}

Status resolve_backend(const TopKProblem& p, const Launch& l, Backend* resolved) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, l, &be));
  *resolved = be->info().backend;
  return Status::ok();
}

Status workspace_size(const IndexerProblem& p, Operator op, const Launch& l, size_t* bytes) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, op, l, &be));
  *bytes = be->workspace_bytes(p, op, l);
  return Status::ok();
}

Status workspace_size(const TopKProblem& p, const Launch& l, size_t* bytes) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, l, &be));
  *bytes = be->workspace_bytes(p, l);
  return Status::ok();
}

Status dense_logits(const IndexerProblem& p, const LogitsOutput& out, const Launch& l) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, Operator::kDenseLogits, l, &be));
  FI_RETURN_IF_ERROR(check_outputs(out, p.rows));
  FI_RETURN_IF_ERROR(check_workspace(l, be->workspace_bytes(p, Operator::kDenseLogits, l)));
  return guarded([&] { return be->dense_logits(p, out, l); });
}

Status topk_over_logits(const TopKProblem& p, const TopKOutputs& out, const Launch& l) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, l, &be));
  FI_RETURN_IF_ERROR(check_outputs(out, p.rows, p.k, p.pages.page_size > 0));
  FI_RETURN_IF_ERROR(check_workspace(l, be->workspace_bytes(p, l)));
  return guarded([&] { return be->topk_over_logits(p, out, l); });
}

Status fused_topk(const IndexerProblem& p, const TopKOutputs& out, const Launch& l) {
  const BackendImpl* be = nullptr;
  FI_RETURN_IF_ERROR(prepare(p, Operator::kFusedTopK, l, &be));
  FI_RETURN_IF_ERROR(check_outputs(out, p.rows, p.k, true));
  FI_RETURN_IF_ERROR(check_workspace(l, be->workspace_bytes(p, Operator::kFusedTopK, l)));
  return guarded([&] { return be->fused_topk(p, out, l); });
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
