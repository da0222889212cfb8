// run_cache_create: the asynchronous half of POST /v1/caches, on the connection's strand.
// Tokenizes the cache's messages (rendered without the generation prompt) or prompt, submits one
// engine request that computes its KV and keeps it pinned for the ttl
// (GenerationRequest::retain_as), waits for it, registers the cache and answers with the cache
// object. A client that goes away meanwhile aborts the request (nothing is pinned); a full pin
// budget answers 429.
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
