// ApiError: an OpenAI-style error response — HTTP status plus the {"error": {message, type, param,
// code}} envelope — and ApiResult<T>, a value or an ApiError (request parsing returns these so the
// offending `param` travels with the message). from_status() maps engine/tokenizer Statuses to
// the HTTP statuses of the wire format (InvalidArgument → 400, ResourceExhausted → 429, ...).
//
// Thread safety: plain values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/status.h"

namespace keel::server {

struct ApiError {
  int status = 400;                  // HTTP status
  std::string message;               // human-readable, names the offending value
  std::string type;                  // "invalid_request_error", "rate_limit_error", ...
  std::optional<std::string> param;  // the request field at fault ("temperature", ...)
  std::optional<std::string> code;   // "context_length_exceeded", "model_not_found", ...
  std::optional<int> retry_after_s;  // sent as `retry-after` (429, 503)

  // {"error": {...}} as sent on the wire (also the payload of a mid-stream SSE error).
  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] std::string body() const;

  // 400 invalid_request_error.
  static ApiError bad_request(std::string message, std::optional<std::string> param = {},
                              std::optional<std::string> code = {});
  static ApiError unauthorized();                                                      // 401
  static ApiError model_not_found(std::string_view model);                             // 404
  static ApiError path_not_found(std::string_view method, std::string_view path);      // 404
  static ApiError method_not_allowed(std::string_view method, std::string_view path);  // 405
  static ApiError payload_too_large(size_t limit);                                     // 413
  static ApiError rate_limited(std::string message);                                   // 429
  static ApiError unavailable(std::string message);                                    // 503
  static ApiError internal(std::string message);                                       // 500
  static ApiError timeout(std::string message);                                        // 408
  // Maps a non-ok Status: InvalidArgument/OutOfRange → 400, NotFound → 404,
  // Unsupported → 400, ResourceExhausted → 429, Unavailable → 503, anything else → 500.
  static ApiError from_status(const Status& status, std::optional<std::string> param = {});
};

// A value or an ApiError (request parsing results).
template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::in_place_index<0>, std::move(value)) {}         // NOLINT(implicit)
  ApiResult(ApiError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  T& value() {
    KEEL_CHECK(ok());
    return std::get<0>(v_);
  }
  const T& value() const {
    KEEL_CHECK(ok());
    return std::get<0>(v_);
  }
  const ApiError& error() const {
    KEEL_CHECK(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace keel::server
