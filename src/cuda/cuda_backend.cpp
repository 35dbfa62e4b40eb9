// flashindexer CUDA backend (sm_90a): host side.
//
// Today this is the seam only: device discovery, the pointer check used by
// Backend::kAuto, and honest "not implemented yet" answers for each operator.
// The scorer, the TopK-over-logits selectors and the fused operator plug in
// here (issues 3, 4, 5); their kernels live in src/cuda/sm90/.
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "../core/backend.h"
#include "sm90/arch_probe.h"

namespace flashindexer {
namespace cuda {
namespace {

BackendInfo discover() {
  BackendInfo info{Backend::kCuda, true, false, ""};
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    info.detail = e != cudaSuccess ? std::string("no usable device: ") + cudaGetErrorString(e)
                                   : std::string("no CUDA device present");
    cudaGetLastError();  // clear the sticky-free error state
    return info;
  }
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    info.detail = "cudaGetDeviceProperties failed";
    return info;
  }
  const std::string name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                           std::to_string(prop.minor) + ")";
  if (prop.major != 9 || prop.minor != 0) {
    info.detail = name + ": expected sm_90 (Hopper)";
    return info;
  }
  if (cudaError_t e = sm90::arch_image_available(); e != cudaSuccess) {
    info.detail = name + ": no sm_90a image in this binary: " + cudaGetErrorString(e);
    cudaGetLastError();
    return info;
  }
  info.usable = true;
  info.detail = name;
  return info;
}

Status not_yet(const char* what) {
  return Status(StatusCode::kUnsupported,
                std::string(what) + " is not implemented on sm_90a yet; use backend cpu (host pointers)");
}

class CudaBackend final : public BackendImpl {
 public:
  BackendInfo info() const override {
    std::call_once(once_, [this] { info_ = discover(); });
    return info_;
  }
  bool addresses(const void* ptr) const override {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  }

  Status supports(const IndexerProblem&, Operator op) const override { return not_yet(to_string(op)); }
  Status supports(const TopKProblem&) const override { return not_yet("topk_over_logits"); }
  size_t workspace_bytes(const IndexerProblem&, Operator, const Launch&) const override { return 0; }
  size_t workspace_bytes(const TopKProblem&, const Launch&) const override { return 0; }

  Status dense_logits(const IndexerProblem&, const LogitsOutput&, const Launch&) const override {
    return not_yet("dense_logits");
  }
  Status topk_over_logits(const TopKProblem&, const TopKOutputs&, const Launch&) const override {
    return not_yet("topk_over_logits");
  }
  Status fused_topk(const IndexerProblem&, const TopKOutputs&, const Launch&) const override {
    return not_yet("fused_topk");
  }

 private:
  mutable std::once_flag once_;
  mutable BackendInfo info_;
};

}  // namespace
}  // namespace cuda

const BackendImpl* cuda_backend() {
  static const cuda::CudaBackend backend{};
  return &backend;
}

}  // namespace flashindexer
