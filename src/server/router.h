// Routing of one HTTP request: CORS preflight, API-key check, method/path dispatch, JSON body
// parsing and model-name check. Synchronous routes (health, metrics, models, tokenize,
// detokenize, every error) produce an HttpResponse here; the two generation routes produce a
// validated GenerationSpec for the asynchronous generation handler.
//
//   OPTIONS *                      204 preflight (never authenticated)
//   GET  /health                   200 ready, 503 loading, draining, or (a fleet) no healthy TE
//   GET  /metrics                  Prometheus text
//   GET  /v1/models[/{id}]         model list / model object (404 for another id)
//   POST /v1/chat/completions      → GenerationSpec (kind kChat)
//   POST /v1/completions           → GenerationSpec (kind kCompletion)
//   POST /tokenize, /detokenize    vLLM shapes
//   POST /v1/caches                → CacheCall (context caching, cache_routes.h)
//   GET  /v1/caches[/{id}], DELETE /v1/caches/{id}
//   GET  /v1/cluster/status        the fleet, in front of one (ServerDeps::cluster_status)
//   GET  /dashboard                the fleet as a live HTML page (a gateway only; dashboard_page.h)
//   POST /v1/load_lora_adapter, /v1/unload_lora_adapter
//                                  LoRA adapters at run time (lora_routes.h)
//   POST /v1/files (multipart), GET /v1/files, GET/DELETE /v1/files/{id},
//   GET  /v1/files/{id}/content    the Batch API's files (batch_routes.h)
//   POST /v1/batches, GET /v1/batches[/{id}], POST /v1/batches/{id}/cancel
//                                  the Batch API: lines run by the BatchRunner (batch_runner.h)
//   POST /v1/responses             → ResponseCall, or a queued background Response
//   GET/DELETE /v1/responses/{id}, GET .../input_items, POST .../cancel
//                                  the Responses API (responses_routes.h)
//   POST /v1/fine_tuning/jobs, GET /v1/fine_tuning/jobs[/{id}], POST .../{cancel,pause,resume},
//   GET  .../{events,checkpoints}  the fine-tuning API (fine_tuning_routes.h)
// Known path with another method → 405 (with Allow); unknown path → 404.
// With an api_key or an API keys file configured, /v1/*, /tokenize and /detokenize need
// `Authorization: Bearer` with that key or one of the file's (docs/tenants.md). A tenant's
// requests have every cache_salt scoped to the tenant (scoped_cache_salt) and carry its name and
// weight to the engine.
//
// Thread safety: stateless functions over a shared ServerContext (see server_context.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <variant>

#include "server/cache_routes.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/responses_run.h"
#include "server/schema_order.h"
#include "server/server_context.h"

namespace keel::server {

struct GenerationCall {
  GenerationSpec spec;
};
struct CacheCall {
  CacheSpec spec;
};
// A foreground /v1/responses run (responses_handler.h).
struct ResponseCall {
  ResponsePlan plan;
};
// A handler that waits on other processes (a cluster gateway's /metrics and /v1/cluster/status
// ask the job executors): the connection runs it off the io threads (the server's control pool).
struct BlockingCall {
  std::function<HttpResponse()> run;
};

using RouteOutcome =
    std::variant<HttpResponse, GenerationCall, CacheCall, BlockingCall, ResponseCall>;

// Whether a request may proceed (its path needs no key, none is configured, or its bearer key is
// api_key or one of the keys file's), and the tenant of a keys-file key.
struct Authentication {
  bool ok = true;
  std::optional<TenantGrant> tenant;
};
Authentication authenticate(ServerContext& ctx, const HttpRequest& req);

RouteOutcome route_request(ServerContext& ctx, const HttpRequest& req, const Authentication& auth);
// route_request(ctx, req, authenticate(ctx, req)).
RouteOutcome route_request(ServerContext& ctx, const HttpRequest& req);

// The client's x-request-id (when printable and ≤ 128 bytes) or a fresh one.
std::string request_id_for(ServerContext& ctx, const HttpRequest& req);

// Headers every response carries: x-request-id and, for allowed origins, CORS.
HeaderList common_headers(const ServerContext& ctx, const HttpRequest& req,
                          std::string_view request_id);

// A request body as JSON, refused (400) when malformed or past the limits below. Shared with the
// batch runner, which parses each input line as a body.
ApiResult<nlohmann::json> parse_json_text(std::string_view text);

// A generation body validated as the route does it: fields (generation_request.h), model name,
// queue capacity, cache_id, then draining/readiness and the chat template. Shared with the batch
// runner, which runs each batch line through it. `text` is the body's JSON text, from which the
// JSON Schemas are read again in the order sent (schema_order.h).
ApiResult<GenerationSpec> generation_spec_for(ServerContext& ctx, const nlohmann::json& body,
                                              ApiKind kind, const BodyText& text);

// What a JSON text would build, counted without building it (strings skipped): the deepest
// nesting of arrays/objects, how many arrays/objects and how many values (scalars, keys and
// containers). Counting stops once max_depth passes `depth_limit`. Malformed text gives some
// counts; the parser then refuses it.
struct JsonShape {
  int max_depth = 0;
  int64_t containers = 0;
  int64_t values = 0;
};
JsonShape json_shape(std::string_view text, int depth_limit);
// json_shape(text, limit).max_depth.
int json_nesting_depth(std::string_view text, int limit);
// Bodies past these are refused (400) before parsing: 64 levels, 65,536 arrays/objects (a message
// is one to three), 524,288 values (token-id prompts, logit_bias entries).
inline constexpr int kMaxJsonDepth = 64;
inline constexpr int64_t kMaxJsonContainers = int64_t{1} << 16;
inline constexpr int64_t kMaxJsonValues = int64_t{1} << 19;

// Utility routes (utility_routes.cpp).
HttpResponse handle_health(const ServerContext& ctx);
HttpResponse handle_metrics(const ServerContext& ctx);
// GET /v1/cluster/status: ServerDeps::cluster_status's document (a gateway only).
inline constexpr std::string_view kClusterStatusPath = "/v1/cluster/status";
HttpResponse handle_cluster_status(const ServerContext& ctx);
// GET /dashboard: the fleet dashboard (text/html), 404 on a server in front of one engine.
HttpResponse handle_dashboard(const ServerContext& ctx);
HttpResponse handle_models(const ServerContext& ctx, std::string_view model_id);  // "" = list
HttpResponse handle_tokenize(const ServerContext& ctx, const nlohmann::json& body);
HttpResponse handle_detokenize(const ServerContext& ctx, const nlohmann::json& body);
// 404 unless `model` is empty, the served model name or a loaded LoRA adapter's name.
std::optional<ApiError> check_model(const ServerContext& ctx, std::string_view model);

}  // namespace keel::server
