// OpenAI's fine-tuning API over the ServerContext's FineTuningStore and FineTuningRunner:
//   POST /v1/fine_tuning/jobs                  {model, training_file, validation_file?,
//                                              hyperparameters | method, seed?, suffix?,
//                                              metadata?} (fine_tuning_request.h) → job
//                                              (validating_files)
//   GET  /v1/fine_tuning/jobs                  list, newest first; ?limit= (1-100, default 20)
//                                              &after=
//   GET  /v1/fine_tuning/jobs/{id}             the job; 404 fine_tuning_job_not_found
//   POST /v1/fine_tuning/jobs/{id}/cancel      → cancelled (at once; training stops within ~100 ms)
//   POST /v1/fine_tuning/jobs/{id}/pause       queued/running → paused (its state saved)
//   POST /v1/fine_tuning/jobs/{id}/resume      paused → queued (continues where it stopped)
//   GET  /v1/fine_tuning/jobs/{id}/events      newest first; ?limit= (1-1000, default 20) &after=
//   GET  /v1/fine_tuning/jobs/{id}/checkpoints newest first; ?limit= (1-100, default 10) &after=
// `model` must be the served model (404 model_not_found otherwise; 400 for a LoRA or fine-tuned
// model); files must exist (404 file_not_found, param training_file / validation_file) with
// purpose "fine-tune" (400). A server without a trainer (ServerDeps::fine_tuner: `keel serve
// --no-fine-tuning`, semi-PD or pipeline mode, the cluster gateway) answers 400
// fine_tuning_unavailable to POST; at most kMaxUnfinishedFineTuningJobs jobs may be unfinished
// (429 beyond).
//
// Thread safety: functions over a ServerContext (its store and runner are thread-safe).
#pragma once

#include <string_view>

#include "server/http_message.h"
#include "server/server_context.h"

namespace keel::server {

// The methods a fine-tuning path allows ("GET, POST", ...), or "" when it is none of them.
std::string_view fine_tuning_route_methods(std::string_view path);
// A request on such a path (method already checked).
HttpResponse route_fine_tuning(ServerContext& ctx, const HttpRequest& req);

}  // namespace keel::server
