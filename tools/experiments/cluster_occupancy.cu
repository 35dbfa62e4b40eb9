// How many thread-block clusters of C CTAs (512 threads, `smem` bytes of dynamic shared
// memory each, one CTA per SM) the GPU holds at once (cudaOccupancyMaxActiveClusters).
// Build and run on the GPU machine:
//   nvcc -arch=sm_90a -o /tmp/cluster_occupancy tools/experiments/cluster_occupancy.cu && /tmp/cluster_occupancy
#include <cstdio>

__global__ void probe(float* out) {
  extern __shared__ float s[];
  s[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  if (out) out[threadIdx.x] = s[511 - threadIdx.x];
}

int main() {
  cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int smem : {120 * 1024, 152 * 1024, 216 * 1024}) {
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    for (int c : {1, 2, 4, 8, 16}) {
      cudaLaunchConfig_t cfg{};
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(c);
      attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
      cfg.gridDim = dim3(unsigned(c * 64));
      cfg.blockDim = dim3(512);
      cfg.dynamicSmemBytes = size_t(smem);
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int n = -1;
      const cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe, &cfg);
      std::printf("smem %3d KiB, cluster %2d: %d clusters at once (%d CTAs) %s\n", smem / 1024, c, n, n * c,
                  e == cudaSuccess ? "" : cudaGetErrorString(e));
    }
  }
  return 0;
}
