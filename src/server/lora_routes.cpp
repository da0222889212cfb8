// LoRA routes: vLLM's runtime load/unload endpoints and adapter model objects (lora_routes.h).
#include "server/lora_routes.h"

#include <fmt/format.h>

#include "server/json_fields.h"

namespace keel::server {
namespace {

ApiResult<std::string> required_name(const nlohmann::json& body, const char* name) {
  std::optional<std::string> v;
  if (MaybeError e = read_string(body, name, &v)) return *e;
  if (!v || v->empty()) {
    return ApiError::bad_request(fmt::format("`{}` is required (a non-empty string)", name), name);
  }
  return *v;
}

std::optional<HttpResponse> refuse_unless_allowed(const ServerContext& ctx, std::string_view path) {
  if (ctx.config.allow_runtime_lora) return std::nullopt;
  ApiError e = ApiError::path_not_found("POST", path);
  e.message +=
      " Loading LoRA adapters at run time is off; start the server with "
      "--allow-runtime-lora to enable it.";
  return HttpResponse::error(e);
}

HttpResponse text(std::string body) {
  HttpResponse r = HttpResponse::json(200, std::move(body));
  r.content_type = "text/plain; charset=utf-8";
  return r;
}

}  // namespace

HttpResponse handle_load_lora(const ServerContext& ctx, const nlohmann::json& body) {
  if (auto r = refuse_unless_allowed(ctx, kLoadLoraPath)) return *r;
  ApiResult<std::string> name = required_name(body, "lora_name");
  if (!name.ok()) return HttpResponse::error(name.error());
  ApiResult<std::string> path = required_name(body, "lora_path");
  if (!path.ok()) return HttpResponse::error(path.error());
  if (name.value() == ctx.config.served_model_name) {
    return HttpResponse::error(ApiError::bad_request(
        fmt::format("`{}` is the base model's name", name.value()), "lora_name"));
  }
  const Status s = ctx.deps.engine->load_lora(name.value(), path.value());
  if (!s.ok()) {
    // A missing file is the request's fault here (400, as vLLM), not a missing route or model.
    ApiError e = ApiError::from_status(s, "lora_path");
    if (s.code() == StatusCode::kNotFound) e.status = 400;
    return HttpResponse::error(e);
  }
  return text(fmt::format("Success: LoRA adapter '{}' added successfully.", name.value()));
}

HttpResponse handle_unload_lora(const ServerContext& ctx, const nlohmann::json& body) {
  if (auto r = refuse_unless_allowed(ctx, kUnloadLoraPath)) return *r;
  ApiResult<std::string> name = required_name(body, "lora_name");
  if (!name.ok()) return HttpResponse::error(name.error());
  const Status s = ctx.deps.engine->unload_lora(name.value());
  if (!s.ok()) return HttpResponse::error(ApiError::from_status(s, "lora_name"));
  return text(fmt::format("Success: LoRA adapter '{}' removed successfully.", name.value()));
}

bool is_lora_model(const ServerContext& ctx, std::string_view model) {
  for (const engine::LoraInfo& l : ctx.deps.engine->list_loras()) {
    if (l.name == model) return true;
  }
  return false;
}

std::string lora_for_model(const ServerContext& ctx, std::string_view model) {
  if (model.empty() || model == ctx.config.served_model_name) return "";
  return std::string(model);
}

bool append_lora_models(const ServerContext& ctx, std::string_view id, nlohmann::json* list) {
  bool found = false;
  for (const engine::LoraInfo& l : ctx.deps.engine->list_loras()) {
    if (!id.empty() && l.name != id) continue;
    list->push_back(nlohmann::json{{"id", l.name},
                                   {"object", "model"},
                                   {"created", l.created_unix},
                                   {"owned_by", "keel"},
                                   {"root", l.path},
                                   {"parent", ctx.config.served_model_name},
                                   {"max_model_len", ctx.deps.engine->max_model_len()},
                                   {"lora", {{"rank", l.rank}, {"targets", l.targets}}}});
    found = true;
  }
  return found;
}

}  // namespace keel::server
