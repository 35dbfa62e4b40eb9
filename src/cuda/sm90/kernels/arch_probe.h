// flashindexer sm_90a: host-callable probe for an sm_90a image in this binary.
#pragma once

#include <cuda_runtime.h>

namespace flashindexer::sm90 {

// cudaSuccess when the current device can run this library's sm_90a kernels.
cudaError_t arch_image_available();

}  // namespace flashindexer::sm90
