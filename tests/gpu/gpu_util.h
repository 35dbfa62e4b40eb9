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
  DeviceVector(size_t count, unsigned char poison) : n(count) {
    if (cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) ptr = nullptr;
    if (ptr) cudaMemset(ptr, poison, std::max<size_t>(n, 1) * sizeof(T));
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

}  // namespace fit
