// Routing of one HTTP request: CORS preflight, API-key check, method/path dispatch, JSON body
// parsing and model-name check. Synchronous routes (health, metrics, models, tokenize,
// detokenize, every error) produce an HttpResponse here; the two generation routes produce a
// validated GenerationSpec for the asynchronous generation handler.
//
//   OPTIONS *                      204 preflight (never authenticated)
//   GET  /health                   200 ready, 503 loading or draining
//   GET  /metrics                  Prometheus text
//   GET  /v1/models[/{id}]         model list / model object (404 for another id)
//   POST /v1/chat/completions      → GenerationSpec (kind kChat)
//   POST /v1/completions           → GenerationSpec (kind kCompletion)
//   POST /tokenize, /detokenize    vLLM shapes
//   POST /v1/caches                → CacheCall (context caching, cache_routes.h)
//   GET  /v1/caches[/{id}], DELETE /v1/caches/{id}
// Known path with another method → 405 (with Allow); unknown path → 404.
// With an api_key configured, /v1/*, /tokenize and /detokenize need `Authorization: Bearer`.
//
// Thread safety: stateless functions over a shared ServerContext (see server_context.h).
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "server/cache_routes.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/server_context.h"

namespace keel::server {

struct GenerationCall {
  GenerationSpec spec;
};
struct CacheCall {
  CacheSpec spec;
};

using RouteOutcome = std::variant<HttpResponse, GenerationCall, CacheCall>;

RouteOutcome route_request(ServerContext& ctx, const HttpRequest& req);

// The client's x-request-id (when printable and ≤ 128 bytes) or a fresh one.
std::string request_id_for(ServerContext& ctx, const HttpRequest& req);

// Headers every response carries: x-request-id and, for allowed origins, CORS.
HeaderList common_headers(const ServerContext& ctx, const HttpRequest& req,
                          std::string_view request_id);

// Largest nesting depth of arrays/objects in `text` (strings skipped); stops counting past
// `limit`. Bodies nested deeper than kMaxJsonDepth are refused before parsing.
int json_nesting_depth(std::string_view text, int limit);
inline constexpr int kMaxJsonDepth = 64;

// Utility routes (utility_routes.cpp).
HttpResponse handle_health(const ServerContext& ctx);
HttpResponse handle_metrics(const ServerContext& ctx);
HttpResponse handle_models(const ServerContext& ctx, std::string_view model_id);  // "" = list
HttpResponse handle_tokenize(const ServerContext& ctx, const nlohmann::json& body);
HttpResponse handle_detokenize(const ServerContext& ctx, const nlohmann::json& body);
// 404 unless `model` is empty or the served model name.
std::optional<ApiError> check_model(const ServerContext& ctx, std::string_view model);

}  // namespace keel::server
