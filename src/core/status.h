// Status: the outcome of an operation that can fail for reasons outside the program's control
// (I/O, parsing, bad requests). Cheap to return when ok (no allocation); carries a code and a
// human-readable message otherwise. Broken invariants are not Statuses: they abort via KEEL_CHECK.
//
// Thread safety: a Status is a value; distinct objects may be used from distinct threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace keel {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller passed something malformed or out of range
  kNotFound,            // a named thing (file, tensor, key, model) does not exist
  kCorrupt,             // stored data (model file, cache file) fails validation
  kUnsupported,         // well-formed but not handled (unknown architecture, weight type)
  kOutOfRange,          // a size or position exceeds a limit (context length, ...)
  kIoError,             // the operating system reported an error
  kResourceExhausted,   // out of memory, queue full, ...
  kUnavailable,         // temporarily unable to serve (loading, draining)
  kCancelled,           // the operation was cancelled by its requester
  kFailedPrecondition,  // refused in the receiver's state (a stale leader's fencing token, ...)
  kInternal,            // an unexpected failure inside keel
};

// Returns a stable lower-case name for a code, e.g. "invalid argument".
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok

  static Status ok_status() { return Status(); }
  static Status invalid_argument(std::string_view msg) {
    return {StatusCode::kInvalidArgument, msg};
  }
  static Status not_found(std::string_view msg) { return {StatusCode::kNotFound, msg}; }
  static Status corrupt(std::string_view msg) { return {StatusCode::kCorrupt, msg}; }
  static Status unsupported(std::string_view msg) { return {StatusCode::kUnsupported, msg}; }
  static Status out_of_range(std::string_view msg) { return {StatusCode::kOutOfRange, msg}; }
  static Status io_error(std::string_view msg) { return {StatusCode::kIoError, msg}; }
  static Status resource_exhausted(std::string_view msg) {
    return {StatusCode::kResourceExhausted, msg};
  }
  static Status unavailable(std::string_view msg) { return {StatusCode::kUnavailable, msg}; }
  static Status cancelled(std::string_view msg) { return {StatusCode::kCancelled, msg}; }
  static Status failed_precondition(std::string_view msg) {
    return {StatusCode::kFailedPrecondition, msg};
  }
  static Status internal(std::string_view msg) { return {StatusCode::kInternal, msg}; }

  Status(StatusCode code, std::string_view msg);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  [[nodiscard]] bool ok() const { return rep_ == nullptr; }
  [[nodiscard]] StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code name; empty when ok.
  [[nodiscard]] const std::string& message() const;
  // "<code name>: <message>", or "ok".
  [[nodiscard]] std::string to_string() const;
  // The same code with "<prefix>: " prepended to the message (ok stays ok).
  [[nodiscard]] Status with_prefix(std::string_view prefix) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;  // null when ok
};

}  // namespace keel
