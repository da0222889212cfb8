// ApiError constructors and the JSON envelope (see api_error.h).
#include "server/api_error.h"

#include <fmt/format.h>

namespace keel::server {
namespace {

ApiError make(int status, std::string message, std::string type,
              std::optional<std::string> param = {}, std::optional<std::string> code = {}) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

}  // namespace

nlohmann::json ApiError::to_json() const {
  nlohmann::json err = {
      {"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) err["param"] = *param;
  if (code) err["code"] = *code;
  return nlohmann::json{{"error", std::move(err)}};
}

std::string ApiError::body() const {
  return to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError ApiError::bad_request(std::string message, std::optional<std::string> param,
                               std::optional<std::string> code) {
  return make(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

ApiError ApiError::unauthorized() {
  return make(401, "Incorrect or missing API key: send `Authorization: Bearer <key>`.",
              "invalid_request_error", std::nullopt, "invalid_api_key");
}

ApiError ApiError::model_not_found(std::string_view model) {
  return make(404, fmt::format("The model `{}` does not exist.", model), "invalid_request_error",
              "model", "model_not_found");
}

ApiError ApiError::path_not_found(std::string_view method, std::string_view path) {
  return make(404, fmt::format("No route for {} {}.", method, path), "invalid_request_error",
              std::nullopt, "not_found");
}

ApiError ApiError::method_not_allowed(std::string_view method, std::string_view path) {
  return make(405, fmt::format("Method {} is not allowed for {}.", method, path),
              "invalid_request_error", std::nullopt, "method_not_allowed");
}

ApiError ApiError::payload_too_large(size_t limit) {
  return make(413, fmt::format("The request body exceeds the limit of {} bytes.", limit),
              "invalid_request_error", std::nullopt, "payload_too_large");
}

ApiError ApiError::rate_limited(std::string message) {
  ApiError e = make(429, std::move(message), "rate_limit_error", std::nullopt, "queue_full");
  e.retry_after_s = 1;
  return e;
}

ApiError ApiError::unavailable(std::string message) {
  ApiError e =
      make(503, std::move(message), "service_unavailable_error", std::nullopt, "unavailable");
  e.retry_after_s = 1;
  return e;
}

ApiError ApiError::internal(std::string message) {
  return make(500, std::move(message), "server_error", std::nullopt, "internal_error");
}

ApiError ApiError::timeout(std::string message) {
  return make(408, std::move(message), "timeout_error", std::nullopt, "timeout");
}

ApiError ApiError::from_status(const Status& status, std::optional<std::string> param) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported:
      return bad_request(status.message(), std::move(param));
    case StatusCode::kNotFound:
      return make(404, status.message(), "invalid_request_error", std::move(param), "not_found");
    case StatusCode::kResourceExhausted:
      return rate_limited(status.message());
    case StatusCode::kUnavailable:
      return unavailable(status.message());
    case StatusCode::kFailedPrecondition:
      return make(409, status.message(), "invalid_request_error", std::move(param), "conflict");
    case StatusCode::kCancelled:
    case StatusCode::kOk:
    case StatusCode::kCorrupt:
    case StatusCode::kIoError:
    case StatusCode::kInternal:
      break;
  }
  return internal(status.ok() ? std::string("unexpected ok status") : status.message());
}

}  // namespace keel::server
