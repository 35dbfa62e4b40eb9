// Does compute-sanitizer's racecheck order two warpgroups across `bar.sync 1, 256` after
// each passed its own named barrier (2 or 3) a different number of times? (docs/perf.md,
// sessions 22-23: the fused lockstep kernel's one-split finish.) Two warpgroups of one CTA,
// `rounds` rounds: in round i warpgroup w syncs extra_w(i) times on barrier 2 + w (128
// threads), then warpgroup 1 writes a shared word, both meet at barrier 1 (256 threads), and
// warpgroup 0 reads the word (mode 0: read after write), or warpgroup 0 reads it first and
// warpgroup 1 writes it after the barrier (mode 1: write after read); a second barrier 1 ends
// the round. Correct for any extra counts: every pair is ordered by a barrier 1.
//   nvcc -gencode=arch=compute_90a,code=sm_90a -o /tmp/toy tools/experiments/racecheck_barrier_toy.cu
//   compute-sanitizer --tool racecheck /tmp/toy E0 E1 [threads [red [mode [rounds]]]]
// rounds = 1: extra_0 = E0, extra_1 = E1. rounds > 1: extra_w(i) = (i * (w ? E1 : E0) + w) % 4
// (a pseudo-random mix). threads = 384: a producer warpgroup that leaves first; red = 1: the
// extra syncs are bar.red.or votes followed by a bar.sync, as the fused kernel's.
// Session 22: "0 hazards" for 0/0, 3/3, 3/1 and 1/3 at 256 threads, 3/1 and 3/3 at 384, and
// 3/1 at 384, 4/1 at 256 with votes: the single pairs tried there never had E1 = E0 + 1.
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar(unsigned id, unsigned n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }

__device__ __forceinline__ bool bar_or(unsigned id, unsigned n, bool p) {
  unsigned r;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
               : "=r"(r) : "r"(unsigned(p)), "r"(id), "r"(n) : "memory");
  return r != 0;
}

__global__ void toy(int e0, int e1, int red, int mode, int rounds, int* out) {
  __shared__ int cell[32];
  if (blockDim.x > 256 && threadIdx.x < 128) return;  // 384 threads: a producer warpgroup that leaves first
  const int t = threadIdx.x - (blockDim.x > 256 ? 128 : 0);
  const int wg = t / 128;
  int sum = 0;
  for (int i = 0; i < rounds; ++i) {
    const int extra = rounds == 1 ? (wg == 0 ? e0 : e1) : (i * (wg == 0 ? e0 : e1) + wg) % 4;
    for (int j = 0; j < extra; ++j) {
      if (red) {
        if (bar_or(2 + wg, 128, t == 5)) bar(2 + wg, 128);
      } else {
        bar(2 + wg, 128);
      }
    }
    if (mode == 0) {
      if (t == 200) cell[i % 32] = 7 + i;  // warpgroup 1 writes
      bar(1, 256);
      if (t == 8) sum += cell[i % 32];  // warpgroup 0 reads
    } else {
      if (t == 8) sum += cell[i % 32];  // warpgroup 0 reads
      bar(1, 256);
      if (t == 200) cell[i % 32] = 7 + i;  // warpgroup 1 writes
    }
    bar(1, 256);
  }
  if (t == 8) out[0] = sum;
}

int main(int argc, char** argv) {
  const int e0 = argc > 1 ? std::atoi(argv[1]) : 3, e1 = argc > 2 ? std::atoi(argv[2]) : 1;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 256;
  const int red = argc > 4 ? std::atoi(argv[4]) : 0;
  const int mode = argc > 5 ? std::atoi(argv[5]) : 0;
  const int rounds = argc > 6 ? std::atoi(argv[6]) : 1;
  int* out = nullptr;
  if (cudaMalloc(&out, sizeof(int)) != cudaSuccess) return 1;
  if (mode == 1 && cudaMemset(out, 0, sizeof(int)) != cudaSuccess) return 1;
  toy<<<1, threads>>>(e0, e1, red, mode, rounds, out);
  int h = 0;
  const cudaError_t e = cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("extra %d / %d, mode %d, rounds %d: read %d (%s)\n", e0, e1, mode, rounds, h, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
