// flashindexer: FI_HD marks functions shared by host code and CUDA device code.
#pragma once

#if defined(__CUDACC__)
#define FI_HD __host__ __device__ __forceinline__
#else
#define FI_HD inline
#endif
