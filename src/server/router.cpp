// route_request and the request-level checks (see router.h).
#include "server/router.h"

#include "server/lora_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/batch_routes.h"
#include "server/dashboard_page.h"
#include "server/fine_tuning_routes.h"
#include "server/http_framing.h"
#include "server/json_fields.h"
#include "server/program_id.h"
#include "server/responses_routes.h"
#include "server/tool_grammar.h"

namespace keel::server {
namespace {

constexpr std::string_view kChatPath = "/v1/chat/completions";
constexpr std::string_view kCompletionsPath = "/v1/completions";
constexpr std::string_view kModelsPath = "/v1/models";
constexpr std::string_view kModelsPrefix = "/v1/models/";
constexpr std::string_view kCachesPath = "/v1/caches";
constexpr std::string_view kCachesPrefix = "/v1/caches/";

bool needs_auth(std::string_view path) {
  return path.starts_with("/v1/") || path == "/v1" || path == "/tokenize" || path == "/detokenize";
}

bool equal_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Constant-time comparison (the key's length is not secret).
bool same_key(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The bearer token of the Authorization header ("" when there is none).
std::string_view bearer_key(const HttpRequest& req) {
  std::string_view auth = req.header("authorization");
  constexpr std::string_view kBearer = "bearer ";
  if (auth.size() < kBearer.size() || !equal_ignore_case(auth.substr(0, kBearer.size()), kBearer)) {
    return {};
  }
  auth.remove_prefix(kBearer.size());
  while (!auth.empty() && auth.front() == ' ') auth.remove_prefix(1);
  return auth;
}

// A tenant's cache_salt in a JSON body: the client's own (when a string; anything else is left
// for the body's validation to refuse) scoped to the tenant.
void scope_body_salt(nlohmann::json* body, const TenantGrant* tenant) {
  if (tenant == nullptr || !body->is_object()) return;
  const auto it = body->find("cache_salt");
  if (it != body->end() && !it->is_string()) return;
  const std::string client = it == body->end() ? std::string() : it->get<std::string>();
  (*body)["cache_salt"] = scoped_cache_salt(tenant->cache_scope, client);
}

// The allowed entry of ctx.config.cors_allowed_origins matching the request's Origin ("*" or the
// origin itself), or "" when CORS does not apply (no Origin, CORS off, origin not listed).
std::string_view allowed_origin(const ServerContext& ctx, const HttpRequest& req) {
  std::string_view origin = req.header("origin");
  if (origin.empty()) return {};
  for (const std::string& allowed : ctx.config.cors_allowed_origins) {
    if (allowed == "*" || allowed == origin) return allowed;
  }
  return {};
}

// A CORS preflight: 204, with the allow-* headers only for an allowed origin (the browser then
// refuses the actual request for any other origin).
HttpResponse preflight(const ServerContext& ctx, const HttpRequest& req) {
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  if (allowed_origin(ctx, req).empty()) return r;
  r.headers.emplace_back("access-control-allow-methods", "GET, POST, DELETE, OPTIONS");
  std::string_view asked = req.header("access-control-request-headers");
  r.headers.emplace_back(
      "access-control-allow-headers",
      asked.empty() ? std::string("authorization, content-type") : std::string(asked));
  r.headers.emplace_back("access-control-max-age", "600");
  return r;
}

// The route's allowed methods ("GET", "GET, POST", ...), or "" for an unknown path.
std::string_view allowed_methods(std::string_view path) {
  if (path == "/health" || path == "/metrics" || path == kModelsPath ||
      (path.starts_with(kModelsPrefix) && path.size() > kModelsPrefix.size())) {
    return "GET";
  }
  if (path == kChatPath || path == kCompletionsPath || path == "/tokenize" ||
      path == "/detokenize") {
    return "POST";
  }
  if (path == kClusterStatusPath || path == kDashboardPath) return "GET";
  if (path == kLoadLoraPath || path == kUnloadLoraPath) return "POST";
  if (path == kCachesPath) return "GET, POST";
  if (path.starts_with(kCachesPrefix) && path.size() > kCachesPrefix.size()) return "GET, DELETE";
  if (std::string_view m = responses_route_methods(path); !m.empty()) return m;
  if (std::string_view m = fine_tuning_route_methods(path); !m.empty()) return m;
  return batch_route_methods(path);
}

bool method_allowed(std::string_view methods, std::string_view method) {
  while (!methods.empty()) {
    const size_t comma = methods.find(',');
    if (methods.substr(0, comma) == method) return true;
    if (comma == std::string_view::npos) break;
    methods.remove_prefix(comma + 2);  // ", "
  }
  return false;
}

// prompts × n engine requests must fit the waiting queue at once, or the request could never be
// admitted: a 400 rather than a 429 that invites retrying.
std::optional<ApiError> check_queue_capacity(const ServerContext& ctx, const GenerationSpec& spec) {
  const int64_t choices = static_cast<int64_t>(spec.num_prompts()) * spec.n;
  const int64_t capacity = ctx.deps.engine->max_waiting();
  if (choices <= capacity) return std::nullopt;
  return ApiError::bad_request(
      fmt::format("This request expands into {} generations (prompts × n), more than the {} this "
                  "server can queue at once (--max-waiting); reduce `n` or the number of prompts.",
                  choices, capacity),
      "n", "too_many_choices");
}

RouteOutcome route_generation(ServerContext& ctx, const HttpRequest& req, ApiKind kind,
                              const TenantGrant* tenant) {
  ApiResult<nlohmann::json> body = parse_json_text(req.body);
  if (!body.ok()) return HttpResponse::error(body.error());
  scope_body_salt(&body.value(), tenant);
  ApiResult<GenerationSpec> spec = generation_spec_for(ctx, body.value(), kind, {req.body, ""});
  if (!spec.ok()) return HttpResponse::error(spec.error());
  if (tenant != nullptr) {
    spec.value().tenant = tenant->tenant;
    spec.value().tenant_weight = tenant->weight;
  }
  // No X-Program-Id: the call's prompt_cache_key, when it has one, names its program.
  ApiResult<std::string> program = program_of(req, tenant, spec.value().prompt_cache_key);
  if (!program.ok()) return HttpResponse::error(program.error());
  spec.value().program = std::move(program.value());
  return GenerationCall{std::move(spec.value())};
}

RouteOutcome route_cache_create(ServerContext& ctx, const HttpRequest& req,
                                const TenantGrant* tenant) {
  ApiResult<nlohmann::json> body = parse_json_text(req.body);
  if (!body.ok()) return HttpResponse::error(body.error());
  scope_body_salt(&body.value(), tenant);
  ApiResult<CacheSpec> spec = parse_cache_request(body.value(), ctx.deps.tokenizer->vocab_size());
  if (!spec.ok()) return HttpResponse::error(spec.error());
  if (auto e = check_model(ctx, spec.value().model)) return HttpResponse::error(*e);
  if (!lora_for_model(ctx, spec.value().model).empty()) {
    return HttpResponse::error(
        ApiError::bad_request("context caches hold the base model's KV only; "
                              "`model` must name the served model, not a LoRA adapter",
                              "model"));
  }
  if (ctx.draining.load(std::memory_order_acquire)) {
    return HttpResponse::error(ApiError::unavailable("The server is shutting down."));
  }
  if (!ctx.ready()) return HttpResponse::error(ApiError::unavailable("The model is loading."));
  return CacheCall{std::move(spec.value())};
}

RouteOutcome route_caches(ServerContext& ctx, const HttpRequest& req, const TenantGrant* tenant) {
  const std::string& path = req.path;
  std::string salt = request_cache_salt(req);
  if (tenant != nullptr) salt = scoped_cache_salt(tenant->cache_scope, salt);
  if (path == kCachesPath) {
    return req.method == "POST" ? route_cache_create(ctx, req, tenant)
                                : handle_cache_list(ctx, salt);
  }
  const std::string id = percent_decode(std::string_view(path).substr(kCachesPrefix.size()));
  return req.method == "DELETE" ? handle_cache_delete(ctx, id, salt)
                                : handle_cache_get(ctx, id, salt);
}

HttpResponse route_json(const ServerContext& ctx, const HttpRequest& req,
                        HttpResponse (*handler)(const ServerContext&, const nlohmann::json&)) {
  ApiResult<nlohmann::json> body = parse_json_text(req.body);
  if (!body.ok()) return HttpResponse::error(body.error());
  if (!body.value().is_object()) {
    return HttpResponse::error(type_error("body", "a JSON object", body.value()));
  }
  return handler(ctx, body.value());
}

}  // namespace

ApiResult<nlohmann::json> parse_json_text(std::string_view text) {
  // Counted before a JSON tree is built: a parsed value costs 16 to ~100 bytes however small its
  // text ("{}," is 3 bytes), so the counts, not only the body size, bound the memory.
  const JsonShape shape = json_shape(text, kMaxJsonDepth);
  if (shape.max_depth > kMaxJsonDepth) {
    return ApiError::bad_request(
        fmt::format("The request body nests arrays/objects deeper than {} levels", kMaxJsonDepth));
  }
  if (shape.containers > kMaxJsonContainers || shape.values > kMaxJsonValues) {
    return ApiError::bad_request(
        fmt::format("The request body holds {} JSON values in {} arrays/objects; at most {} values "
                    "in {} arrays/objects are accepted",
                    shape.values, shape.containers, kMaxJsonValues, kMaxJsonContainers),
        std::nullopt, "request_too_complex");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (what.size() > 300) what = what.substr(0, 300) + "...";
    return ApiError::bad_request(fmt::format("Malformed JSON body: {}", what));
  }
}

namespace {

// Tools constrain the output (tool_grammar.h): a forced choice to a call in the model's syntax,
// "auto" to free text or well-formed calls — unless response_format, `grammar` or `regex`
// already constrain it (then an "auto" call is parsed from whatever the model writes).
std::optional<ApiError> apply_tool_grammar(const ServerContext& ctx, GenerationSpec* spec) {
  const bool forced = spec->tools.forced();
  if (!forced && !(spec->tools.active() && spec->grammar.empty())) return std::nullopt;
  const ToolFamily family = ctx.deps.tool_format.family;
  Result<std::string> g =
      forced ? forced_tool_grammar(family, spec->tools) : auto_tool_grammar(family, spec->tools);
  if (!g.ok()) return ApiError::bad_request(g.error().message(), "tools", "unsupported_value");
  spec->grammar = std::move(g).value();
  spec->tools.constrained = true;
  return std::nullopt;
}

}  // namespace

ApiResult<GenerationSpec> generation_spec_for(ServerContext& ctx, const nlohmann::json& body,
                                              ApiKind kind, const BodyText& text) {
  const ParseLimits limits{.vocab_size = ctx.deps.tokenizer->vocab_size(),
                           .max_n = ctx.config.max_n,
                           .max_choices = ctx.config.max_choices_per_request,
                           .max_stop_strings = ctx.config.max_stop_strings,
                           .max_stop_string_bytes = ctx.config.max_stop_string_bytes};
  ApiResult<GenerationSpec> spec = kind == ApiKind::kChat ? parse_chat_request(body, limits)
                                                          : parse_completion_request(body, limits);
  if (!spec.ok()) return spec.error();
  if (auto e = check_model(ctx, spec.value().model)) return *e;
  if (auto e = apply_schema_order(body, text, &spec.value())) return *e;
  if (auto e = apply_tool_grammar(ctx, &spec.value())) return *e;
  if (auto e = check_queue_capacity(ctx, spec.value())) return *e;
  if (auto e = resolve_cache_id(ctx, &spec.value())) return *e;
  if (ctx.draining.load(std::memory_order_acquire)) {
    return ApiError::unavailable("The server is shutting down.");
  }
  if (!ctx.ready()) return ApiError::unavailable("The model is loading.");
  if (kind == ApiKind::kChat && !ctx.deps.chat) {
    return ApiError::bad_request("This server has no chat template; use /v1/completions.");
  }
  return spec;
}

JsonShape json_shape(std::string_view text, int depth_limit) {
  JsonShape shape;
  int depth = 0;
  bool in_string = false, escaped = false;
  char prev = ',';  // the last structural character outside strings
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        ++shape.values;
        prev = '"';
        break;
      case '[':
      case '{':
        ++shape.values;
        ++shape.containers;
        shape.max_depth = std::max(shape.max_depth, ++depth);
        if (shape.max_depth > depth_limit) return shape;
        prev = c;
        break;
      case ']':
      case '}':
        --depth;
        prev = c;
        break;
      case ',':
      case ':':
        prev = c;
        break;
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        break;
      default:  // a number or literal: counted at its first character
        if (prev == ',' || prev == ':' || prev == '[' || prev == '{') ++shape.values;
        prev = 'x';
        break;
    }
  }
  return shape;
}

int json_nesting_depth(std::string_view text, int limit) {
  return json_shape(text, limit).max_depth;
}

std::optional<ApiError> check_model(const ServerContext& ctx, std::string_view model) {
  if (model.empty() || model == ctx.config.served_model_name || is_lora_model(ctx, model)) {
    return std::nullopt;
  }
  return ApiError::model_not_found(model);
}

std::string request_id_for(ServerContext& ctx, const HttpRequest& req) {
  std::string_view given = req.header("x-request-id");
  bool printable = !given.empty() && given.size() <= 128;
  for (char c : given) printable = printable && c > 0x20 && c < 0x7F;
  return printable ? std::string(given) : ctx.ids.next();
}

HeaderList common_headers(const ServerContext& ctx, const HttpRequest& req,
                          std::string_view request_id) {
  HeaderList h;
  h.emplace_back("x-request-id", std::string(request_id));
  const std::string_view allowed = allowed_origin(ctx, req);
  if (allowed.empty()) return h;
  h.emplace_back("access-control-allow-origin",
                 allowed == "*" ? std::string("*") : std::string(req.header("origin")));
  if (allowed != "*") h.emplace_back("vary", "Origin");
  h.emplace_back("access-control-expose-headers", "x-request-id");
  return h;
}

Authentication authenticate(ServerContext& ctx, const HttpRequest& req) {
  Authentication a;
  if (req.method == "OPTIONS" || !needs_auth(req.path)) return a;
  if (ctx.config.api_key.empty() && ctx.tenants == nullptr) return a;
  const std::string_view key = bearer_key(req);
  if (!ctx.config.api_key.empty() && same_key(key, ctx.config.api_key)) return a;
  if (ctx.tenants != nullptr) a.tenant = ctx.tenants->authenticate(key);
  a.ok = a.tenant.has_value();
  return a;
}

RouteOutcome route_request(ServerContext& ctx, const HttpRequest& req) {
  return route_request(ctx, req, authenticate(ctx, req));
}

RouteOutcome route_request(ServerContext& ctx, const HttpRequest& req, const Authentication& auth) {
  if (req.method == "OPTIONS") return preflight(ctx, req);
  const std::string& path = req.path;
  if (!auth.ok) return HttpResponse::error(ApiError::unauthorized());
  const TenantGrant* tenant = auth.tenant ? &*auth.tenant : nullptr;
  const std::string_view methods = allowed_methods(path);
  if (methods.empty()) return HttpResponse::error(ApiError::path_not_found(req.method, path));
  if (!method_allowed(methods, req.method)) {
    HttpResponse r = HttpResponse::error(ApiError::method_not_allowed(req.method, path));
    r.headers.emplace_back("allow", std::string(methods) + ", OPTIONS");
    return r;
  }
  if (path == "/health") return handle_health(ctx);
  if (path == "/metrics") return BlockingCall{[&ctx] { return handle_metrics(ctx); }};
  if (path == kClusterStatusPath)
    return BlockingCall{[&ctx] { return handle_cluster_status(ctx); }};
  if (path == kDashboardPath) return handle_dashboard(ctx);
  if (path == kModelsPath) return handle_models(ctx, "");
  if (path.starts_with(kModelsPrefix)) {
    return handle_models(ctx, percent_decode(std::string_view(path).substr(kModelsPrefix.size())));
  }
  if (path == kChatPath) return route_generation(ctx, req, ApiKind::kChat, tenant);
  if (path == kCompletionsPath) return route_generation(ctx, req, ApiKind::kCompletion, tenant);
  if (path.starts_with(kCachesPath)) return route_caches(ctx, req, tenant);
  if (path == kLoadLoraPath) return route_json(ctx, req, handle_load_lora);
  if (path == kUnloadLoraPath) return route_json(ctx, req, handle_unload_lora);
  if (!batch_route_methods(path).empty()) return route_batch_api(ctx, req);
  if (!fine_tuning_route_methods(path).empty()) return route_fine_tuning(ctx, req);
  if (!responses_route_methods(path).empty()) return route_responses(ctx, req, tenant);
  if (path == "/tokenize") return route_json(ctx, req, handle_tokenize);
  return route_json(ctx, req, handle_detokenize);
}

}  // namespace keel::server
