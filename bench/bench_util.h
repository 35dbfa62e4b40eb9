// flashindexer benchmarks: event timing and the floors measured in the same run.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "cuda/sm90/kernels/topk_over_logits.h"

namespace flashindexer::bench {

// A -DFI_TOPK_PROFILE=1 build's per-phase sums (sm90::topk_profile) as cycles per CTA
// (bench_topk.cpp).
nlohmann::json topk_profile_json(const unsigned long long (&prof)[sm90::kTopKProfileSlots]);

#define BENCH_CHECK(expr)                                                                      \
  do {                                                                                         \
    const cudaError_t e_ = (expr);                                                             \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e_));                         \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

// Median of `iters` event-timed runs of f, after `warmup` runs.
template <typename F>
float median_ms(F&& f, int warmup, int iters) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < warmup; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median of `iters` event-timed replays of a CUDA graph captured from one enqueue(stream)
// call, after `warmup` replays: the device time of the work without the host's launch
// overhead (how inference servers run decode). < 0 if capture or replay fails.
template <typename F>
float median_graph_ms(F&& enqueue, int warmup, int iters) {
  cudaStream_t s = nullptr;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t x = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  float result = -1.0f;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    enqueue(s);
    if (cudaStreamEndCapture(s, &g) == cudaSuccess && cudaGraphInstantiate(&x, g, 0) == cudaSuccess &&
        cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess) {
      bool ok = true;
      for (int i = 0; i < warmup && ok; ++i) ok = cudaGraphLaunch(x, s) == cudaSuccess;
      std::vector<float> t;
      for (int i = 0; i < iters && ok; ++i) {
        float ms = 0;
        ok = cudaEventRecord(a, s) == cudaSuccess && cudaGraphLaunch(x, s) == cudaSuccess &&
             cudaEventRecord(b, s) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
             cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
        t.push_back(ms);
      }
      if (ok && !t.empty()) {
        std::sort(t.begin(), t.end());
        result = t[t.size() / 2];
      }
    }
  }
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (x) cudaGraphExecDestroy(x);
  if (g) cudaGraphDestroy(g);
  if (s) cudaStreamDestroy(s);
  return result;
}

// Device-to-device copy bandwidth (bytes read + written), GB/s; < 0 on error.
double copy_floor_gbps(size_t bytes = size_t(1) << 31);

// FP8 e4m3 GEMM rate through cuBLASLt (m = n = k = `size`, fp32 accumulate), TFLOP/s;
// < 0 on error.
double fp8_gemm_floor_tflops(int size = 8192);

}  // namespace flashindexer::bench
