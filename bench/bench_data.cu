// flashindexer bench: GPU generator of synthetic logits rows (hash-based, seeded).
#include "bench_data.cuh"

namespace flashindexer::bench {
namespace {

__device__ uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_kernel(float* out, int64_t rows, int64_t width, Dist dist, uint64_t seed) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = mix(seed ^ uint64_t(i));
    const float u1 = ((h >> 40) + 1) * 0x1.0p-24f, u2 = ((h >> 16) & 0xFFFFFF) * 0x1.0p-24f;
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    float v = z;
    switch (dist) {
      case Dist::kGaussian: v = z; break;
      case Dist::kOffset: v = 100.0f + z; break;
      case Dist::kTiny: v = 1e-8f * z; break;
      case Dist::kPlateau: v = (h & 3) ? 0.0f : fabsf(z); break;
      case Dist::kAscending: v = float(i % width) + 0.25f * u2; break;
    }
    out[i] = v;
  }
}

}  // namespace

const char* to_string(Dist d) {
  switch (d) {
    case Dist::kGaussian: return "gaussian";
    case Dist::kOffset: return "offset";
    case Dist::kTiny: return "tiny";
    case Dist::kPlateau: return "plateau";
    case Dist::kAscending: return "ascending";
  }
  return "unknown";
}

cudaError_t fill_logits(float* logits, int64_t rows, int64_t width, Dist dist, uint64_t seed, cudaStream_t stream) {
  fill_kernel<<<132 * 8, 256, 0, stream>>>(logits, rows, width, dist, seed);
  return cudaGetLastError();
}

}  // namespace flashindexer::bench
