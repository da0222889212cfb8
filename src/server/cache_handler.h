// run_cache_create: the asynchronous half of POST /v1/caches, on the connection's strand.
// Tokenizes the cache's messages (rendered without the generation prompt) or prompt, submits one
// engine request that computes its KV and keeps it pinned for the ttl
// (GenerationRequest::retain_as, with the server's description of the cache), waits for it and
// answers with the cache object. From then on the engine owns the cache (expiry, salt, release).
// A client that goes away meanwhile aborts the request and releases whatever was pinned; a full
// pin budget answers 400 cache_quota_exceeded.
//
// Thread safety: strand-confined (runs inside HttpConnection::run()).
#pragma once

#include <string>

#include "server/cache_routes.h"
#include "server/http_connection.h"
#include "server/net.h"

namespace keel::server {

net::awaitable<bool> run_cache_create(HttpConnection& conn, CacheSpec spec, HeaderList headers,
                                      std::string request_id);

}  // namespace keel::server
