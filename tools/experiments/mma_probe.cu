// Probe of the tensor cores' accumulation (docs/design.md, "A lead for the default mode"):
// one warp computes q . k over D = 128 with mma.sync, FP8 (m16n8k32, e4m3) and FP16
// (m16n8k16), as one chain and as k32 steps from zero added in fp32, on the wide_range
// block (448^2 and 31 products below 2^-13 of it, per 32 elements) and on random vectors.
// It prints |err| / sum |products| for each, against exact double sums. A self-check on
// small integers (exact in every variant) guards the fragment layouts used here. mma.sync
// may not accumulate exactly as the scorer's wgmma does: the GPU oracle tests on the
// wide_range generator are the word on the scorer itself.
//   build and run on the GPU machine:
//   nvcc -std=c++17 -arch=sm_90a tools/experiments/mma_probe.cu -o /tmp/mma_probe && /tmp/mma_probe
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

namespace {

constexpr int kD = 128;

// d += A * B for one m16n8k32 (e4m3) or m16n8k16 (f16) tile, fp32 accumulators.
__device__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d[0] of lane 0 is row 0, column 0 of D = A * B (+ C); A's row 0 is q, B's column 0 is k,
// every other row and column is zero. Fragment layouts per the PTX ISA (row g = lane / 4,
// t = lane % 4). out[0]: one chain over D; out[1]: each k32 step from zero, added in fp32.
__global__ void fp8_dot(const uint8_t* q, const uint8_t* k, float* out) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  float chain[4] = {0, 0, 0, 0}, sum = 0.0f;
  for (int s = 0; s < kD / 32; ++s) {
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    if (g == 0)  // row 0: a0 holds k = 4t..4t+3, a2 holds k = 16 + 4t..
      for (int i = 0; i < 4; ++i) {
        a[0] |= uint32_t(q[32 * s + 4 * t + i]) << (8 * i);
        a[2] |= uint32_t(q[32 * s + 16 + 4 * t + i]) << (8 * i);
      }
    if (g == 0)  // column 0: b0 holds k = 4t..4t+3, b1 holds k = 16 + 4t..
      for (int i = 0; i < 4; ++i) {
        b[0] |= uint32_t(k[32 * s + 4 * t + i]) << (8 * i);
        b[1] |= uint32_t(k[32 * s + 16 + 4 * t + i]) << (8 * i);
      }
    float step[4] = {0, 0, 0, 0};
    mma_e4m3(chain, a, b);
    mma_e4m3(step, a, b);
    sum += step[0];
  }
  if (lane == 0) {
    out[0] = chain[0];
    out[1] = sum;
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
  fp8_dot<<<1, 32>>>(dq8, dk8, dout);
  fp16_dot<<<1, 32>>>(dq16, dk16, dout + 2);
  CHECK(cudaGetLastError());
  float out[4];
  CHECK(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost));
  const char* names[4] = {"fp8 chain", "fp8 k32 from zero", "fp16 chain", "fp16 k32 from zero"};
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
