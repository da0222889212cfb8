// run_response: a foreground /v1/responses run on the connection's strand — its prompt prepared
// (tokenizer pool or io thread; a 400 such as context_length_exceeded names the Responses field),
// then a ResponseRun driven by run_generation_work (generation_handler.h): streamed as the
// Responses events or answered with the Response object, stored when it ends (responses_run.h).
//
// Thread safety: strand-confined (runs inside HttpConnection::run()).
#pragma once

#include "server/http_connection.h"
#include "server/net.h"
#include "server/responses_run.h"

namespace keel::server {

// Returns false when the connection can no longer be used (client gone, write failed).
net::awaitable<bool> run_response(HttpConnection& conn, ResponsePlan plan, HeaderList headers);

}  // namespace keel::server
