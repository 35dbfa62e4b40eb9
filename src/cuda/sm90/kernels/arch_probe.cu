// flashindexer sm_90a: image probe.
//
// Purpose: lets the host launcher ask, without launching or synchronising,
// whether this binary carries sm_90a code the current device can run
// (cudaFuncGetAttributes fails with cudaErrorNoKernelImageForDevice otherwise).
// The kernel itself only records the architecture it was compiled for.
// Warp roles: none. Shared memory: none.
#include <cuda_runtime.h>

#include "cuda/sm90/kernels/arch_probe.h"

namespace flashindexer::sm90 {

__global__ void arch_probe_kernel(int* arch) {
#if defined(__CUDA_ARCH__)
  if (threadIdx.x == 0 && blockIdx.x == 0) *arch = __CUDA_ARCH__;
#endif
}

cudaError_t arch_image_available() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, arch_probe_kernel);
}

}  // namespace flashindexer::sm90
