// ResponseRun and the Response object (see responses_run.h).
#include "server/responses_run.h"

#include "server/responses_items.h"

#include <fmt/format.h>

#include "core/log.h"

namespace keel::server {
namespace {

OrderedJson number_or_null(const std::optional<double>& v) { return v ? OrderedJson(*v) : nullptr; }

// `param` with its chat prefix `from` replaced by `to` (whole segment only).
bool rename_param_prefix(std::string* param, std::string_view from, std::string_view to) {
  if (!param->starts_with(from)) return false;
  const std::string_view rest = std::string_view(*param).substr(from.size());
  if (!rest.empty() && rest.front() != '.' && rest.front() != '[') return false;
  *param = std::string(to) + std::string(rest);
  return true;
}

}  // namespace

OrderedJson responses_usage(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

OrderedJson response_error(const ApiError& error) {
  return {{"code", error.code.value_or(error.type)}, {"message", error.message}};
}

ApiError as_responses_error(ApiError error) {
  if (!error.param) return error;
  std::string& p = *error.param;
  // A message's index is not its item's (instructions and the chain's history come first).
  if (p.starts_with("messages")) {
    p = "input";
    return error;
  }
  (void)(rename_param_prefix(&p, "max_completion_tokens", "max_output_tokens") ||
         rename_param_prefix(&p, "response_format.json_schema", "text.format") ||
         rename_param_prefix(&p, "response_format", "text.format"));
  return error;
}

OrderedJson response_object(const ResponsePlan& plan, ResponseStatus status,
                            const OrderedJson& output, const OrderedJson& usage,
                            const OrderedJson& error, const OrderedJson& incomplete_details) {
  const ResponsesRequest& r = plan.request;
  const std::string prev = r.previous_response_id;
  return {{"id", plan.id},
          {"object", "response"},
          {"created_at", plan.created_at},
          {"status", response_status_name(status)},
          {"background", r.background},
          {"error", error},
          {"incomplete_details", incomplete_details},
          {"instructions", r.instructions ? OrderedJson(*r.instructions) : OrderedJson(nullptr)},
          {"max_output_tokens",
           r.max_output_tokens ? OrderedJson(*r.max_output_tokens) : OrderedJson(nullptr)},
          {"model", plan.model},
          {"output", output},
          {"parallel_tool_calls", r.parallel_tool_calls},
          {"previous_response_id", prev.empty() ? OrderedJson(nullptr) : OrderedJson(prev)},
          {"prompt_cache_key",
           r.prompt_cache_key ? OrderedJson(*r.prompt_cache_key) : OrderedJson(nullptr)},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"service_tier", "default"},
          {"store", r.store},
          {"temperature", r.temperature ? number_or_null(r.temperature) : OrderedJson(1.0)},
          {"text", r.text},
          {"tool_choice", r.tool_choice},
          {"tools", r.tools},
          {"top_p", r.top_p ? number_or_null(r.top_p) : OrderedJson(1.0)},
          {"truncation", "disabled"},
          {"usage", usage},
          {"user", nullptr},
          {"metadata", r.metadata}};
}

ResponseRun::ResponseRun(ServerContext& ctx, ResponsePlan plan, std::vector<PreparedPrompt> prompts)
    : ctx_(ctx),
      plan_(std::move(plan)),
      prompt_tokens_(prompts.empty() ? std::vector<int32_t>() : prompts.front().tokens),
      choices_(ctx, plan_.spec, std::move(prompts), plan_.key),
      events_(plan_.key, plan_.request.stream) {
  choices_.set_chunk_observer([this](const ChunkChoice& c) { on_chunk(c); });
}

void ResponseRun::on_chunk(const ChunkChoice& c) {
  std::string scratch;
  std::string* out = sse_ != nullptr ? sse_ : &scratch;
  if (c.reasoning) events_.reasoning(*c.reasoning, out);
  if (c.text) events_.text(*c.text, out);
  if (c.tool_calls.is_array()) {
    for (const nlohmann::json& d : c.tool_calls) {
      const nlohmann::json& fn = d["function"];
      if (d.contains("id")) {
        events_.call_start(d["id"].get<std::string>(), fn.value("name", ""), out);
      }
      events_.call_arguments(fn.value("arguments", ""), out);
    }
  }
  if (c.finish_reason) {
    finish_reason_ = c.finish_reason;
    events_.close(out);
  }
}

void ResponseRun::consume(size_t choice, engine::TokenEvent event, std::string* sse) {
  output_tokens_.insert(output_tokens_.end(), event.tokens.begin(), event.tokens.end());
  std::string scratch;
  sse_ = sse != nullptr && plan_.request.stream ? sse : &scratch;
  choices_.consume(choice, std::move(event), &scratch);  // chat chunks: none (observer set)
  sse_ = nullptr;
}

StoredResponse ResponseRun::result(const std::optional<ApiError>& error) {
  StoredResponse r;
  r.id = plan_.id;
  r.input_items = plan_.request.input_items;
  r.previous_response_id = plan_.request.previous_response_id;
  r.prompt_tokens = prompt_tokens_;
  r.output_tokens = output_tokens_;
  const OrderedJson usage = responses_usage(choices_.usage());
  if (error) {
    r.response = response_object(plan_, ResponseStatus::kFailed, events_.output(), usage,
                                 response_error(*error));
  } else if (finish_reason_ == "length") {
    OrderedJson output = events_.output();
    if (!output.empty()) output.back()["status"] = "incomplete";  // the item cut short
    r.response = response_object(plan_, ResponseStatus::kIncomplete, output, usage, nullptr,
                                 {{"reason", "max_output_tokens"}});
  } else {
    r.response = response_object(plan_, ResponseStatus::kCompleted, events_.output(), usage);
  }
  return r;
}

void ResponseRun::store(const StoredResponse& r) {
  if (!plan_.request.store || plan_.request.background) return;
  if (Status st = ctx_.responses.put(r); !st.ok()) {
    KEEL_LOG_WARN("responses: {} not stored: {}", r.id, st.message());
  }
}

std::string ResponseRun::stream_head() {
  return events_.start(
      response_object(plan_, ResponseStatus::kInProgress, OrderedJson::array(), nullptr));
}

std::string ResponseRun::stream_tail() {
  StoredResponse r = result(std::nullopt);
  store(r);
  return events_.end(r.response);
}

std::string ResponseRun::final_body() {
  StoredResponse r = result(std::nullopt);
  store(r);
  return dump_ordered_json(r.response);
}

std::string ResponseRun::stream_error(const ApiError& error) {
  std::string out;
  events_.close(&out);
  StoredResponse r = result(error);
  store(r);
  return out + events_.end(r.response);
}

}  // namespace keel::server
