// /v1/responses (see responses_routes.h).
#include "server/responses_routes.h"

#include <fmt/format.h>

#include <charconv>
#include <ctime>
#include <optional>
#include <string>

#include "server/http_framing.h"
#include "server/json_fields.h"
#include "server/program_id.h"
#include "server/response_builder.h"
#include "server/responses_background.h"
#include "server/responses_items.h"

namespace keel::server {
namespace {

constexpr std::string_view kResponsesPath = "/v1/responses";
constexpr size_t kDefaultInputItemsLimit = 20;
constexpr size_t kMaxInputItemsLimit = 100;

// "/v1/responses/{id}[/{action}]" → id and action; nullopt for anything else.
struct ResponsePathParts {
  std::string id;
  std::string_view action;  // "", "input_items" or "cancel"
};
std::optional<ResponsePathParts> parse_response_path(std::string_view path) {
  if (!path.starts_with(kResponsesPath) || path.size() <= kResponsesPath.size() + 1 ||
      path[kResponsesPath.size()] != '/') {
    return std::nullopt;
  }
  std::string_view rest = path.substr(kResponsesPath.size() + 1);
  const size_t slash = rest.find('/');
  ResponsePathParts p;
  p.id = percent_decode(rest.substr(0, slash));
  if (slash != std::string_view::npos) p.action = rest.substr(slash + 1);
  if (p.id.empty() || (p.action != "" && p.action != "input_items" && p.action != "cancel")) {
    return std::nullopt;
  }
  return p;
}

HttpResponse ordered_response(const OrderedJson& j) {
  return HttpResponse::json(200, dump_ordered_json(j));
}

// The `messages` + generation fields of the turn as the chat route's body, validated by it.
ApiResult<GenerationSpec> conversation_spec(ServerContext& ctx, const ResponsesRequest& r,
                                            const OrderedJson& items) {
  ApiResult<OrderedJson> messages = chat_messages(r.instructions, items);
  if (!messages.ok()) return messages.error();
  OrderedJson chat = r.chat_fields;
  chat["messages"] = std::move(messages.value());
  chat["stream"] = true;  // ResponseRun observes the streamed updates (responses_run.h)
  const std::string text = dump_ordered_json(chat);
  ApiResult<Json> body = parse_json_text(text);
  if (!body.ok()) return as_responses_error(body.error());
  ApiResult<GenerationSpec> spec =
      generation_spec_for(ctx, body.value(), ApiKind::kChat, {text, ""});
  if (!spec.ok()) return as_responses_error(spec.error());
  return spec;
}

RouteOutcome create_response(ServerContext& ctx, const HttpRequest& req,
                             const TenantGrant* tenant) {
  ApiResult<ResponsePlan> plan = plan_response(ctx, req.body);
  if (!plan.ok()) return HttpResponse::error(plan.error());
  ResponsePlan& p = plan.value();
  if (tenant != nullptr) {  // tenants.h: its prefix-cache scope, and its share of the engine
    p.spec.cache_salt = scoped_cache_salt(tenant->cache_scope, p.spec.cache_salt);
    p.spec.tenant = tenant->tenant;
    p.spec.tenant_weight = tenant->weight;
  }
  // The agent program (program_id.h): the chain's first response; for one that starts a chain, its
  // prompt_cache_key when it has one (a client resending the history itself), else itself.
  const std::string& previous = p.request.previous_response_id;
  const std::string& cache_key = p.spec.prompt_cache_key;
  ApiResult<std::string> program = program_of(req, tenant,
                                              !previous.empty() ? ctx.responses.chain_root(previous)
                                              : !cache_key.empty() ? cache_key
                                                                   : p.id);
  if (!program.ok()) return HttpResponse::error(program.error());
  p.spec.program = std::move(program.value());
  if (!p.request.background) return ResponseCall{std::move(p)};
  StoredResponse queued;
  queued.id = p.id;
  queued.input_items = p.request.input_items;
  queued.previous_response_id = p.request.previous_response_id;
  queued.response = response_object(p, ResponseStatus::kQueued, OrderedJson::array(), nullptr);
  if (Status st = ctx.responses.put(queued); !st.ok()) {
    return HttpResponse::error(ApiError::from_status(st));
  }
  ctx.responses_background->submit(std::move(p));
  return ordered_response(queued.response);
}

// 409 for a response another gateway of the cluster still runs (a shared store): only that
// gateway can stop it.
ApiError runs_elsewhere(const StoredResponse& r) {
  ApiError e = ApiError::bad_request(
      fmt::format("Response '{}' is still {} on another gateway of this cluster; cancel or "
                  "delete it through that gateway, or once it has finished.",
                  r.id, response_status_name(r.status())),
      "response_id", "response_running_elsewhere");
  e.status = 409;
  return e;
}

HttpResponse retrieve_response(ServerContext& ctx, const std::string& id) {
  ApiResult<StoredResponse> r = ctx.responses.lookup(id);
  if (!r.ok()) return HttpResponse::error(r.error());
  return ordered_response(r.value().response);
}

HttpResponse delete_response(ServerContext& ctx, const std::string& id) {
  ApiResult<StoredResponse> r = ctx.responses.lookup(id);
  if (!r.ok()) return HttpResponse::error(r.error());
  if (ctx.responses.runs_elsewhere(r.value())) {
    return HttpResponse::error(runs_elsewhere(r.value()));
  }
  if (!is_finished(r.value().status())) (void)ctx.responses_background->cancel(id);
  if (!ctx.responses.remove(id)) return HttpResponse::error(response_not_found(id));
  return ordered_response({{"id", id}, {"object", "response"}, {"deleted", true}});
}

ApiResult<size_t> input_items_limit(const HttpRequest& req) {
  std::optional<std::string> text = query_param(req.target, "limit");
  if (!text) return kDefaultInputItemsLimit;
  size_t value = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < 1 ||
      value > kMaxInputItemsLimit) {
    return ApiError::bad_request(fmt::format("`limit` must be an integer in [1, {}], got \"{}\"",
                                             kMaxInputItemsLimit, text->substr(0, 32)),
                                 "limit");
  }
  return value;
}

HttpResponse list_input_items(ServerContext& ctx, const HttpRequest& req, const std::string& id) {
  ApiResult<StoredResponse> found = ctx.responses.lookup(id);
  if (!found.ok()) return HttpResponse::error(found.error());
  const StoredResponse* r = &found.value();
  ApiResult<size_t> limit = input_items_limit(req);
  if (!limit.ok()) return HttpResponse::error(limit.error());
  const std::string order = query_param(req.target, "order").value_or("desc");
  if (order != "asc" && order != "desc") {
    return HttpResponse::error(
        ApiError::bad_request("`order` must be \"asc\" or \"desc\"", "order"));
  }
  std::vector<const OrderedJson*> items;
  for (const OrderedJson& item : r->input_items) items.push_back(&item);
  if (order == "desc") std::reverse(items.begin(), items.end());
  size_t start = 0;
  if (std::optional<std::string> after = query_param(req.target, "after"); after) {
    start = items.size();  // an unknown item: an empty page
    for (size_t i = 0; i < items.size(); ++i) {
      if ((*items[i])["id"] == *after) start = i + 1;
    }
  }
  OrderedJson data = OrderedJson::array();
  for (size_t i = start; i < items.size() && data.size() < limit.value(); ++i) {
    data.push_back(*items[i]);
  }
  const bool has_more = start + data.size() < items.size();
  OrderedJson first = data.empty() ? OrderedJson(nullptr) : data.front()["id"];
  OrderedJson last = data.empty() ? OrderedJson(nullptr) : data.back()["id"];
  return ordered_response({{"object", "list"},
                           {"data", std::move(data)},
                           {"first_id", std::move(first)},
                           {"last_id", std::move(last)},
                           {"has_more", has_more}});
}

HttpResponse cancel_response(ServerContext& ctx, const std::string& id) {
  ApiResult<StoredResponse> found = ctx.responses.lookup(id);
  if (!found.ok()) return HttpResponse::error(found.error());
  if (ctx.responses.runs_elsewhere(found.value())) {
    return HttpResponse::error(runs_elsewhere(found.value()));
  }
  ApiResult<StoredResponse> r = ctx.responses_background->cancel(id);
  if (!r.ok()) return HttpResponse::error(r.error());
  return ordered_response(r.value().response);
}

}  // namespace

