// flashindexer_bench: the benchmark library behind `flashindexer bench` and `bench-topk`
// (CUDA builds only). The CLI links it; it depends on the library, never the reverse.
#pragma once

#include <string>

#include "flashindexer/types.h"

namespace flashindexer::bench {

struct BenchOptions {
  int iters = 20;
  std::string only;  // a point name, or all
  std::string git;
  bool json = true;
  bool full = false;  // bench: the whole grid of the scorer issue
  bool plan_sweep = false;  // bench: every fused decode-cluster plan of each decode point
  ScoreAccuracy accuracy = ScoreAccuracy::kProduction;  // bench: mode of the fused and dense + TopK timings
  int k = 0;  // bench: top-k instead of the preset's (0: the preset's)
};

// Exit codes of the bench commands (docs/cli.md): 2 an unknown --only point, 6 no usable device.
inline constexpr int kBenchExitUsage = 2;
inline constexpr int kBenchExitNoDevice = 6;
// The CUDA device, or a message on stderr and false.
bool bench_device_usable(const char* command);

int bench_topk(const BenchOptions& opt);
int bench_score(const BenchOptions& opt);

}  // namespace flashindexer::bench
