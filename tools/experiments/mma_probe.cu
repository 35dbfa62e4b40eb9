// Probe of the tensor cores' accumulation (docs/design.md, "A lead for the default mode"):
// q . k over D = 128 on the FP8 path the scorer uses (wgmma m64n32k32 e4m3, both operands
// in 128B-swizzled shared memory, this library's wrappers) and on FP16 (mma.sync m16n8k16;
// on sm_90 an e4m3 mma.sync compiles to the same HMMA, so FP8 needs wgmma), each as one
// chain and as k32 steps from zero added in fp32, on the wide_range block (448^2 and 31
// products below 2^-13 of it, per 32 elements) and on correlated Gaussian rows. It prints
// |err| / sum |products| against exact double sums. Every row of the wgmma operands holds
// the same vector, so its result does not depend on fragment layouts; a self-check on small
// integers (exact in every variant) guards the FP16 layouts.
//   build and run on the GPU machine:
//   nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Isrc tools/experiments/mma_probe.cu \
//     -o /tmp/mma_probe && /tmp/mma_probe
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "cuda/sm90/ptx.cuh"
#include "cuda/sm90/wgmma_fp8.cuh"

namespace {

constexpr int kD = 128;

// d += A * B for one m16n8k16 f16 tile, fp32 accumulators.
__device__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One warpgroup: A = 64 rows of k, B = 32 rows of q (e4m3, 128B-swizzled, as the scorer
// lays out keys and queries), so every accumulator is q . k. out[0]: one chain of four k32
// steps; out[1]: each step from zero, the partials added in fp32 as the scorer's kFp32 does.
__global__ void fp8_dot(const uint8_t* q, const uint8_t* k, float* out) {
  namespace sm90 = flashindexer::sm90;
  __shared__ alignas(1024) uint8_t ks[64 * 128];
  __shared__ alignas(1024) uint8_t qs[32 * 128];
  const int tid = threadIdx.x;
  for (int c = tid; c < 64 * 8; c += 128)
    for (int i = 0; i < 16; ++i) ks[sm90::ptx::sw128_offset(c / 8, c % 8) + i] = k[16 * (c % 8) + i];
  for (int c = tid; c < 32 * 8; c += 128)
    for (int i = 0; i < 16; ++i) qs[sm90::ptx::sw128_offset(c / 8, c % 8) + i] = q[16 * (c % 8) + i];
  sm90::ptx::fence_proxy_async_smem();
  __syncthreads();
  const uint64_t dk = sm90::ptx::smem_desc_sw128(ks), dq = sm90::ptx::smem_desc_sw128(qs);
  using Mma = sm90::Wgmma<32, sm90::Fp8Kind::kE4M3>;
  float chain[16] = {}, part[4][16] = {};
  sm90::ptx::wgmma_fence();
  for (int s = 0; s < 4; ++s) Mma::mma(chain, dk + 2 * s, dq + 2 * s, s);
  Mma::mma(part[0], dk, dq, 0);
  Mma::mma(part[1], dk + 2, dq + 2, 0);
  Mma::mma(part[2], dk + 4, dq + 4, 0);
  Mma::mma(part[3], dk + 6, dq + 6, 0);
  sm90::ptx::wgmma_commit();
  sm90::ptx::wgmma_wait<0>();
  sm90::ptx::fence_registers(chain);
  for (auto& p : part) sm90::ptx::fence_registers(p);
  if (tid == 0) {
    out[0] = chain[0];
    out[1] = ((part[0][0] + part[1][0]) + part[2][0]) + part[3][0];
  }
}

__global__ void fp16_dot(const __half* q, const __half* k, float* out) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  float chain[4] = {0, 0, 0, 0}, sum = 0.0f, part[4] = {0, 0, 0, 0};
  auto pack = [](__half lo, __half hi) {
    return uint32_t(__half_as_ushort(lo)) | uint32_t(__half_as_ushort(hi)) << 16;
  };
  for (int s = 0; s < kD / 16; ++s) {
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    if (g == 0) {  // row 0: a0 holds k = 2t, 2t+1; a2 holds k = 8 + 2t, 9 + 2t. Column 0 likewise.
      a[0] = pack(q[16 * s + 2 * t], q[16 * s + 2 * t + 1]);
      a[2] = pack(q[16 * s + 8 + 2 * t], q[16 * s + 9 + 2 * t]);
      b[0] = pack(k[16 * s + 2 * t], k[16 * s + 2 * t + 1]);
      b[1] = pack(k[16 * s + 8 + 2 * t], k[16 * s + 9 + 2 * t]);
    }
    mma_f16(chain, a, b);
    mma_f16(part, a, b);
    if (s % 2 == 1) {  // a k32 step ends: add it in fp32 and start the next from zero
      sum += part[0];
      part[0] = part[1] = part[2] = part[3] = 0.0f;
    }
  }
  if (lane == 0) {
    out[0] = chain[0];
    out[1] = sum;
  }
}

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));               \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// Runs both kernels on one (q, k) pair of fp8 codes; prints |err| / sum |q k| per variant.
// Returns the worst relative error (for the layout self-check).
double probe(const char* what, const uint8_t* q8, const uint8_t* k8) {
  double exact = 0, scale = 0;
  __half q16[kD], k16[kD];
  for (int d = 0; d < kD; ++d) {
    const float qf = float(*reinterpret_cast<const __nv_fp8_e4m3*>(&q8[d]));
    const float kf = float(*reinterpret_cast<const __nv_fp8_e4m3*>(&k8[d]));
    q16[d] = __float2half(qf);  // exact: every e4m3 value is an fp16 value
    k16[d] = __float2half(kf);
    exact += double(qf) * kf;
    scale += std::fabs(double(qf) * kf);
  }
  uint8_t *dq8, *dk8;
  __half *dq16, *dk16;
  float* dout;
  CHECK(cudaMalloc(&dq8, kD));
  CHECK(cudaMalloc(&dk8, kD));
  CHECK(cudaMalloc(&dq16, kD * sizeof(__half)));
  CHECK(cudaMalloc(&dk16, kD * sizeof(__half)));
  CHECK(cudaMalloc(&dout, 4 * sizeof(float)));
  CHECK(cudaMemcpy(dq8, q8, kD, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk8, k8, kD, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dq16, q16, kD * sizeof(__half), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk16, k16, kD * sizeof(__half), cudaMemcpyHostToDevice));
  fp8_dot<<<1, 128>>>(dq8, dk8, dout);
  fp16_dot<<<1, 32>>>(dq16, dk16, dout + 2);
  CHECK(cudaGetLastError());
  float out[4];
  CHECK(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost));
  const char* names[4] = {"fp8 wgmma chain", "fp8 wgmma from zero", "fp16 mma chain", "fp16 mma k32 from zero"};
  double worst = 0;
  std::printf("%-34s exact %.9g\n", what, exact);
  for (int i = 0; i < 4; ++i) {
    const double rel = std::fabs(out[i] - exact) / scale;
    worst = std::max(worst, rel);
    std::printf("  %-20s %.9g  |err| / sum|qk| %.3g\n", names[i], double(out[i]), rel);
  }
  CHECK(cudaFree(dq8));
  CHECK(cudaFree(dk8));
  CHECK(cudaFree(dq16));
  CHECK(cudaFree(dk16));
  CHECK(cudaFree(dout));
  return worst;
}

