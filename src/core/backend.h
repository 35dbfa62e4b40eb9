// flashindexer: the seam every backend plugs into.
//
// The public operators (operators.cpp) validate host arguments once, pick a backend and
// ask it for the call's plan (support, workspace and its decisions, made once), then run
// that plan. A backend sees only problems that passed check_problem / check_outputs /
// check_workspace, and runs only plans it made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "flashindexer/operators.h"

namespace flashindexer {

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual BackendInfo info() const = 0;
  // Whether the backend reads `ptr` directly (host memory for cpu, device memory for cuda).
  virtual bool addresses(const void* ptr) const = 0;

  // Fills plan->workspace_bytes and plan->decisions, or says why the backend cannot run it.
  virtual Status plan(const IndexerProblem& p, Operator op, const Launch& l, Plan* plan) const = 0;
  virtual Status plan(const TopKProblem& p, const Launch& l, Plan* plan) const = 0;
  virtual std::string describe(const Plan& plan) const = 0;

  virtual Status dense_logits(const Plan& plan, const IndexerProblem& p, const LogitsOutput& out,
                              const Launch& l) const = 0;
  virtual Status topk_over_logits(const Plan& plan, const TopKProblem& p, const TopKOutputs& out,
                                  const Launch& l) const = 0;
  virtual Status fused_topk(const Plan& plan, const IndexerProblem& p, const TopKOutputs& out,
                            const Launch& l) const = 0;

  // Buffers in the memory this backend addresses, for the host runners (host_problem.cpp:
  // a HostProblem run on a device), never for the operators' run path. copy() is
  // synchronous and takes either direction; synchronize() waits for the launch's stream.
  virtual Status allocate(size_t bytes, void** ptr) const = 0;
  virtual void release(void* ptr) const = 0;
  virtual Status copy(void* dst, const void* src, size_t bytes) const = 0;
  virtual Status synchronize(const Launch& l) const = 0;
};

// A backend's record inside Plan::decisions (trivially copyable, at most its size).
template <class T>
T plan_decisions(const Plan& plan) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(Plan::decisions));
  T t;
  std::memcpy(&t, plan.decisions, sizeof(T));
  return t;
}
template <class T>
void set_plan_decisions(Plan* plan, const T& t) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(Plan::decisions));
  std::memcpy(plan->decisions, &t, sizeof(T));
}

// Plans made in this process so far (the backends' plan() calls): the tests count them.
uint64_t plans_made();
void count_plan();

const BackendImpl& cpu_backend();
// nullptr when the library was built without CUDA.
const BackendImpl* cuda_backend();

}  // namespace flashindexer
