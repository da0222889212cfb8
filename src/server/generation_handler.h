// run_generation: the asynchronous half of /v1/chat/completions and /v1/completions, on the
// connection's strand. Steps: prepare prompts (tokenizer pool or io thread) → submit prompts × n
// engine requests (seed + i) whose sinks post to the strand → process events per choice
// (ChoiceOutput: detokenize, cut at stop strings, logprobs) → stream SSE chunks or build the JSON
// body. The engine finishes requests (stop strings included); a client disconnect (peer watch or
// failed write), a timeout or an error aborts the affected engine requests; every submitted request
// is aborted or finished before run_generation returns (or its frame is destroyed).
//
// The driver (placing, the event loop, disconnects, timeouts, the final write) is shared with
// the Responses API (responses_handler.h) through GenerationWork (generation_work.h).
//
// Thread safety: strand-confined (runs inside HttpConnection::run()).
#pragma once

#include <string>

#include "server/generation_request.h"
#include "server/generation_work.h"
#include "server/http_connection.h"
#include "server/net.h"

namespace keel::server {

// Drives `work` on the connection (its prompts already prepared); returns as run_generation.
net::awaitable<bool> run_generation_work(HttpConnection& conn, GenerationWork& work,
                                         const HeaderList& headers);

// Returns false when the connection can no longer be used (client gone, write failed).
net::awaitable<bool> run_generation(HttpConnection& conn, GenerationSpec spec, HeaderList headers,
                                    std::string request_id);

}  // namespace keel::server
