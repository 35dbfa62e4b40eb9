// The backend seam: backend selection, the CUDA backend's honest answers, and
// (label gpu) device discovery on a machine with a Hopper GPU.
#include "test_util.h"

namespace fit {
namespace {

TEST(Backends, CpuIsAlwaysUsableAndAutoPicksItForHostPointers) {
  const auto all = list_backends();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0].backend, Backend::kCpu);
  EXPECT_TRUE(all[0].usable);
  const HostProblem p = make(small_spec());
  Backend b = Backend::kCuda;
  Launch l;
  ASSERT_TRUE(resolve_backend(p.view(), Operator::kFusedTopK, l, &b).is_ok());
  EXPECT_EQ(b, Backend::kCpu);
}

// Host buffers with backend cuda: without a usable device the backend is unavailable; with
// one, the host pool pointer is rejected before any launch (never read by a kernel). The
// host runner copies the problem to a usable device instead, and fails with the reason
// without one.
TEST(Backends, CudaRequestedForHostBuffersFailsWithAReason) {
  const HostProblem p = make(small_spec());
  Launch l;
  l.backend = Backend::kCuda;
  const Status st = can_implement(p.view(), Operator::kFusedTopK, l);
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(st.code() == StatusCode::kBackendUnavailable || st.code() == StatusCode::kInvalidArgument)
      << st.to_string();
  EXPECT_NE(st.message().find("cuda"), std::string::npos) << st.message();
  HostResults r;
  const Status run = run_fused(p, l, &r);
  if (list_backends()[1].usable) {
    EXPECT_TRUE(run.is_ok()) << run.to_string();
  } else {
    EXPECT_EQ(run.code(), StatusCode::kBackendUnavailable) << run.to_string();
    EXPECT_NE(run.message().find("cuda"), std::string::npos) << run.message();
  }
}

TEST(GpuBackends, CudaBackendDiscoversAHopperDevice) {
  const auto all = list_backends();
  const BackendInfo& cuda = all[1];
  if (!cuda.compiled) GTEST_SKIP() << "built without CUDA";
  if (!cuda.usable && cuda.detail.find("no ") == 0) GTEST_SKIP() << "no GPU here: " << cuda.detail;
  EXPECT_TRUE(cuda.usable) << cuda.detail;
  EXPECT_NE(cuda.detail.find("sm_90"), std::string::npos) << cuda.detail;
}

}  // namespace
}  // namespace fit
