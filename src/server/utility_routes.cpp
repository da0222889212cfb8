// The synchronous routes: /health, /metrics, /v1/models[/{id}], /tokenize, /detokenize (see
// router.h). They run on an io thread; tokenization here is bounded by max_body_bytes.
#include <fmt/format.h>

#include "server/dashboard_page.h"
#include "server/json_fields.h"
#include "server/lora_routes.h"
#include "server/metrics_text.h"
#include "server/pic_segments.h"
#include "server/prompt_preparation.h"
#include "server/response_builder.h"
#include "server/router.h"

namespace keel::server {
namespace {

Json model_object(const ServerContext& ctx) {
  Json model{{"id", ctx.config.served_model_name},
             {"object", "model"},
             {"created", ctx.created_unix},
             {"owned_by", "keel"},
             {"root", ctx.config.served_model_name},
             {"parent", nullptr},
             {"max_model_len", ctx.deps.engine->max_model_len()}};
  if (!ctx.config.model_description.empty()) model["description"] = ctx.config.model_description;
  return model;
}

// The ids /tokenize returns for `prompt` or `messages`.
ApiResult<std::vector<int32_t>> tokenize_body(const ServerContext& ctx, const Json& body) {
  bool add_special = true, add_generation_prompt = true;
  KEEL_API_TRY(read_bool(body, "add_special_tokens", &add_special));
  KEEL_API_TRY(read_bool(body, "add_generation_prompt", &add_generation_prompt));
  nlohmann::ordered_json template_kwargs;
  KEEL_API_TRY(parse_chat_template_kwargs(body, &template_kwargs));
  const Json* prompt = field(body, "prompt");
  const Json* messages = field(body, "messages");
  if ((prompt == nullptr) == (messages == nullptr)) {
    return ApiError::bad_request("exactly one of `prompt` and `messages` is required", "prompt");
  }
  // A raw prompt parses special tokens (as llama-server and vLLM do); rendered messages only in
  // the template's markup, their contents (the plain spans) are text.
  tokenizer::TrackedText text;
  if (prompt != nullptr) {
    if (!prompt->is_string()) return type_error("prompt", "a string", *prompt);
    text.text = prompt->get<std::string>();
  } else {
    ApiResult<std::vector<ChatMessage>> parsed = parse_messages(*messages);
    if (!parsed.ok()) return parsed.error();
    if (!ctx.deps.chat)
      return ApiError::bad_request("This server has no chat template.", "messages");
    Result<tokenizer::TrackedText> formatted =
        ctx.deps.chat(pic_marked_messages(ctx, plain_tool_messages(ctx, parsed.value())),
                      add_generation_prompt, nullptr, template_kwargs);
    if (!formatted.ok()) return ApiError::from_status(formatted.error(), "messages");
    text = strip_pic_marks(*formatted);
  }
  // Provably longer than the context: refused without tokenizing it.
  if (auto e = refuse_if_provably_long(
          ctx, prompt != nullptr ? ApiKind::kCompletion : ApiKind::kChat, text.text, 0)) {
    return *e;
  }
  return ctx.deps.tokenizer->encode(text, add_special, /*parse_special=*/true);
}

}  // namespace

HttpResponse handle_health(const ServerContext& ctx) {
  if (ctx.draining.load(std::memory_order_acquire)) {
    return HttpResponse::error(ApiError::unavailable("The server is shutting down."));
  }
  if (!ctx.ready()) return HttpResponse::error(ApiError::unavailable("The model is loading."));
  if (!ctx.deps.fleet_health) return HttpResponse::json(200, R"({"status":"ok"})");
  const FleetHealth fleet = ctx.deps.fleet_health();
  if (!fleet.reachable) {
    std::string why = "No job executor of the cluster answers";
    if (!fleet.job_executors_down.empty()) why += " (" + fleet.job_executors_down + ")";
    return HttpResponse::error(ApiError::unavailable(why + "."));
  }
  if (fleet.serving_tes == 0 && fleet.activation_timeout_s <= 0) {
    return HttpResponse::error(ApiError::unavailable("No task executor of the model is healthy."));
  }
  Json body{{"status", "ok"}, {"ready_task_executors", fleet.serving_tes}};
  if (!fleet.job_executors_down.empty()) body["job_executors_down"] = fleet.job_executors_down;
  if (fleet.serving_tes == 0) {
    body["held_requests"] = fleet.held_requests;
    body["activator"] =
        fmt::format("no task executor is ready: requests are held (up to {:g} s) while one starts",
                    fleet.activation_timeout_s);
  }
  return HttpResponse::json(200, dump_json(body));
}

HttpResponse handle_metrics(const ServerContext& ctx) {
  HttpResponse r;
  r.content_type = std::string(kPrometheusContentType);
  const engine::EngineStats stats = ctx.deps.engine->stats();
  r.body = render_metrics(stats, ctx.deps.engine->metrics(), ctx.config.served_model_name);
  if (ctx.tenants != nullptr) r.body += ctx.tenants->metrics_text(stats.tenant_vtc);
  if (ctx.deps.extra_metrics) r.body += ctx.deps.extra_metrics();
  return r;
}

HttpResponse handle_cluster_status(const ServerContext& ctx) {
  if (!ctx.deps.cluster_status) {
    return HttpResponse::error(ApiError::path_not_found("GET", kClusterStatusPath));
  }
  Result<std::string> status = ctx.deps.cluster_status();
  if (!status.ok()) return HttpResponse::error(ApiError::unavailable(status.status().message()));
  return HttpResponse::json(200, std::move(*status));
}

HttpResponse handle_dashboard(const ServerContext& ctx) {
  if (!ctx.deps.cluster_status) {
    return HttpResponse::error(ApiError::path_not_found("GET", kDashboardPath));
  }
  HttpResponse r = HttpResponse::json(200, std::string(dashboard_html()));
  r.content_type = "text/html; charset=utf-8";
  return r;
}

HttpResponse handle_models(const ServerContext& ctx, std::string_view model_id) {
  if (!model_id.empty()) {
    if (model_id == ctx.config.served_model_name) {
      return HttpResponse::json(200, dump_json(model_object(ctx)));
    }
    Json found = Json::array();
    if (!append_lora_models(ctx, model_id, &found)) {
      return HttpResponse::error(ApiError::model_not_found(model_id));
    }
    return HttpResponse::json(200, dump_json(found[0]));
  }
  Json data = Json::array({model_object(ctx)});
  append_lora_models(ctx, "", &data);  // LoRA adapters, parent = the served model
  return HttpResponse::json(200, dump_json(Json{{"object", "list"}, {"data", std::move(data)}}));
}

HttpResponse handle_tokenize(const ServerContext& ctx, const Json& body) {
  std::optional<std::string> model;
  bool return_strs = false;
  if (MaybeError e = read_string(body, "model", &model)) return HttpResponse::error(*e);
  if (model) {
    if (auto e = check_model(ctx, *model)) return HttpResponse::error(*e);
  }
  if (MaybeError e = read_bool(body, "return_token_strs", &return_strs)) {
    return HttpResponse::error(*e);
  }
  ApiResult<std::vector<int32_t>> ids = tokenize_body(ctx, body);
  if (!ids.ok()) return HttpResponse::error(ids.error());
  Json out = {{"count", ids.value().size()},
              {"max_model_len", ctx.deps.engine->max_model_len()},
              {"tokens", ids.value()}};
  if (return_strs) {
    Json strs = Json::array();
    for (int32_t id : ids.value()) strs.push_back(ctx.deps.tokenizer->token_to_piece(id, true));
    out["token_strs"] = std::move(strs);
  }
  return HttpResponse::json(200, dump_json(out));
}

HttpResponse handle_detokenize(const ServerContext& ctx, const Json& body) {
  std::optional<std::string> model;
  if (MaybeError e = read_string(body, "model", &model)) return HttpResponse::error(*e);
  if (model) {
    if (auto e = check_model(ctx, *model)) return HttpResponse::error(*e);
  }
  const Json* tokens = field(body, "tokens");
  if (tokens == nullptr)
    return HttpResponse::error(ApiError::bad_request("`tokens` is required", "tokens"));
  if (!tokens->is_array())
    return HttpResponse::error(type_error("tokens", "an array of token ids", *tokens));
  const int32_t vocab = ctx.deps.tokenizer->vocab_size();
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& v = (*tokens)[i];
    const std::optional<int64_t> id = v.is_number() ? as_integer(v) : std::nullopt;
    if (!id || *id < 0 || *id >= vocab) {
      return HttpResponse::error(ApiError::bad_request(
          fmt::format("`tokens[{}]` must be a token id in [0, {})", i, vocab), "tokens"));
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  return HttpResponse::json(
      200, dump_json(Json{{"prompt", ctx.deps.tokenizer->decode(ids, /*render_special=*/false)}}));
}

}  // namespace keel::server
