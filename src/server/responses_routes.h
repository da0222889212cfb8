// The routes of OpenAI's Responses API (/v1/responses) over the ServerContext's ResponsesStore
// and ResponsesBackground:
//   POST   /v1/responses                     create: a foreground run (ResponseCall, streamed or
//                                            not), or with `background` the queued Response
//   GET    /v1/responses/{id}                the stored Response; 404 response_not_found
//   DELETE /v1/responses/{id}                {"id", "object": "response", "deleted": true}
//                                            (a background run is cancelled first)
//   GET    /v1/responses/{id}/input_items    {"object": "list", data, first_id, last_id,
//                                            has_more}; ?order=asc|desc (default desc)
//                                            &limit= (1-100, default 20) &after=<item id>
//   POST   /v1/responses/{id}/cancel         the Response (cancelled); background ones only
// Create assembles the conversation — the stored chain's items when previous_response_id is
// given (404 previous_response_not_found when unknown), then this turn's input, after
// `instructions` — maps it to chat messages (responses_items.h) and validates the chat body the
// request means through generation_spec_for, the chat route's own checks.
//
// Thread safety: functions over a ServerContext (its store and runner are thread-safe).
#pragma once

#include <string_view>

#include "server/router.h"

namespace keel::server {

// The methods a /v1/responses path allows, or "" when it is none of them.
std::string_view responses_route_methods(std::string_view path);
// A request on such a path (method already checked).
// `tenant` (null: none): the API key's tenant, whose cache_salt scope and name the runs carry.
RouteOutcome route_responses(ServerContext& ctx, const HttpRequest& req,
                             const TenantGrant* tenant = nullptr);

// The plan of a create request (exposed for tests): the same steps as the route, without
// queueing a background run.
ApiResult<ResponsePlan> plan_response(ServerContext& ctx, std::string_view body_text);

}  // namespace keel::server