uint8_t e4m3(float v) { return __nv_fp8_e4m3(v).__x; }

}  // namespace

int main() {
  uint8_t q[kD], k[kD];
  // Layout self-check: small random integers have exact products and sums in every variant.
  std::mt19937 rng(7);
  for (int d = 0; d < kD; ++d) {
    q[d] = e4m3(float(int(rng() % 7) - 3));
    k[d] = e4m3(float(int(rng() % 7) - 3));
  }
  if (probe("self-check (small integers, exact)", q, k) != 0.0) {
    std::printf("FAILED: the fragment layouts are wrong\n");
    return 1;
  }
  // wide_range: per 32-element block, 448 x 448 and 31 products of 4 x 3.75 = 15.
  for (int d = 0; d < kD; ++d) {
    q[d] = e4m3(d % 32 == 0 ? 448.0f : 4.0f);
    k[d] = e4m3(d % 32 == 0 ? 448.0f : 3.75f);
  }
  probe("wide_range block", q, k);
  // Gaussian-like rows quantized to e4m3 (amax 448), positively correlated.
  std::normal_distribution<float> n;
  for (int trial = 0; trial < 3; ++trial) {
    float qf[kD], kf[kD], qa = 0, ka = 0;
    for (int d = 0; d < kD; ++d) {
      const float u = n(rng);
      qf[d] = u + 0.3f * n(rng);
      kf[d] = u + 0.3f * n(rng);
      qa = std::max(qa, std::fabs(qf[d]));
      ka = std::max(ka, std::fabs(kf[d]));
    }
    for (int d = 0; d < kD; ++d) {
      q[d] = e4m3(qf[d] * 448.0f / qa);
      k[d] = e4m3(kf[d] * 448.0f / ka);
    }
    probe("correlated gaussian", q, k);
  }
  return 0;
}
