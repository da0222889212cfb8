// Batch input validation (see batch_input.h).
#include "server/batch_input.h"

#include <fmt/format.h>

#include <unordered_set>

#include "server/json_fields.h"
#include "server/router.h"

namespace keel::server {
namespace {

bool blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

// Checks one parsed line; fills `out` or returns the error.
std::optional<BatchError> check_line(const Json& j, std::string_view endpoint, BatchLine* out) {
  auto error = [out](std::string code, std::string message, std::string param) {
    return BatchError{std::move(code), std::move(message), std::move(param), out->line};
  };
  if (!j.is_object()) {
    return error("invalid_json_line",
                 fmt::format("Line {} is {}, not a JSON object.", out->line, json_type_name(j)),
                 "");
  }
  const Json* custom_id = field(j, "custom_id");
  if (custom_id == nullptr) {
    return error("missing_required_parameter", "Missing required parameter: 'custom_id'.",
                 "custom_id");
  }
  if (!custom_id->is_string() || custom_id->get_ref<const std::string&>().empty()) {
    return error(
        "invalid_custom_id",
        fmt::format("`custom_id` must be a non-empty string, got {}.", describe_value(*custom_id)),
        "custom_id");
  }
  out->custom_id = custom_id->get<std::string>();
  const Json* method = field(j, "method");
  if (method == nullptr || !method->is_string() ||
      method->get_ref<const std::string&>() != "POST") {
    return error("invalid_method",
                 fmt::format("`method` must be \"POST\", got {}.",
                             method ? describe_value(*method) : std::string("nothing")),
                 "method");
  }
  const Json* url = field(j, "url");
  if (url == nullptr || !url->is_string()) {
    return error("missing_required_parameter", "Missing required parameter: 'url'.", "url");
  }
  const std::string& u = url->get_ref<const std::string&>();
  if (!is_batch_endpoint(u)) {
    return error("invalid_url",
                 fmt::format("`url` {} is not supported; use /v1/chat/completions or "
                             "/v1/completions.",
                             describe_value(*url)),
                 "url");
  }
  if (u != endpoint) {
    return error("mismatched_endpoint",
                 fmt::format("`url` {} does not match the batch's endpoint \"{}\".",
                             describe_value(*url), endpoint),
                 "url");
  }
  const Json* body = field(j, "body");
  if (body == nullptr || !body->is_object()) {
    return error("missing_required_parameter",
                 "Missing required parameter: 'body' (a JSON object).", "body");
  }
  return std::nullopt;
}

}  // namespace

bool is_batch_endpoint(std::string_view url) {
  return url == "/v1/chat/completions" || url == "/v1/completions";
}

BatchInput parse_batch_input(std::string_view content, std::string_view endpoint,
                             size_t max_lines) {
  BatchInput input;
  std::unordered_set<std::string_view> seen;
  int64_t line_no = 0;
  while (!content.empty() && input.errors.size() < kMaxBatchErrors) {
    const size_t eol = content.find('\n');
    const std::string_view text = content.substr(0, eol);
    content.remove_prefix(eol == std::string_view::npos ? content.size() : eol + 1);
    ++line_no;
    if (blank(text)) continue;
    if (input.lines.size() == max_lines) {
      input.errors.push_back({"too_many_tasks",
                              fmt::format("The input file holds more than {} requests; split it "
                                          "into several batches.",
                                          max_lines),
                              std::nullopt, line_no});
      break;
    }
    BatchLine line{.line = line_no, .text = text};
    ApiResult<Json> j = parse_json_text(text);
    if (!j.ok()) {
      input.errors.push_back(
          {"invalid_json_line",
           fmt::format("Line {} is not valid JSON: {}", line_no, j.error().message), std::nullopt,
           line_no});
      continue;
    }
    if (std::optional<BatchError> e = check_line(j.value(), endpoint, &line)) {
      if (e->param && e->param->empty()) e->param.reset();
      input.errors.push_back(std::move(*e));
      continue;
    }
    input.lines.push_back(std::move(line));
  }
  // Duplicates are found once every custom_id is known (the views point into the lines).
  for (const BatchLine& l : input.lines) {
    if (input.errors.size() >= kMaxBatchErrors) break;
    if (!seen.insert(l.custom_id).second) {
      input.errors.push_back(
          {"duplicate_custom_id",
           fmt::format("The custom_id \"{}\" of line {} is used by an earlier line; custom_ids "
                       "must be unique within a batch.",
                       l.custom_id, l.line),
           "custom_id", l.line});
    }
  }
  if (input.lines.empty() && input.errors.empty()) {
    input.errors.push_back({"empty_file", "The input file holds no requests.", std::nullopt, {}});
  }
  if (!input.errors.empty()) input.lines.clear();
  return input;
}

}  // namespace keel::server
