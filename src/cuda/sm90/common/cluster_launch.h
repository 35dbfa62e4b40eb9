// flashindexer sm_90a (host): launches and occupancy queries of kernels in thread-block
// clusters along x (the kStaged TopK and the fused decode clusters).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace flashindexer::sm90 {

// A launch configuration of `ctas` CTAs in clusters of `cluster` along x. It points at
// `attr`, which the caller keeps alive while the configuration is used.
inline cudaLaunchConfig_t cluster_config(cudaLaunchAttribute& attr, int64_t ctas, int threads, size_t smem,
                                         int cluster, cudaStream_t stream = nullptr) {
  attr = cudaLaunchAttribute{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = unsigned(cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(ctas));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

// kernel<<<ctas, threads, smem, stream>>>(args...) in clusters of `cluster` CTAs.
template <class... Params, class... Args>
cudaError_t launch_clusters(void (*kernel)(Params...), int64_t ctas, int threads, size_t smem, int cluster,
                            cudaStream_t stream, const Args&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(attr, ctas, threads, smem, cluster, stream);
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

}  // namespace flashindexer::sm90
