// libFuzzer target: problem files (CONTRACT §7) from arbitrary bytes. The safetensors reader and
// the problem parser must refuse malformed input with a Status, never crash, hang or read out of
// bounds (ASan/UBSan); a file they accept must pass or fail the operators' validation cleanly,
// and a small accepted problem is run through the CPU fused operator, whose rows must fail
// closed rather than read outside the pool or the table.
//   build: cmake --preset fuzz && cmake --build --preset fuzz
//   run:   build/fuzz/fuzz_problem_file -max_total_time=60 CORPUS_DIR tests/fuzz/corpus
#include <cstddef>
#include <cstdint>

#include "flashindexer/host_problem.h"
#include "flashindexer/operators.h"

namespace fi = flashindexer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fi::HostProblem p;
  if (!fi::parse_problem(data, size, &p).is_ok()) return 0;
  const fi::IndexerProblem view = p.view();
  fi::Launch launch;
  launch.backend = fi::Backend::kCpu;
  launch.cpu_threads = 1;
  if (!fi::can_implement(view, fi::Operator::kFusedTopK, launch).is_ok()) return 0;
  // Bounded work per input: the scoring is O(rows x context x H x D).
  if (double(p.rows()) * double(p.max_context) * p.num_heads > 4e6 || p.k > 4096) return 0;
  fi::HostResults fused;
  if (!fi::run_fused(p, launch, &fused).is_ok()) return 0;
  fi::HostResults dense;
  if (fi::run_dense_then_topk(p, launch, &dense, false).is_ok() && !fi::first_difference(fused, dense).empty())
    __builtin_trap();  // CONTRACT §3: fused == dense + TopK on any accepted problem
  return 0;
}
