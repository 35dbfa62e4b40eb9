// flashindexer: a minimal, validating safetensors reader and writer.
// Format: u64 little-endian header length N, N bytes of JSON, then raw data.
// The header maps tensor names to {dtype, shape, data_offsets:[begin, end)} and
// may carry "__metadata__": {string: string}.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flashindexer/status.h"

namespace flashindexer::safetensors {

struct Tensor {
  std::string dtype;            // "U8", "I32", "U32", "F32", "BF16"
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

// Parses `size` bytes; tensors point into `data`, which must outlive the result.
struct File {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> tensors;
};
Status parse(const uint8_t* data, size_t size, File* out);

class Writer {
 public:
  void metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // Copies nothing: `data` must stay valid until write().
  void add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, const void* data,
           size_t bytes);
  Status write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t bytes;
  };
  std::map<std::string, std::string> metadata_;
  std::vector<Entry> entries_;
};

Status read_file(const std::string& path, std::vector<uint8_t>* bytes);
int dtype_size(const std::string& dtype);  // 0 for unknown dtypes

}  // namespace flashindexer::safetensors
