#include "flashindexer/status.h"
#include "flashindexer/types.h"

#include <string_view>

namespace flashindexer {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNullPointer: return "null_pointer";
    case StatusCode::kMisaligned: return "misaligned";
    case StatusCode::kOverflow: return "overflow";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kWorkspaceTooSmall: return "workspace_too_small";
    case StatusCode::kBackendUnavailable: return "backend_unavailable";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kFormatError: return "format_error";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(flashindexer::to_string(code_)) + ": " + message_;
}

const char* to_string(CacheFormat f) {
  switch (f) {
    case CacheFormat::kFp8E4M3: return "fp8_e4m3";
    case CacheFormat::kMxfp4: return "mxfp4";
  }
  return "unknown";
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "unknown";
}

const char* to_string(Operator op) {
  switch (op) {
    case Operator::kDenseLogits: return "dense_logits";
    case Operator::kTopKOverLogits: return "topk_over_logits";
    case Operator::kFusedTopK: return "fused_topk";
  }
  return "unknown";
}

const char* to_string(ScoreAccuracy a) {
  switch (a) {
    case ScoreAccuracy::kProduction: return "production";
    case ScoreAccuracy::kExact: return "exact";
  }
  return "unknown";
}

bool parse_accuracy(const char* name, ScoreAccuracy* out) {
  const std::string_view n = name ? name : "";
  if (n == "production") *out = ScoreAccuracy::kProduction;
  else if (n == "exact") *out = ScoreAccuracy::kExact;
  else return false;
  return true;
}

}  // namespace flashindexer
