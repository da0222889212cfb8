// The agent program a call belongs to, for the engine's program-aware admission
// (engine/program_priority.h, docs/agents.md): the client's `X-Program-Id` header when it sends
// one (any agent framework can set a header), else what the route knows (a Responses chain's
// first response id; else the call's `prompt_cache_key`; nothing for a lone chat call). Scoped by
// the tenant, so two tenants' ids never name one program.
#pragma once

#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/http_message.h"

namespace keel::server {

struct TenantGrant;

inline constexpr std::string_view kProgramIdHeader = "x-program-id";
inline constexpr size_t kMaxProgramIdBytes = 256;

// The program of `req`: its header, else `fallback` ("" = none); 400 for a header that is empty,
// longer than kMaxProgramIdBytes or holds control characters.
[[nodiscard]] ApiResult<std::string> program_of(const HttpRequest& req, const TenantGrant* tenant,
                                                std::string_view fallback = {});

}  // namespace keel::server
