// /v1/fine_tuning/jobs (see fine_tuning_routes.h).
#include "server/fine_tuning_routes.h"

#include <fmt/format.h>

#include <ctime>

#include "server/api_list.h"
#include "server/fine_tuning_request.h"
#include "server/fine_tuning_runner.h"
#include "server/http_framing.h"
#include "server/lora_routes.h"
#include "server/response_builder.h"
#include "server/router.h"

namespace keel::server {
namespace {

constexpr std::string_view kJobsPath = "/v1/fine_tuning/jobs";

HttpResponse ok_json(const Json& j) { return HttpResponse::json(200, dump_json(j)); }

// The file `id` as a fine-tuning input of field `param`: 404 when unknown, 400 for another
// purpose.
std::optional<ApiError> check_file(const ServerContext& ctx, const std::string& id,
                                   const char* param) {
  std::optional<StoredFile> f = ctx.files.find(id);
  if (!f) {
    ApiError e = object_not_found("File", id, "file_not_found");
    e.param = param;
    return e;
  }
  if (f->purpose != "fine-tune") {
    return ApiError::bad_request(
        fmt::format("File {} has purpose '{}'; a fine-tuning job's files must have purpose "
                    "'fine-tune'.",
                    id, f->purpose),
        param);
  }
  return std::nullopt;
}

ApiResult<FineTuningJob> job_for(ServerContext& ctx, const FineTuningCreate& c) {
  if (c.model != ctx.config.served_model_name) {
    if (is_lora_model(ctx, c.model)) {
      return ApiError::bad_request(
          fmt::format("`{}` is a LoRA adapter; fine-tune the base model `{}` instead.", c.model,
                      ctx.config.served_model_name),
          "model");
    }
    return ApiError::model_not_found(c.model);
  }
  if (auto e = check_file(ctx, c.training_file, "training_file")) return *e;
  if (c.validation_file) {
    if (auto e = check_file(ctx, *c.validation_file, "validation_file")) return *e;
  }
  if (ctx.draining.load(std::memory_order_acquire)) {
    return ApiError::unavailable("The server is shutting down.");
  }
  if (ctx.fine_tuning.num_unfinished() >= kMaxUnfinishedFineTuningJobs) {
    return ApiError::rate_limited(fmt::format(
        "At most {} fine-tuning jobs may be unfinished at once; wait for one to end or cancel one.",
        kMaxUnfinishedFineTuningJobs));
  }
  FineTuningJob job;
  const std::string hex = ctx.ids.next();
  job.id = "ftjob-" + hex.substr(0, 24);
  job.model = c.model;
  job.training_file = c.training_file;
  job.validation_file = c.validation_file;
  job.suffix = c.suffix;
  job.hyperparameters = c.hyperparameters;
  // Unseeded: 31 bits of the id's other half.
  job.seed = c.seed
                 ? *c.seed
                 : static_cast<int64_t>(std::stoull(hex.substr(24, 8), nullptr, 16) & 0x7fffffffu);
  job.metadata = c.metadata;
  job.created_at = static_cast<int64_t>(std::time(nullptr));
  return job;
}

HttpResponse create_job(ServerContext& ctx, const HttpRequest& req) {
  if (ctx.fine_tuning_runner == nullptr) {
    return HttpResponse::error(ApiError::bad_request(
        "Fine-tuning is off on this server (keel serve --no-fine-tuning, a semi-PD or pipelined "
        "engine, or a cluster gateway).",
        std::nullopt, "fine_tuning_unavailable"));
  }
  ApiResult<Json> body = parse_json_text(req.body);
  if (!body.ok()) return HttpResponse::error(body.error());
  ApiResult<FineTuningCreate> create = parse_fine_tuning_create(body.value());
  if (!create.ok()) return HttpResponse::error(create.error());
  ApiResult<FineTuningJob> job = job_for(ctx, create.value());
  if (!job.ok()) return HttpResponse::error(job.error());
  ApiResult<FineTuningJob> submitted = ctx.fine_tuning_runner->submit(job.value());
  if (!submitted.ok()) return HttpResponse::error(submitted.error());
  return ok_json(submitted.value().to_json());
}

HttpResponse list_jobs(ServerContext& ctx, const HttpRequest& req) {
  ApiResult<size_t> limit = query_limit(req, 20, 100);
  if (!limit.ok()) return HttpResponse::error(limit.error());
  const FineTuningStore::Page page =
      ctx.fine_tuning.list(limit.value(), query_param(req.target, "after").value_or(""));
  Json data = Json::array();
  for (const FineTuningJob& j : page.jobs) data.push_back(j.to_json());
  return ok_json(list_object(std::move(data), page.has_more));
}

HttpResponse list_events(ServerContext& ctx, const HttpRequest& req, const std::string& id) {
  ApiResult<size_t> limit = query_limit(req, 20, 1000);
  if (!limit.ok()) return HttpResponse::error(limit.error());
  const FineTuningStore::EventPage page =
      ctx.fine_tuning.events(id, limit.value(), query_param(req.target, "after").value_or(""));
  Json data = Json::array();
  for (const FtEvent& e : page.events) data.push_back(e.to_json());
  return ok_json(list_object(std::move(data), page.has_more));
}

HttpResponse list_checkpoints(const HttpRequest& req, const FineTuningJob& job) {
  ApiResult<size_t> limit = query_limit(req, 10, 100);
  if (!limit.ok()) return HttpResponse::error(limit.error());
  const std::string after = query_param(req.target, "after").value_or("");
  Json data = Json::array();
  bool started = after.empty(), has_more = false;
  for (auto it = job.checkpoints.rbegin(); it != job.checkpoints.rend(); ++it) {
    if (!started) {
      started = it->id == after;
      continue;
    }
    if (data.size() == limit.value()) {
      has_more = true;
      break;
    }
    data.push_back(it->to_json(job.id));
  }
  return ok_json(list_object(std::move(data), has_more));
}

HttpResponse route_job(ServerContext& ctx, const HttpRequest& req, const SubPath& sp) {
  for (const auto& [name, action] :
       {std::pair{"cancel", FtAction::kCancel}, std::pair{"pause", FtAction::kPause},
        std::pair{"resume", FtAction::kResume}}) {
    if (sp.action != name) continue;
    if (ctx.fine_tuning_runner == nullptr) {
      return HttpResponse::error(
          object_not_found("fine-tuning job", sp.id, "fine_tuning_job_not_found"));
    }
    ApiResult<FineTuningJob> r = ctx.fine_tuning_runner->act(sp.id, action);
    if (!r.ok()) return HttpResponse::error(r.error());
    return ok_json(r.value().to_json());
  }
  std::optional<FineTuningJob> job = ctx.fine_tuning.find(sp.id);
  if (!job) {
    return HttpResponse::error(
        object_not_found("fine-tuning job", sp.id, "fine_tuning_job_not_found"));
  }
  if (sp.action == "events") return list_events(ctx, req, sp.id);
  if (sp.action == "checkpoints") return list_checkpoints(req, *job);
  return ok_json(job->to_json());
}

}  // namespace

std::string_view fine_tuning_route_methods(std::string_view path) {
  if (path == kJobsPath) return "GET, POST";
  std::optional<SubPath> sp = sub_path(path, kJobsPath);
  if (!sp) return {};
  if (sp->action.empty() || sp->action == "events" || sp->action == "checkpoints") return "GET";
  if (sp->action == "cancel" || sp->action == "pause" || sp->action == "resume") return "POST";
  return {};
}

HttpResponse route_fine_tuning(ServerContext& ctx, const HttpRequest& req) {
  if (req.path == kJobsPath) {
    return req.method == "POST" ? create_job(ctx, req) : list_jobs(ctx, req);
  }
  return route_job(ctx, req, *sub_path(req.path, kJobsPath));
}

}  // namespace keel::server
