// Sub-paths, `limit`, list objects and 404s of the resource routes (api_list.h).
#include "server/api_list.h"

#include <fmt/format.h>

#include "server/http_framing.h"

namespace keel::server {

std::optional<SubPath> sub_path(std::string_view path, std::string_view prefix) {
  if (!path.starts_with(prefix) || path.size() <= prefix.size() + 1 || path[prefix.size()] != '/')
    return std::nullopt;
  std::string_view rest = path.substr(prefix.size() + 1);
  const size_t slash = rest.find('/');
  SubPath sp;
  sp.id = percent_decode(rest.substr(0, slash));
  if (slash != std::string_view::npos) {
    sp.action = rest.substr(slash + 1);
    if (sp.action.empty() || sp.action.find('/') != std::string_view::npos) return std::nullopt;
  }
  if (sp.id.empty()) return std::nullopt;
  return sp;
}

ApiResult<size_t> query_limit(const HttpRequest& req, size_t fallback, size_t max) {
  std::optional<std::string> text = query_param(req.target, "limit");
  if (!text) return fallback;
  size_t value = 0;
  bool ok = !text->empty() && text->size() <= 9;
  for (char c : *text) {
    ok = ok && c >= '0' && c <= '9';
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  if (!ok || value < 1 || value > max) {
    return ApiError::bad_request(
        fmt::format("`limit` must be an integer in [1, {}], got \"{}\"", max, text->substr(0, 32)),
        "limit");
  }
  return value;
}

nlohmann::json list_object(nlohmann::json data, bool has_more) {
  nlohmann::json first = data.empty() ? nlohmann::json(nullptr) : data.front()["id"];
  nlohmann::json last = data.empty() ? nlohmann::json(nullptr) : data.back()["id"];
  return {{"object", "list"},
          {"data", std::move(data)},
          {"first_id", std::move(first)},
          {"last_id", std::move(last)},
          {"has_more", has_more}};
}

ApiError object_not_found(std::string_view what, std::string_view id, std::string_view code) {
  ApiError e = ApiError::bad_request(fmt::format("No such {} object: {}", what, id), "id",
                                     std::string(code));
  e.status = 404;
  return e;
}

}  // namespace keel::server
