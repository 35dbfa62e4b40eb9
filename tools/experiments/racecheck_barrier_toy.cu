// Does compute-sanitizer's racecheck order two warpgroups across `bar.sync 1, 256` after
// each passed its own named barrier (2 or 3) a different number of times? (docs/perf.md,
// session 22: the fused lockstep kernel's one-split finish.) Two warpgroups of one CTA:
// warpgroup w syncs `extra_w` times on barrier 2 + w (128 threads), then a thread of warpgroup
// 1 writes shared memory, both warpgroups meet at barrier 1 (256 threads), and a thread of
// warpgroup 0 reads it. Correct for any extra counts (the read is ordered after the write).
//   nvcc -arch=sm_90a -o /tmp/toy tools/experiments/racecheck_barrier_toy.cu
//   compute-sanitizer --tool racecheck /tmp/toy 3 3   # equal counts
//   compute-sanitizer --tool racecheck /tmp/toy 3 1   # unequal counts
//   compute-sanitizer --tool racecheck /tmp/toy 3 1 384   # and a producer warpgroup that leaves
// Session 22: "0 hazards" for 0/0, 3/3, 3/1 and 1/3 at 256 threads, 3/1 and 3/3 at 384, and
// 3/1 at 384, 4/1 at 256 with votes (arg 4 = 1): this alone does not reproduce the reports.
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar(unsigned id, unsigned n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }

__device__ __forceinline__ bool bar_or(unsigned id, unsigned n, bool p) {
  unsigned r;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
               : "=r"(r) : "r"(unsigned(p)), "r"(id), "r"(n) : "memory");
  return r != 0;
}

__global__ void toy(int extra0, int extra1, int red, int* out) {
  __shared__ int cell[32];
  if (blockDim.x > 256 && threadIdx.x < 128) return;  // 384 threads: a producer warpgroup that leaves first
  const int wg = (threadIdx.x - (blockDim.x > 256 ? 128 : 0)) / 128;
  const int extra = wg == 0 ? extra0 : extra1;
  for (int i = 0; i < extra; ++i) {
    if (red) {
      if (bar_or(2 + wg, 128, threadIdx.x == 5)) bar(2 + wg, 128);
    } else {
      bar(2 + wg, 128);
    }
  }
  const int t = threadIdx.x - (blockDim.x > 256 ? 128 : 0);
  if (t == 200) cell[t % 32] = 7;  // warpgroup 1 writes
  bar(1, 256);
  if (t == 8) out[0] = cell[200 % 32];  // warpgroup 0 reads
}

int main(int argc, char** argv) {
  const int e0 = argc > 1 ? std::atoi(argv[1]) : 3, e1 = argc > 2 ? std::atoi(argv[2]) : 1;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 256;  // 384: with a producer warpgroup
  const int red = argc > 4 ? std::atoi(argv[4]) : 0;          // 1: the extra syncs are bar.red.or votes (+ a bar.sync)
  int* out = nullptr;
  if (cudaMalloc(&out, sizeof(int)) != cudaSuccess) return 1;
  toy<<<1, threads>>>(e0, e1, red, out);
  int h = 0;
  const cudaError_t e = cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("extra %d / %d: read %d (%s)\n", e0, e1, h, cudaGetErrorString(e));
  return e == cudaSuccess && h == 7 ? 0 : 1;
}
