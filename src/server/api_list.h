// The pieces the resource routes share (files, batches, fine-tuning jobs): a resource's sub-path
// ("/v1/files/{id}/content"), the `limit` query parameter, OpenAI's cursor list object and the 404
// of an unknown object.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/http_message.h"

namespace keel::server {

// "/v1/files/abc/content" under prefix "/v1/files" → {"abc", "content"}; nullopt when the path
// has no id segment or more than two segments. The id is percent-decoded.
struct SubPath {
  std::string id;
  std::string_view action;  // "" or the segment after the id
};
std::optional<SubPath> sub_path(std::string_view path, std::string_view prefix);

// `limit` from the query: [1, max], `fallback` when absent; 400 naming `limit` otherwise.
ApiResult<size_t> query_limit(const HttpRequest& req, size_t fallback, size_t max);

// {"object": "list", "data", "first_id", "last_id", "has_more"}.
nlohmann::json list_object(nlohmann::json data, bool has_more);

// 404 "No such {what} object: {id}" with param "id" and `code`.
ApiError object_not_found(std::string_view what, std::string_view id, std::string_view code);

}  // namespace keel::server
