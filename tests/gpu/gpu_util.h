// Helpers for GPU tests (label gpu): device buffers and a skip when no usable device.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace fit {

#define GPU_CHECK(expr)                                                                     \
  do {                                                                                      \
    const cudaError_t e_ = (expr);                                                          \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_) << " " << cudaGetErrorString(e_); \
  } while (0)

#define SKIP_WITHOUT_GPU()                                                          \
  do {                                                                              \
    const auto backends_ = list_backends();                                         \
    if (!backends_[1].usable) GTEST_SKIP() << "no usable CUDA device: " << backends_[1].detail; \
  } while (0)

// A device copy of a host vector (freed on destruction).
template <typename T>
struct DeviceVector {
  T* ptr = nullptr;
  size_t n = 0;
  DeviceVector() = default;
  explicit DeviceVector(const std::vector<T>& host) { assign(host); }
  DeviceVector(size_t count, unsigned char poison) { fill(count, poison); }
  // (Re)allocates `count` elements, every byte set to `poison`.
  void fill(size_t count, unsigned char poison) {
    cudaFree(ptr);
    n = count;
    if (cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) ptr = nullptr;
    if (ptr) cudaMemset(ptr, poison, std::max<size_t>(n, 1) * sizeof(T));
    // cudaMemset runs on the legacy default stream, which a non-blocking stream does not
    // wait for: finish the poison before any operator runs.
    cudaDeviceSynchronize();
  }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() { cudaFree(ptr); }
  void assign(const std::vector<T>& host) {
    if (ptr == nullptr || n < host.size()) {
      cudaFree(ptr);
      n = host.size();
      if (cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) ptr = nullptr;
    }
    if (ptr && !host.empty()) cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> to_host() const {
    std::vector<T> h(n);
    if (n) cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  T* get() const { return n ? ptr : nullptr; }
};

// Device copies of a HostProblem's buffers; view() is the IndexerProblem over them.
// extra_pages > 0 places every page `extra_pages` pages further into a larger pool
// (pools beyond 4 GiB) and shifts the page table to match.
struct DeviceProblem {
  DeviceVector<uint8_t> pool, q, q_scale, weights;
  DeviceVector<int32_t> table, row_batch, window_start, window_end, context_lens;
  IndexerProblem p;

  explicit DeviceProblem(const HostProblem& h, int64_t extra_pages = 0)
      : q(h.q), q_scale(h.q_scale), weights(h.weights), row_batch(h.row_batch), window_start(h.window_start),
        window_end(h.window_end), context_lens(h.context_lens) {
    p = h.view();
    std::vector<int32_t> t = h.page_table;
    for (int32_t& e : t) e += int32_t(extra_pages);
    table.assign(t);
    if (extra_pages == 0) {
      pool.assign(h.pool);
    } else {
      const size_t bytes = size_t(h.num_pages + extra_pages) * size_t(h.page_stride);
      pool.fill(bytes, 0);
      if (pool.ptr)
        cudaMemcpy(pool.ptr + size_t(extra_pages) * size_t(h.page_stride), h.pool.data(), h.pool.size(),
                   cudaMemcpyHostToDevice);
      p.cache.pages.num_pages = h.num_pages + extra_pages;
    }
    p.cache.pool = pool.get();
    p.cache.pages.table = h.page_table.empty() ? nullptr : table.get();
    p.queries.q = q.get();
    p.queries.q_scale = h.q_scale.empty() ? nullptr : q_scale.get();
    p.queries.weights = weights.get();
    p.rows.row_batch = row_batch.get();
    p.rows.window_start = window_start.get();
    p.rows.window_end = window_end.get();
    p.rows.context_lens = context_lens.get();
  }
};

// A synthetic problem of H = 64 heads: `rows` ragged rows over `requests` requests (or decode
// rows, when the caller sets form), ending at C4 `context`.
inline SyntheticSpec gpu_spec(CacheFormat f, Generator g, int64_t rows, int32_t requests, int64_t context, int32_t k,
                              uint64_t seed) {
  SyntheticSpec s;
  s.format = f;
  s.num_heads = 64;
  s.k = k;
  s.rows = rows;
  s.requests = requests;
  s.context = context;
  s.generator = g;
  s.seed = seed;
  return s;
}

inline constexpr CacheFormat kFormats[] = {CacheFormat::kMxfp4, CacheFormat::kFp8E4M3};
inline const char* name(CacheFormat f) { return f == CacheFormat::kMxfp4 ? "mxfp4" : "fp8"; }
// Both score modes of CONTRACT §4: the default first.
inline constexpr ScoreAccuracy kAccuracies[] = {ScoreAccuracy::kProduction, ScoreAccuracy::kExact};

inline Launch gpu_launch(cudaStream_t stream = nullptr) {
  Launch l;
  l.backend = Backend::kCuda;
  l.stream = stream;
  return l;
}

// mxfp4 vectors whose block exponents spread by more than 3 (kS8MaxShift), which the prefill's
// integer path scores apart. Gaussian vectors quantized as the model does spread by 2 at most.
// Tokens: one slot in 150 has a block moved by 6 .. 40, up or down.
inline void widen_key_tokens(HostProblem& h) {
  for (int64_t pg = 0; pg < h.num_pages; ++pg)
    for (int32_t t = 0; t < h.page_size; ++t) {
      const int64_t slot = pg * h.page_size + t;
      if (slot % 150 != 7) continue;
      uint8_t* sc = h.pool.data() + pg * h.page_stride + h.page_size * 64 + t * 4;
      const int delta = 6 + int(slot % 35);
      sc[slot % 4] = uint8_t((slot / 150) % 2 ? sc[slot % 4] + delta : sc[slot % 4] - delta);
    }
}
// One query head (head 5 of `row`): block 2 moved up by 6.
inline void widen_query_head(HostProblem& h, int64_t row) { h.q_scale[size_t((row * h.num_heads + 5) * 4 + 2)] += 6; }

}  // namespace fit
