// flashindexer benchmarks: the floors of the same run (copy bandwidth, FP8 GEMM rate).
#include <cublasLt.h>
#include <cuda_fp8.h>

#include "bench_util.h"

namespace flashindexer::bench {

double copy_floor_gbps(size_t bytes) {
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess) return -1;
  cudaMemset(src, 1, bytes);
  const float ms = median_ms([&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice); }, 3, 20);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * double(bytes) / (double(ms) * 1e6);
}

double fp8_gemm_floor_tflops(int n) {
  // D[n x n] (bf16) = A^T B with A, B [n x n] e4m3 (the TN layout FP8 GEMMs need).
  const size_t elems = size_t(n) * n;
  void *a = nullptr, *b = nullptr, *d = nullptr, *ws = nullptr;
  const size_t ws_bytes = size_t(64) << 20;
  if (cudaMalloc(&a, elems) != cudaSuccess || cudaMalloc(&b, elems) != cudaSuccess ||
      cudaMalloc(&d, elems * 2) != cudaSuccess || cudaMalloc(&ws, ws_bytes) != cudaSuccess)
    return -1;
  // Random-looking bytes (never zeros: they run faster than real data), no NaN codes.
  std::vector<uint8_t> h(elems);
  uint32_t x = 12345;
  for (auto& v : h) {
    x = x * 1664525u + 1013904223u;
    v = uint8_t((x >> 24) & 0x7E) | uint8_t((x >> 16) & 0x80);
  }
  cudaMemcpy(a, h.data(), elems, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h.data(), elems, cudaMemcpyHostToDevice);
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return -1;
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt));
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  double tflops = -1;
  if (cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found) == CUBLAS_STATUS_SUCCESS &&
      found > 0) {
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    const float ms = median_ms(
        [&] { st = cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, lc, d, lc, &heur.algo, ws, ws_bytes, 0); },
        3, 20);
    if (st == CUBLAS_STATUS_SUCCESS) tflops = 2.0 * double(n) * n * n / (double(ms) * 1e9);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFree(ws);
  return tflops;
}

}  // namespace flashindexer::bench
