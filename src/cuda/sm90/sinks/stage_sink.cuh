// flashindexer sm_90a: the decode clusters' sink (kernels/fused_staged.cu): every in-window
// score to the CTA's stage in shared memory, fp32 [rows][chunk], for the cluster's selection.
// Included by fused_staged.cu alone: its definitions keep the kernel's internal linkage.
#pragma once

#include <cstdint>

namespace flashindexer::sm90 {
namespace {  // NOLINT(google-build-namespaces): one includer, the kernel's translation unit

struct StageSink {  // positions < max_context <= INT32_MAX
  static constexpr bool kLockstep = false;
  float* stage;
  int32_t c0;
  int32_t stride;  // floats between the stages of the group's rows
  __device__ void put(int r, int64_t, int64_t pos, float v) const { stage[r * stride + int32_t(pos) - c0] = v; }
};

}  // namespace
}  // namespace flashindexer::sm90
