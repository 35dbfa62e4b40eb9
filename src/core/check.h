// flashindexer: the one family of argument-check macros.
//
// Each failing check returns a Status whose message names the argument, the
// expected value and the actual one:
//   FI_CHECK_ARG(k >= 1 && k <= kMaxK, kInvalidArgument, "k", "1..65536", k);
//   -> "k: expected 1..65536, got 0"
#pragma once

#include <sstream>
#include <string>

#include "flashindexer/status.h"

namespace flashindexer::detail {

template <typename T>
std::string describe(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_pointer_v<T>) {
    if (v == nullptr) return "null";
    os << static_cast<const void*>(v);
  } else if constexpr (std::is_enum_v<T>) {
    os << static_cast<long long>(v);
  } else {
    os << v;
  }
  return os.str();
}

template <typename T>
Status arg_error(StatusCode code, const std::string& arg, const std::string& expected, const T& actual) {
  return Status(code, arg + ": expected " + expected + ", got " + describe(actual));
}

}  // namespace flashindexer::detail

// Returns from the enclosing function with `code` unless `cond` holds.
#define FI_CHECK_ARG(cond, code, arg, expected, actual)                                   \
  do {                                                                                    \
    if (!(cond))                                                                          \
      return ::flashindexer::detail::arg_error(::flashindexer::StatusCode::code, (arg),   \
                                               (expected), (actual));                     \
  } while (0)

// Propagates a non-ok Status.
#define FI_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    ::flashindexer::Status fi_status_ = (expr);    \
    if (!fi_status_.is_ok()) return fi_status_;    \
  } while (0)
