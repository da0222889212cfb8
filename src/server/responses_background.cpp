// ResponsesBackground (see responses_background.h).
#include "server/responses_background.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "server/prompt_preparation.h"

namespace keel::server {
namespace {

ApiError response_shutdown_error() {
  ApiError e = ApiError::unavailable("The server stopped before this response finished.");
  e.code = "server_shutdown";
  return e;
}

// Marks a stored response failed with `error` unless it finished (or was cancelled) already.
void fail_stored_response(ServerContext& ctx, std::string_view id, const ApiError& error) {
  ctx.responses.update(id, [&error](StoredResponse& r) {
    if (is_finished(r.status())) return;
    r.response["status"] = response_status_name(ResponseStatus::kFailed);
    r.response["error"] = response_error(error);
  });
}

}  // namespace

ResponsesBackground::ResponsesBackground(ServerContext& ctx, int32_t num_workers) : ctx_(ctx) {
  for (int32_t i = 0; i < std::max(num_workers, 1); ++i) {
    workers_.emplace_back([this] { worker(); });
  }
}

ResponsesBackground::~ResponsesBackground() { stop(); }

void ResponsesBackground::submit(ResponsePlan plan) {
  auto job = std::make_shared<Job>();
  job->id = plan.id;
  job->plan = std::move(plan);
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      queued_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  fail_stored_response(ctx_, job->id, response_shutdown_error());
}

ApiResult<StoredResponse> ResponsesBackground::cancel(std::string_view id) {
  MutexLock lock(mu_);
  std::optional<StoredResponse> r = ctx_.responses.find(id);
  if (!r) return response_not_found(id);
  if (!r->response.value("background", false)) {
    return ApiError::bad_request("Only responses created with `background: true` can be cancelled.",
                                 "response_id", "response_not_cancellable");
  }
  if (is_finished(r->status())) return *r;
  r = ctx_.responses.update(id, [](StoredResponse& s) {
    if (!is_finished(s.status())) s.response["status"] = "cancelled";
  });
  for (const auto& job : running_) {
    if (job->id == id) job->inbox->cancel();
  }
  std::erase_if(queued_, [id](const auto& job) { return job->id == id; });
  if (!r) return response_not_found(id);
  return *r;
}

void ResponsesBackground::stop() {
  std::deque<std::shared_ptr<Job>> queued;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    queued.swap(queued_);
    for (const auto& job : running_) job->inbox->cancel();
  }
  cv_.notify_all();
  for (const auto& job : queued) fail_stored_response(ctx_, job->id, response_shutdown_error());
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void ResponsesBackground::worker() {
  UniqueLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [this] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stopping_ || !queued_.empty();
    });
    if (stopping_) return;
    std::shared_ptr<Job> job = std::move(queued_.front());
    queued_.pop_front();
    running_.push_back(job);
    lock.unlock();
    run(*job);
    lock.lock();
    std::erase(running_, job);
  }
}

void ResponsesBackground::finish(const StoredResponse& result) {
  ctx_.responses.update(result.id, [&result](StoredResponse& r) {
    if (r.status() == ResponseStatus::kCancelled) return;
    r = result;
  });
}

void ResponsesBackground::report_progress(const std::string& id, const ResponseRun& run) {
  ctx_.responses.update(
      id,
      [&run](StoredResponse& r) {
        if (r.status() != ResponseStatus::kInProgress) return;
        r.response["output"] = run.output();
        r.response["usage"] = run.usage();
      },
      /*persist=*/false);
}

void ResponsesBackground::run(Job& job) {
  const std::string& id = job.id;
  bool cancelled = false;
  ctx_.responses.update(id, [&cancelled](StoredResponse& r) {
    cancelled = r.status() != ResponseStatus::kQueued;
    if (!cancelled) r.response["status"] = "in_progress";
  });
  if (cancelled) return;
  PreparedPrompts prepared = prepare_prompts(ctx_, job.plan.spec);
  if (prepared.error) {
    fail_stored_response(ctx_, id, as_responses_error(*prepared.error));
    return;
  }
  ResponseRun run(ctx_, std::move(job.plan), std::move(prepared.prompts));
  struct Guard {  // every engine request ends with the run
    ResponseRun* run;
    LineInbox* inbox;
    ~Guard() {
      inbox->close();
      run->abort_unfinished();
    }
  } guard{&run, job.inbox.get()};
  for (size_t i = 0; i < run.num_choices(); ++i) {
    Result<engine::RequestKey> key =
        ctx_.deps.engine->submit(run.request(i), job.inbox->make_sink(i));
    if (!key.ok()) {
      finish(run.result(ApiError::from_status(key.status())));
      return;
    }
    run.placed(i, *key);
  }
  const int64_t timeout_ms = ctx_.config.request_timeout_ms;
  const auto deadline = timeout_ms > 0
                            ? LineInbox::Clock::now() + std::chrono::milliseconds(timeout_ms)
                            : LineInbox::Clock::now() + std::chrono::hours(24 * 365);
  std::deque<LineInbox::Item> events;
  std::string scratch;
  LineInbox::Clock::time_point next_progress{};
  while (!run.all_done() && !run.failure()) {
    if (!job.inbox->wait(deadline, &events)) {                    // cancelled, or the server stops
      fail_stored_response(ctx_, id, response_shutdown_error());  // nothing when cancelled
      return;
    }
    if (events.empty() && LineInbox::Clock::now() >= deadline) {
      finish(run.result(
          ApiError::timeout(fmt::format("The response did not finish within {} ms.", timeout_ms))));
      return;
    }
    for (LineInbox::Item& item : events) run.consume(item.choice, std::move(item.event), &scratch);
    events.clear();
    if (LineInbox::Clock::now() >= next_progress && !run.all_done()) {
      report_progress(id, run);
      next_progress = LineInbox::Clock::now() + kProgressInterval;
    }
  }
  finish(run.result(run.failure()));
  KEEL_LOG_DEBUG("responses: background response {} finished", id);
}

}  // namespace keel::server
