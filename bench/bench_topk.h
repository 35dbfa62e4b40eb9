// flashindexer bench-topk (CUDA builds only).
#pragma once

#include <string>

namespace flashindexer::bench {

struct BenchOptions {
  int iters = 20;
  std::string only;  // a point name, or all
  std::string git;
  bool json = true;
};

int bench_topk(const BenchOptions& opt);

}  // namespace flashindexer::bench
