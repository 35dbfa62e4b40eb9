#include "safetensors.h"

#include <cstring>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace flashindexer::safetensors {
namespace {

using nlohmann::json;
constexpr uint64_t kMaxHeader = 100u << 20;

Status format_error(const std::string& msg) { return Status(StatusCode::kFormatError, msg); }

}  // namespace

int dtype_size(const std::string& d) {
  if (d == "U8" || d == "I8" || d == "BOOL") return 1;
  if (d == "BF16" || d == "F16" || d == "I16" || d == "U16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
}

Status parse(const uint8_t* data, size_t size, File* out) {
  *out = File{};
  if (size < 8) return format_error("file: expected at least 8 bytes, got " + std::to_string(size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxHeader || n > size - 8)
    return format_error("header length: expected <= " + std::to_string(std::min<uint64_t>(kMaxHeader, size - 8)) +
                        ", got " + std::to_string(n));
  const json header = json::parse(data + 8, data + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return format_error("header: expected a JSON object");
  const uint8_t* body = data + 8 + n;
  const size_t body_size = size - 8 - n;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return format_error("__metadata__: expected an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) return format_error("__metadata__." + k + ": expected a string");
        out->metadata[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return format_error(name + ": expected {dtype, shape, data_offsets[2]}");
    Tensor t;
    t.dtype = v["dtype"].get<std::string>();
    const int es = dtype_size(t.dtype);
    if (es == 0) return format_error(name + ".dtype: expected a safetensors dtype, got " + t.dtype);
    uint64_t elems = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) return format_error(name + ".shape: expected non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && elems > (uint64_t{1} << 62) / dim) return format_error(name + ".shape: too large");
      elems *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return format_error(name + ".data_offsets: expected non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > body_size)
      return format_error(name + ".data_offsets: expected begin <= end <= " + std::to_string(body_size) +
                          ", got [" + std::to_string(b) + ", " + std::to_string(e) + "]");
    if (e - b != elems * es)
      return format_error(name + ": expected " + std::to_string(elems * es) + " data bytes for its shape, got " +
                          std::to_string(e - b));
    t.data = body + b;
    t.bytes = e - b;
    out->tensors[name] = std::move(t);
  }
  return Status::ok();
}

void Writer::add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, const void* data,
                 size_t bytes) {
  entries_.push_back({name, dtype, std::move(shape), data, bytes});
}

Status Writer::write(const std::string& path) const {
  json header = json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  size_t offset = 0;
  for (const Entry& e : entries_) {
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(StatusCode::kIoError, "path: cannot open for writing: " + path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Entry& e : entries_) f.write(static_cast<const char*>(e.data), static_cast<std::streamsize>(e.bytes));
  if (!f) return Status(StatusCode::kIoError, "path: write failed: " + path);
  return Status::ok();
}

Status read_file(const std::string& path, std::vector<uint8_t>* bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status(StatusCode::kIoError, "path: no such file: " + path);
  if (!std::filesystem::is_regular_file(path, ec))
    return Status(StatusCode::kIoError, "path: expected a regular file, got a directory or special file: " + path);
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return Status(StatusCode::kIoError, "path: cannot open " + path);
  const std::streamsize n = f.tellg();
  if (n < 0) return Status(StatusCode::kIoError, "path: cannot size " + path);
  bytes->resize(static_cast<size_t>(n));
  f.seekg(0);
  if (n > 0 && !f.read(reinterpret_cast<char*>(bytes->data()), n))
    return Status(StatusCode::kIoError, "path: read failed: " + path);
  return Status::ok();
}

}  // namespace flashindexer::safetensors
