// ServerConfig::validate: one check per field, each message naming the field and its value.
#include "server/server_config.h"

#include <fmt/format.h>

namespace keel::server {
namespace {

Status bad(std::string_view field, std::string_view value, std::string_view rule) {
  return Status::invalid_argument(
      fmt::format("server config: {} must be {}, got {}", field, rule, value));
}

}  // namespace

Status ServerConfig::validate() const {
  if (host.empty()) return bad("host", "\"\"", "a non-empty address");
  if (port < 0 || port > 65535) return bad("port", std::to_string(port), "in [0, 65535]");
  if (served_model_name.empty()) return bad("served_model_name", "\"\"", "non-empty");
  if (max_body_bytes < 1024) {
    return bad("max_body_bytes", std::to_string(max_body_bytes), ">= 1024");
  }
  if (max_inflight_body_bytes < max_body_bytes) {
    return bad("max_inflight_body_bytes", std::to_string(max_inflight_body_bytes),
               ">= max_body_bytes");
  }
  if (max_connections < 1) return bad("max_connections", std::to_string(max_connections), ">= 1");
  if (max_connections_per_client < 0) {
    return bad("max_connections_per_client", std::to_string(max_connections_per_client),
               ">= 0 (0: no cap)");
  }
  if (max_header_bytes < 1024) {
    return bad("max_header_bytes", std::to_string(max_header_bytes), ">= 1024");
  }
  if (io_threads < 1 || io_threads > 1024) {
    return bad("io_threads", std::to_string(io_threads), "in [1, 1024]");
  }
  if (tokenizer_threads < 0 || tokenizer_threads > 1024) {
    return bad("tokenizer_threads", std::to_string(tokenizer_threads), "in [0, 1024]");
  }
  if (idle_timeout_ms <= 0) return bad("idle_timeout_ms", std::to_string(idle_timeout_ms), "> 0");
  if (header_timeout_ms <= 0) {
    return bad("header_timeout_ms", std::to_string(header_timeout_ms), "> 0");
  }
  if (write_timeout_ms <= 0) {
    return bad("write_timeout_ms", std::to_string(write_timeout_ms), "> 0");
  }
  if (request_timeout_ms < 0) {
    return bad("request_timeout_ms", std::to_string(request_timeout_ms), ">= 0 (0 disables)");
  }
  if (max_n < 1) return bad("max_n", std::to_string(max_n), ">= 1");
  if (max_choices_per_request < max_n) {
    return bad("max_choices_per_request", std::to_string(max_choices_per_request), ">= max_n");
  }
  if (max_stop_strings < 0) {
    return bad("max_stop_strings", std::to_string(max_stop_strings), ">= 0");
  }
  if (max_stop_string_bytes < 1) {
    return bad("max_stop_string_bytes", std::to_string(max_stop_string_bytes), ">= 1");
  }
  if (max_stored_responses < 1) {
    return bad("max_stored_responses", std::to_string(max_stored_responses), ">= 1");
  }
  if (max_response_store_bytes < (size_t{1} << 20)) {
    return bad("max_response_store_bytes", std::to_string(max_response_store_bytes), ">= 1 MiB");
  }
  if (background_responses < 1 || background_responses > 1024) {
    return bad("background_responses", std::to_string(background_responses), "in [1, 1024]");
  }
  for (const std::string& origin : cors_allowed_origins) {
    if (origin.empty()) return bad("cors_allowed_origins", "\"\"", "a list of non-empty origins");
  }
  if (shutdown_timeout_ms < 0) {
    return bad("shutdown_timeout_ms", std::to_string(shutdown_timeout_ms), ">= 0");
  }
  if (batch_concurrency < 1 || batch_concurrency > 1024) {
    return bad("batch_concurrency", std::to_string(batch_concurrency), "in [1, 1024]");
  }
  if (max_batch_requests < 1) {
    return bad("max_batch_requests", std::to_string(max_batch_requests), ">= 1");
  }
  if (max_file_store_bytes < max_body_bytes) {
    return bad("max_file_store_bytes", std::to_string(max_file_store_bytes), ">= max_body_bytes");
  }
  if (pic_mode != "off" && pic_mode != "marked" && pic_mode != "auto") {
    return bad("pic_mode", pic_mode, "off, marked or auto");
  }
  return Status();
}

}  // namespace keel::server
