// flashindexer: status codes returned by every host entry point.
// Host-only; no CUDA or framework types.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace flashindexer {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,   // a value is outside its documented range
  kNullPointer,       // a required pointer is null
  kMisaligned,        // a pointer or stride does not meet its alignment
  kOverflow,          // a size or byte offset does not fit its integer type
  kUnsupported,       // valid by the contract but not implemented by this backend / device
  kWorkspaceTooSmall, // caller workspace smaller than workspace_size()
  kBackendUnavailable,// the backend is not compiled in or no device is present
  kIoError,           // a problem file could not be read or written
  kFormatError,       // a problem file is malformed
  kInternal,          // a broken invariant inside the library (a bug)
};

const char* to_string(StatusCode code);

// A code plus a sentence naming the argument, the expected and the actual value.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: k: expected 1..65536, got 0"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace flashindexer
