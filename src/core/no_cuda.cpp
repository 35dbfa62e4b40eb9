// Built instead of src/cuda/ when the library is configured without CUDA.
#include "backend.h"

namespace flashindexer {
const BackendImpl* cuda_backend() { return nullptr; }
}  // namespace flashindexer
