// status.h: the internal result type. A Status is a strataResult_t code plus a message; the ok
// path carries no message and allocates nothing. The C API turns a failed Status into its return
// code and the last-error text.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "strata/strata.h"

namespace strata {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(strataResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == strataSuccess; }
  strataResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  strataResult_t code_ = strataSuccess;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

template <typename... Args>
Status makeError(strataResult_t code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalidArgument(fmt::format_string<Args...> f, Args&&... args) {
  return makeError(strataInvalidArgument, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status invalidUsage(fmt::format_string<Args...> f, Args&&... args) {
  return makeError(strataInvalidUsage, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status systemError(fmt::format_string<Args...> f, Args&&... args) {
  return makeError(strataSystemError, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status remoteError(fmt::format_string<Args...> f, Args&&... args) {
  return makeError(strataRemoteError, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status internalError(fmt::format_string<Args...> f, Args&&... args) {
  return makeError(strataInternalError, f, std::forward<Args>(args)...);
}

/// Returns from the enclosing function if `expr` (a Status) failed.
#define STRATA_RETURN_IF_ERROR(expr)        \
  do {                                      \
    ::strata::Status _st = (expr);          \
    if (!_st.ok()) return _st;              \
  } while (0)

}  // namespace strata
