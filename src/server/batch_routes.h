// The OpenAI Files and Batches endpoints (the Batch API), synchronous routes over the
// ServerContext's FileStore, BatchStore and BatchRunner:
//   POST   /v1/files                 multipart/form-data: purpose=batch|fine-tune, file=<JSONL>
//                                    → File
//   GET    /v1/files                 {"object": "list", data, first_id, last_id, has_more};
//                                    ?purpose= &limit= (1-10000, default 10000) &after= &order=
//   GET    /v1/files/{id}            File; 404 file_not_found
//   GET    /v1/files/{id}/content    the bytes (application/octet-stream)
//   DELETE /v1/files/{id}            {"id", "object": "file", "deleted": true}
//   POST   /v1/batches               {input_file_id, endpoint, completion_window: "24h",
//                                    metadata?} → Batch (status validating)
//   GET    /v1/batches               list, newest first; ?limit= (1-100, default 20) &after=
//   GET    /v1/batches/{id}          Batch; 404 batch_not_found
//   POST   /v1/batches/{id}/cancel   Batch (cancelling/cancelled); 409 when finalizing or done
// Endpoints: /v1/chat/completions and /v1/completions. Purposes: "batch" and "fine-tune" (a
// fine-tuning job's data, fine_tuning_routes.h) may be uploaded; the batch runner writes
// "batch_output" and "batch_error" files, the fine-tuning runner "fine-tune-results".
//
// Thread safety: functions over a ServerContext (its stores and runner are thread-safe).
#pragma once

#include <string_view>

#include "server/http_message.h"
#include "server/server_context.h"

namespace keel::server {

// The methods a Files/Batches path allows ("GET, POST", ...), or "" when it is none of them.
std::string_view batch_route_methods(std::string_view path);
// A request on such a path (method already checked).
HttpResponse route_batch_api(ServerContext& ctx, const HttpRequest& req);

}  // namespace keel::server