std::string_view responses_route_methods(std::string_view path) {
  if (path == kResponsesPath) return "POST";
  std::optional<ResponsePathParts> p = parse_response_path(path);
  if (!p) return {};
  if (p->action.empty()) return "GET, DELETE";
  return p->action == "cancel" ? "POST" : "GET";
}

ApiResult<ResponsePlan> plan_response(ServerContext& ctx, std::string_view body_text) {
  ApiResult<Json> body = parse_json_text(body_text);
  if (!body.ok()) return body.error();
  OrderedJson ordered;
  try {
    ordered = OrderedJson::parse(body_text);  // valid: parsed above
  } catch (const OrderedJson::exception& e) {
    return ApiError::bad_request(fmt::format("Malformed JSON body: {}", e.what()));
  }
  const auto new_id = [&ctx](std::string_view prefix) {
    return std::string(prefix) + ctx.ids.next();
  };
  ApiResult<ResponsesRequest> request = parse_responses_request(body.value(), ordered, new_id);
  if (!request.ok()) return request.error();
  ResponsePlan plan;
  plan.request = std::move(request.value());
  const ResponsesRequest& r = plan.request;
  if (auto e = check_model(ctx, r.model)) return *e;
  OrderedJson items = OrderedJson::array();
  if (!r.previous_response_id.empty()) {
    ApiResult<OrderedJson> history = ctx.responses.history(r.previous_response_id);
    if (!history.ok()) return history.error();
    items = std::move(history.value());
  }
  for (const OrderedJson& item : r.input_items) items.push_back(item);
  ApiResult<GenerationSpec> spec = conversation_spec(ctx, r, items);
  if (!spec.ok()) return spec.error();
  plan.spec = std::move(spec.value());
  plan.key = ctx.ids.next();
  plan.id = "resp_" + plan.key;
  plan.created_at = static_cast<int64_t>(std::time(nullptr));
  plan.model = r.model.empty() ? ctx.config.served_model_name : r.model;
  return plan;
}

RouteOutcome route_responses(ServerContext& ctx, const HttpRequest& req,
                             const TenantGrant* tenant) {
  if (req.path == kResponsesPath) return create_response(ctx, req, tenant);
  std::optional<ResponsePathParts> p = parse_response_path(req.path);
  if (!p) return HttpResponse::error(ApiError::path_not_found(req.method, req.path));
  if (p->action == "input_items") return list_input_items(ctx, req, p->id);
  if (p->action == "cancel") return cancel_response(ctx, p->id);
  return req.method == "DELETE" ? delete_response(ctx, p->id) : retrieve_response(ctx, p->id);
}

}  // namespace keel::server
