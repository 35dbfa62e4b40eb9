// flashindexer bench: synthetic logits generated on the GPU (distribution axis).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace flashindexer::bench {

// gaussian: N(0,1); offset: 100 + N(0,1); tiny: 1e-8 N(0,1); plateau: 75% exact
// zeros, else |N(0,1)|; ascending: increasing along the position.
enum class Dist { kGaussian, kOffset, kTiny, kPlateau, kAscending };
inline constexpr Dist kDists[] = {Dist::kGaussian, Dist::kOffset, Dist::kTiny, Dist::kPlateau, Dist::kAscending};
const char* to_string(Dist d);

cudaError_t fill_logits(float* logits, int64_t rows, int64_t width, Dist dist, uint64_t seed, cudaStream_t stream);

}  // namespace flashindexer::bench
