// flashindexer CUDA backend (sm_90a): host side.
//
// Device discovery, the pointer check used by Backend::kAuto, launch planning
// (heuristics.h) and the calls into the sm_90a kernels (src/cuda/sm90/).
// Implemented: dense logits (paged_scorer.cuh), TopK over logits and the fused operator
// (fused_topk.cu, the same scorer with a selecting sink).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>

#include "../core/backend.h"
#include "heuristics.h"
#include "sm90/arch_probe.h"
#include "sm90/dense_logits.h"
#include "sm90/fused_topk.h"
#include "sm90/topk_over_logits.h"

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

  Status supports(const IndexerProblem& p, Operator op) const override {
    if (p.cache.pages.page_size % kScorerTile != 0)
      return Status(StatusCode::kUnsupported, "cache.pages.page_size: expected a multiple of 64 on sm_90a, got " +
                                                  std::to_string(p.cache.pages.page_size));
    const ScorerPlan plan = scorer_plan(p, op);
    if (!sm90::dense_logits_instantiated(p.cache.format, p.queries.num_heads, plan.rows_per_group))
      return Status(StatusCode::kUnsupported, "queries.num_heads: expected 32 or 64 on sm_90a, got " +
                                                  std::to_string(p.queries.num_heads));
    if (plan.ctas() > INT32_MAX)
      return Status(StatusCode::kUnsupported, "rows x splits: expected <= 2147483647 CTAs on sm_90a, got " +
                                                  std::to_string(plan.ctas()));
    if (op == Operator::kFusedTopK) {
      if (p.k > kTopKMaxK)
        return Status(StatusCode::kUnsupported, "k: expected 1.." + std::to_string(kTopKMaxK) +
                                                    " for fused_topk on sm_90a, got " + std::to_string(p.k));
      const int32_t cap = sm90::fused_topk_capacity(p.cache.format, p.queries.num_heads, plan.rows_per_group,
                                                    device().smem_optin);
      const int32_t need =
          sm90::fused_topk_min_capacity(p.cache.format, p.accuracy, p.queries.num_heads, plan.rows_per_group, p.k);
      if (cap < need)
        return Status(StatusCode::kUnsupported,
                      "k: fused_topk on sm_90a holds " + std::to_string(cap) + " candidates per row for H = " +
                          std::to_string(p.queries.num_heads) + " with " + std::to_string(plan.rows_per_group) +
                          " rows per group in shared memory; k = " + std::to_string(p.k) + " needs " +
                          std::to_string(need));
    }
    return Status::ok();
  }
  Status supports(const TopKProblem& p) const override {
    if (p.rows.rows() > INT32_MAX)  // one CTA row per grid x index
      return Status(StatusCode::kUnsupported, "rows: expected <= 2147483647 on sm_90a, got " +
                                                  std::to_string(p.rows.rows()));
    if (p.k > kTopKMaxK)
      return Status(StatusCode::kUnsupported, "k: expected 1.." + std::to_string(kTopKMaxK) + " on sm_90a, got " +
                                                  std::to_string(p.k));
    return Status::ok();
  }
  size_t workspace_bytes(const IndexerProblem& p, Operator op, const Launch&) const override {
    return op == Operator::kFusedTopK ? sm90::fused_topk_workspace_bytes(p, scorer_plan(p, op), staged_plan(p),
                                                                          device().smem_optin)
                                      : 0;
  }
  size_t workspace_bytes(const TopKProblem& p, const Launch&) const override {
    return plan_topk(p.rows.rows(), p.rows.max_context, p.k, device().num_sms, device().clusters).workspace_bytes;
  }

  Status dense_logits(const IndexerProblem& p, const LogitsOutput& out, const Launch& l) const override {
    const sm90::DenseLogitsArgs args{&p, out, scorer_plan(p, Operator::kDenseLogits)};
    return launch_status(sm90::dense_logits(args, static_cast<cudaStream_t>(l.stream)), "dense_logits");
  }
  Status topk_over_logits(const TopKProblem& p, const TopKOutputs& out, const Launch& l) const override {
    const TopKPlan plan = plan_topk(p.rows.rows(), p.rows.max_context, p.k, device().num_sms, device().clusters);
    const sm90::TopKArgs args{p.logits, p.logits_row_stride, p.rows, p.pages, p.k, p.order, out, plan.ctas_per_row,
                              l.workspace, plan.path};
    return launch_status(sm90::topk_over_logits(args, static_cast<cudaStream_t>(l.stream)), "topk_over_logits");
  }
  Status fused_topk(const IndexerProblem& p, const TopKOutputs& out, const Launch& l) const override {
    const sm90::FusedTopKArgs args{&p, out, scorer_plan(p, Operator::kFusedTopK), l.workspace,
                                   device().smem_optin, staged_plan(p)};
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
  // Dense logits split decode rows finer than the fused operator (heuristics.h).
  ScorerPlan scorer_plan(const IndexerProblem& p, Operator op) const {
    return plan_scorer(p.rows.form == RowForm::kDecode, p.rows.rows(), p.rows.next_n, p.rows.num_requests,
                       p.queries.num_heads, p.rows.max_context, device().num_sms,
                       op == Operator::kDenseLogits ? kScorerMinChunkDense : kScorerMinChunk, prefill_rows(p, op));
  }
  // Rows per ragged group (0: 256 / H). The fused operator takes groups of N = 128 where the
  // candidates of N = 256 do not fit beside the scorer (H = 32, K = 2048: 8 rows hold 1,372
  // each, 4 rows 3,800), and where fused_prefill_rows prefers them (fp8 at H = 64). The dense
  // operator takes the same groups, since mxfp4 scores depend on them (the integer path is a
  // CTA-wide choice), except fp8 in exact mode, whose scores do not (dense_prefill_rows:
  // N = 128, three consumer warpgroups).
  int32_t prefill_rows(const IndexerProblem& p, Operator op) const {
    const int32_t h = p.queries.num_heads;
    if (p.rows.form == RowForm::kDecode) return 0;  // decode groups are a request's next_n rows
    const bool fp8_exact = p.cache.format == CacheFormat::kFp8E4M3 && p.accuracy == ScoreAccuracy::kExact;
    if (op == Operator::kDenseLogits) {
      if (const int32_t rows = dense_prefill_rows(fp8_exact, h); rows > 0) return rows;
    }
    if (h != 32 && h != 64) return 0;
    auto fits = [&](int32_t rows) {
      return sm90::fused_topk_capacity(p.cache.format, h, rows, device().smem_optin) >=
             sm90::fused_topk_min_capacity(p.cache.format, p.accuracy, h, rows, p.k);
    };
    if (const int32_t rows = fused_prefill_rows(fp8_exact, h); rows > 0 && fits(rows)) return rows;
    const int32_t full = 256 / h;
    return !fits(full) && fits(full / 2) ? full / 2 : 0;
  }
  // Decode rows may take the fused cluster path (fused_staged.cu).
  FusedStagedPlan staged_plan(const IndexerProblem& p) const {
    return sm90::fused_staged_plan(p, device().num_sms, device().clusters);
  }
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
