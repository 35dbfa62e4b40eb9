// flashindexer: the seam every backend plugs into.
//
// The public operators (operators.cpp) validate host arguments once, pick a
// backend, check its support and workspace, then call it. A backend sees only
// problems that passed check_problem / check_outputs / check_workspace.
#pragma once

#include <cstddef>

#include "flashindexer/operators.h"

namespace flashindexer {

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual BackendInfo info() const = 0;
  // Whether the backend reads `ptr` directly (host memory for cpu, device memory for cuda).
  virtual bool addresses(const void* ptr) const = 0;

  virtual Status supports(const IndexerProblem& p, Operator op) const = 0;
  virtual Status supports(const TopKProblem& p) const = 0;
  virtual size_t workspace_bytes(const IndexerProblem& p, Operator op, const Launch& l) const = 0;
  virtual size_t workspace_bytes(const TopKProblem& p, const Launch& l) const = 0;

  virtual Status dense_logits(const IndexerProblem& p, const LogitsOutput& out, const Launch& l) const = 0;
  virtual Status topk_over_logits(const TopKProblem& p, const TopKOutputs& out, const Launch& l) const = 0;
  virtual Status fused_topk(const IndexerProblem& p, const TopKOutputs& out, const Launch& l) const = 0;

  // Buffers in the memory this backend addresses, for the host runners (host_problem.cpp:
  // a HostProblem run on a device), never for the operators' run path. copy() is
  // synchronous and takes either direction; synchronize() waits for the launch's stream.
  virtual Status allocate(size_t bytes, void** ptr) const = 0;
  virtual void release(void* ptr) const = 0;
  virtual Status copy(void* dst, const void* src, size_t bytes) const = 0;
  virtual Status synchronize(const Launch& l) const = 0;
};

const BackendImpl& cpu_backend();
// nullptr when the library was built without CUDA.
const BackendImpl* cuda_backend();

}  // namespace flashindexer
