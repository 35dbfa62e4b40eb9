// flashindexer CUDA backend (sm_90a): host side.
//
// Device discovery, the pointer check used by Backend::kAuto, the call's plan (plan/call_plan.h,
// made once per call) and the launches of the sm_90a kernels (sm90/kernels/) under that plan.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>

#include "core/backend.h"
#include "core/check.h"
#include "cuda/plan/call_plan.h"
#include "cuda/sm90/kernels/arch_probe.h"
#include "cuda/sm90/kernels/dense_logits.h"
#include "cuda/sm90/kernels/fused_topk.h"
#include "cuda/sm90/kernels/topk_over_logits.h"

namespace flashindexer {
namespace cuda {
namespace {

struct Device {
  BackendInfo info{Backend::kCuda, true, false, ""};
  int num_sms = 0;
  size_t smem_optin = 0;  // opt-in shared memory per block (bytes)
  ClusterCapacity clusters;  // TopK's kStaged clusters that fit at once
};

// Why no device can be used, told apart: no driver at all, a driver older than this build's
// runtime, no device, or another error.
std::string no_device_reason(cudaError_t e) {
  int driver = 0;
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  const auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  if (driver == 0) return "no NVIDIA driver found (libcuda.so.1 is not installed)";
  if (e == cudaErrorInsufficientDriver)
    return "driver too old: it supports CUDA " + version(driver) + ", this build needs CUDA " + version(CUDART_VERSION);
  if (e == cudaErrorNoDevice || e == cudaSuccess) return "no CUDA device present (driver for CUDA " + version(driver) + ")";
  return std::string("no usable device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

Device discover() {
  Device d;
  BackendInfo& info = d.info;
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    info.detail = no_device_reason(e);
    cudaGetLastError();  // clear the sticky-free error state
    return d;
  }
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    info.detail = "cudaGetDeviceProperties failed";
    return d;
  }
  const std::string name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                           std::to_string(prop.minor) + ")";
  if (prop.major != 9 || prop.minor != 0) {
    info.detail = name + ": wrong architecture; the kernels need sm_90 (H100, H200)";
    return d;
  }
  if (cudaError_t e = sm90::arch_image_available(); e != cudaSuccess) {
    info.detail = name + ": no sm_90a image in this binary: " + cudaGetErrorString(e);
    cudaGetLastError();
    return d;
  }
  info.usable = true;
  info.detail = name;
  d.num_sms = prop.multiProcessorCount;
  d.smem_optin = prop.sharedMemPerBlockOptin;
  d.clusters = sm90::staged_cluster_capacities();
  return d;
}

Status launch_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status(StatusCode::kInternal, std::string(what) + ": CUDA error " + cudaGetErrorName(e) + ": " +
                                           cudaGetErrorString(e));
}

class CudaBackend final : public BackendImpl {
 public:
  BackendInfo info() const override { return device().info; }
  bool addresses(const void* ptr) const override {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  }

  Status plan(const IndexerProblem& p, Operator op, const Launch&, Plan* plan) const override {
    count_plan();
    CallPlan c;
    FI_RETURN_IF_ERROR(plan_indexer(p, op, limits(), &c));
    plan->workspace_bytes = c.workspace_bytes;
    set_plan_decisions(plan, c);
    return Status::ok();
  }
  Status plan(const TopKProblem& p, const Launch&, Plan* plan) const override {
    count_plan();
    CallPlan c;
    FI_RETURN_IF_ERROR(plan_topk(p, limits(), &c));
    plan->workspace_bytes = c.workspace_bytes;
    set_plan_decisions(plan, c);
    return Status::ok();
  }
  std::string describe(const Plan& plan) const override { return cuda::describe(plan_decisions<CallPlan>(plan)); }

  Status dense_logits(const Plan& plan, const IndexerProblem& p, const LogitsOutput& out,
                      const Launch& l) const override {
    const sm90::DenseLogitsArgs args{&p, out, plan_decisions<CallPlan>(plan).scorer};
    return launch_status(sm90::dense_logits(args, static_cast<cudaStream_t>(l.stream)), "dense_logits");
  }
  Status topk_over_logits(const Plan& plan, const TopKProblem& p, const TopKOutputs& out,
                          const Launch& l) const override {
    const TopKPlan t = plan_decisions<CallPlan>(plan).topk;
    const sm90::TopKArgs args{p.logits, p.logits_row_stride, p.rows, p.pages, p.k, p.order, out, t.ctas_per_row,
                              l.workspace, t.path};
    return launch_status(sm90::topk_over_logits(args, static_cast<cudaStream_t>(l.stream)), "topk_over_logits");
  }
  Status fused_topk(const Plan& plan, const IndexerProblem& p, const TopKOutputs& out,
                    const Launch& l) const override {
    const CallPlan c = plan_decisions<CallPlan>(plan);
    const sm90::FusedTopKArgs args{&p, out, c.scorer, c.lockstep,
                                   c.fused == FusedPath::kCluster ? c.staged : FusedStagedPlan{}, l.workspace};
    return launch_status(sm90::fused_topk(args, static_cast<cudaStream_t>(l.stream)), "fused_topk");
  }

  // Device memory for the host runners (never the operators' run path).
  Status allocate(size_t bytes, void** ptr) const override {
    *ptr = nullptr;
    return launch_status(cudaMalloc(ptr, std::max<size_t>(bytes, 1)), "cudaMalloc");
  }
  void release(void* ptr) const override { cudaFree(ptr); }
  Status copy(void* dst, const void* src, size_t bytes) const override {
    return bytes ? launch_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy") : Status::ok();
  }
  Status synchronize(const Launch& l) const override {
    return launch_status(cudaStreamSynchronize(static_cast<cudaStream_t>(l.stream)), "cudaStreamSynchronize");
  }

 private:
  DeviceLimits limits() const { return {device().num_sms, device().smem_optin, device().clusters}; }
  const Device& device() const {
    std::call_once(once_, [this] { device_ = discover(); });
    return device_;
  }
  mutable std::once_flag once_;
  mutable Device device_;
};

}  // namespace
}  // namespace cuda

const BackendImpl* cuda_backend() {
  static const cuda::CudaBackend backend{};
  return &backend;
}

}  // namespace flashindexer
