// HttpRequest / HttpResponse: the server's transport-neutral view of one HTTP exchange, so routing,
// validation and response building never see Boost.Beast types (only http_connection.cpp does).
// Header names in HttpRequest are lower-cased; values are as received.
//
// Thread safety: plain values.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace keel::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // request target as sent, e.g. "/v1/models?x=1"
  std::string path;    // target without the query string
  HeaderList headers;  // lower-case names
  std::string body;
  bool keep_alive = true;

  // The first value of header `name` (lower-case), or "" when absent.
  [[nodiscard]] std::string_view header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
  [[nodiscard]] bool has_header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return true;
    }
    return false;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // extra headers (x-request-id, CORS, retry-after, ...)
  bool close = false;  // close the connection after this response

  static HttpResponse json(int status, std::string body) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    return r;
  }
  static HttpResponse error(const ApiError& e) {
    HttpResponse r = json(e.status, e.body());
    if (e.retry_after_s) r.headers.emplace_back("retry-after", std::to_string(*e.retry_after_s));
    return r;
  }
  // This response with `common` (x-request-id, CORS) in front of its own headers.
  HttpResponse with_headers(const HeaderList& common) && {
    headers.insert(headers.begin(), common.begin(), common.end());
    return std::move(*this);
  }
};

}  // namespace keel::server
