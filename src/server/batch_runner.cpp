// BatchRunner (see batch_runner.h).
#include "server/batch_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <unordered_set>

#include "core/log.h"
#include "server/batch_input.h"

namespace keel::server {
namespace {

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

// While the server is not ready, a worker with nothing else to do looks again this often.
constexpr auto kBatchReadyPoll = std::chrono::milliseconds(100);

// The error-file line of a request the completion window left unstarted (OpenAI's shape).
std::string expired_line(std::string_view request_id, std::string_view custom_id) {
  const nlohmann::json j = {
      {"id", fmt::format("batch_req_{}", request_id)},
      {"custom_id", custom_id},
      {"response", nullptr},
      {"error",
       {{"code", "batch_expired"},
        {"message", "This request could not be executed before the completion window expired."}}}};
  return j.dump();
}

}  // namespace

// The fields from `validating` on are guarded by the runner's mu_ (an annotation here cannot
// name another object's mutex) while the job is shared: from its entry into jobs_ until pick()
// takes it out to finalize (finalize() then owns it). `lines` is set under mu_ by validate()
// before any line of it is picked; the line workers read it without the lock.
struct BatchRunner::Job {
  std::string id;
  ApiKind kind = ApiKind::kChat;
  std::string endpoint;
  std::string input_file_id;
  int64_t expires_at = 0;
  std::shared_ptr<const std::string> input;  // pinned; the lines' text points into it
  bool validating = false;
  bool validated = false;
  bool cancelled = false;
  bool suspended = false;  // the server stops and keeps the batch to resume: never finalized here
  bool expired = false;
  std::vector<BatchLine> lines;  // set once, by validate(); read by the line workers
  size_t next = 0;               // the next line to start
  size_t in_flight = 0;
  std::vector<std::shared_ptr<LineInbox>> running;
  std::unordered_set<std::string> done;  // custom_ids of the finished lines
  std::string output;                    // JSONL of the completed lines
  std::string errors;                    // JSONL of the failed lines

  [[nodiscard]] bool finished() const {
    // An expired batch is validated first: its unstarted lines go to its error file.
    return !validating && in_flight == 0 &&
           (cancelled || suspended || (validated && (expired || next == lines.size())));
  }
};

BatchRunner::BatchRunner(ServerContext& ctx, int32_t num_workers, size_t max_lines)
    : ctx_(ctx), max_lines_(max_lines) {
  for (int32_t i = 0; i < std::max(num_workers, 1); ++i) {
    workers_.emplace_back([this] { worker(); });
  }
}

BatchRunner::~BatchRunner() { stop(); }

std::shared_ptr<BatchRunner::Job> BatchRunner::make_job(const BatchRecord& batch,
                                                        std::shared_ptr<const std::string> input) {
  auto job = std::make_shared<Job>();
  job->id = batch.id;
  job->kind = batch.endpoint == "/v1/chat/completions" ? ApiKind::kChat : ApiKind::kCompletion;
  job->endpoint = batch.endpoint;
  job->input_file_id = batch.input_file_id;
  job->expires_at = batch.expires_at;
  job->input = std::move(input);
  return job;
}

void BatchRunner::submit(const BatchRecord& batch, std::shared_ptr<const std::string> input) {
  std::shared_ptr<Job> job = make_job(batch, std::move(input));
  {
    MutexLock lock(mu_);
    if (stopping_) {                       // the workers may be gone: it never runs here
      if (ctx_.batches.durable()) return;  // validating on disk: the next start resumes it
      ctx_.batches.update(job->id, [](BatchRecord& r) {
        r.status = BatchStatus::kCancelled;
        r.cancelling_at = r.cancelled_at = now_unix();
      });
      ctx_.files.unpin(job->input_file_id);
      return;
    }
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void BatchRunner::resume_one(const BatchRecord& batch) {
  std::shared_ptr<const std::string> input = ctx_.files.pin(batch.input_file_id);
  if (!input) {
    KEEL_LOG_WARN("batch {}: input file {} is gone from the state directory: the batch fails",
                  batch.id, batch.input_file_id);
    ctx_.batches.update(batch.id, [&batch](BatchRecord& r) {
      r.status = BatchStatus::kFailed;
      r.failed_at = now_unix();
      r.errors.push_back({"input_file_missing",
                          fmt::format("The input file {} was lost (damaged or missing in the "
                                      "server's state directory) before the batch finished.",
                                      batch.input_file_id),
                          "input_file_id", std::nullopt});
    });
    ctx_.batches.forget_lines(batch.id);
    return;
  }
  std::shared_ptr<Job> job = make_job(batch, std::move(input));
  int64_t completed = 0, failed = 0;
  for (FinishedLine& line : ctx_.batches.finished_lines(batch.id)) {
    job->done.insert(std::move(line.custom_id));
    (line.ok ? job->output : job->errors) += line.jsonl + '\n';
    ++(line.ok ? completed : failed);
  }
  job->cancelled = batch.status == BatchStatus::kCancelling;
  ctx_.batches.update(batch.id, [&](BatchRecord& r) {
    r.completed = completed;
    r.failed = failed;
  });
  KEEL_LOG_INFO("batch {}: resumed ({}, {} lines finished before the restart)", batch.id,
                batch_status_name(batch.status), completed + failed);
  MutexLock lock(mu_);
  jobs_.push_back(std::move(job));
}

void BatchRunner::resume() {
  for (const BatchRecord& batch : ctx_.batches.unfinished()) resume_one(batch);
  // Inputs of deleted files that no resumed batch reads any more.
  ctx_.files.drop_unpinned_deleted();
  cv_.notify_all();
}

void BatchRunner::cancel_job(Job& job) {
  if (job.cancelled) return;
  job.cancelled = true;
  for (const auto& inbox : job.running) inbox->cancel();
  ctx_.batches.update(job.id, [](BatchRecord& r) {
    if (r.status == BatchStatus::kValidating || r.status == BatchStatus::kInProgress) {
      r.status = BatchStatus::kCancelling;
      r.cancelling_at = now_unix();
    }
  });
}

void BatchRunner::stop_job(Job& job) {
  if (!ctx_.batches.durable()) {
    cancel_job(job);
    return;
  }
  if (job.cancelled || job.suspended) return;
  job.suspended = true;
  for (const auto& inbox : job.running) inbox->cancel();
}

ApiResult<BatchRecord> BatchRunner::cancel(std::string_view id) {
  UniqueLock lock(mu_);
  std::optional<BatchRecord> record = ctx_.batches.find(id);
  if (!record) {
    ApiError e =
        ApiError::bad_request(fmt::format("No such Batch object: {}", id), "id", "batch_not_found");
    e.status = 404;
    return e;
  }
  if (record->status != BatchStatus::kValidating && record->status != BatchStatus::kInProgress &&
      record->status != BatchStatus::kCancelling) {
    ApiError e = ApiError::bad_request(
        fmt::format("Cannot cancel a batch with status '{}'.", batch_status_name(record->status)),
        std::nullopt, "batch_not_cancellable");
    e.status = 409;
    return e;
  }
  for (const auto& job : jobs_) {
    if (job->id == id) cancel_job(*job);
  }
  record = ctx_.batches.find(id);
  lock.unlock();
  cv_.notify_all();
  return *record;
}

void BatchRunner::cancel_all() {
  {
    MutexLock lock(mu_);
    for (const auto& job : jobs_) stop_job(*job);
  }
  cv_.notify_all();
}

void BatchRunner::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (const auto& job : jobs_) stop_job(*job);
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

size_t BatchRunner::num_in_flight() const {
  MutexLock lock(mu_);
  return in_flight_;
}

BatchRunner::Pick BatchRunner::pick() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const std::shared_ptr<Job> job = *it;
    if (!job->cancelled && !job->suspended && !job->expired && now_unix() >= job->expires_at) {
      job->expired = true;  // no more lines start; those in flight finish
      KEEL_LOG_INFO("batch {}: the completion window passed", job->id);
    }
    while (job->validated && job->next < job->lines.size() &&
           job->done.contains(job->lines[job->next].custom_id)) {
      ++job->next;  // finished before a restart
    }
    if (job->finished()) {
      it = jobs_.erase(it);
      if (job->suspended) continue;  // kept on disk as it is, for the next start
      if (!job->cancelled && !job->expired) {
        ctx_.batches.update(job->id, [](BatchRecord& r) {
          r.status = BatchStatus::kFinalizing;
          r.finalizing_at = now_unix();
        });
      }
      return Pick{.task = Task::kFinalize, .job = job};
    }
    if (job->cancelled || job->suspended) {
      ++it;
      continue;
    }
    if (!job->validated && !job->validating) {
      job->validating = true;
      return Pick{.task = Task::kValidate, .job = job};
    }
    if (!job->expired && job->validated && job->next < job->lines.size() && ctx_.ready()) {
      Pick p{.task = Task::kLine, .job = job, .line_idx = job->next++};
      p.inbox = std::make_shared<LineInbox>();
      job->running.push_back(p.inbox);
      ++job->in_flight;
      ++in_flight_;
      return p;
    }
    ++it;
  }
  return Pick{};
}

void BatchRunner::worker() {
  UniqueLock lock(mu_);
  for (;;) {
    Pick p = pick();
    if (p.task == Task::kNone) {
      if (stopping_ && jobs_.empty()) return;
      if (ctx_.ready()) {
        cv_.wait(lock.native());
      } else {
        cv_.wait_for(lock.native(), kBatchReadyPoll);  // lines wait for the model
      }
      continue;
    }
    lock.unlock();
    switch (p.task) {
      case Task::kValidate:
        validate(p.job);
        break;
      case Task::kLine:
        run_line(p);
        break;
      case Task::kFinalize:
        finalize(p.job);
        break;
      case Task::kNone:
        break;
    }
    lock.lock();
    cv_.notify_all();  // the job may be finished now, or have lines to start
  }
}

void BatchRunner::validate(const std::shared_ptr<Job>& job) {
  BatchInput input = parse_batch_input(*job->input, job->endpoint, max_lines_);
  MutexLock lock(mu_);
  job->validating = false;
  if (job->cancelled || job->suspended) return;  // finished(): finalize() or dropped
  if (!input.errors.empty()) {
    ctx_.batches.update(job->id, [&input](BatchRecord& r) {
      r.status = BatchStatus::kFailed;
      r.failed_at = now_unix();
      r.errors = std::move(input.errors);
    });
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
    release(*job);
    return;
  }
  job->lines = std::move(input.lines);
  job->validated = true;
  const int64_t total = static_cast<int64_t>(job->lines.size());
  ctx_.batches.update(job->id, [total](BatchRecord& r) {
    if (r.status == BatchStatus::kValidating) r.status = BatchStatus::kInProgress;
    if (!r.in_progress_at) r.in_progress_at = now_unix();
    r.total = total;
  });
}

void BatchRunner::run_line(const Pick& p) {
  Job& job = *p.job;
  const BatchLine& line = job.lines[p.line_idx];
  BatchLineResult result = run_batch_line(ctx_, job.kind, line, p.inbox);
  const bool ok = result.kind == BatchLineResult::Kind::kCompleted;
  if (result.kind != BatchLineResult::Kind::kCancelled) {
    // Durable before it counts: after a restart this line is not run again.
    const Status st = ctx_.batches.record_line(job.id, {line.custom_id, ok, result.jsonl});
    if (!st.ok()) {
      KEEL_LOG_WARN("batch {}: line {} not recorded ({}); a restart would run it again", job.id,
                    line.line, st.message());
    }
  }
  MutexLock lock(mu_);
  --job.in_flight;
  --in_flight_;
  std::erase(job.running, p.inbox);
  if (result.kind == BatchLineResult::Kind::kCancelled) return;
  job.done.insert(line.custom_id);
  std::string& file = ok ? job.output : job.errors;
  file += result.jsonl;
  file += '\n';
  ctx_.batches.update(
      job.id, [ok](BatchRecord& r) { ++(ok ? r.completed : r.failed); }, /*persist=*/false);
}

std::pair<std::string, std::string> BatchRunner::plan_result_files(const Job& job) {
  const std::optional<BatchRecord> r = ctx_.batches.find(job.id);
  if (r && r->planned_output_file_id && r->planned_error_file_id) {
    // An earlier finalize may have written them before the process stopped: written again.
    ctx_.files.remove(*r->planned_output_file_id);
    ctx_.files.remove(*r->planned_error_file_id);
    return {*r->planned_output_file_id, *r->planned_error_file_id};
  }
  std::pair<std::string, std::string> ids{"file-" + ctx_.ids.next(), "file-" + ctx_.ids.next()};
  ctx_.batches.update(job.id, [&ids](BatchRecord& rec) {
    rec.planned_output_file_id = ids.first;
    rec.planned_error_file_id = ids.second;
  });
  return ids;
}

void BatchRunner::release(const Job& job) {
  ctx_.batches.forget_lines(job.id);
  ctx_.files.unpin(job.input_file_id);
}

void BatchRunner::finalize(const std::shared_ptr<Job>& job) {
  // The job is out of jobs_: nothing else touches it or its record's status now.
  if (job->expired) {
    for (const BatchLine& line : job->lines) {
      if (job->done.contains(line.custom_id)) continue;
      job->errors += expired_line(ctx_.ids.next(), line.custom_id);
      job->errors += '\n';
    }
  }
  const auto [planned_output, planned_error] = plan_result_files(*job);
  std::optional<std::string> output_id, error_id;
  std::optional<ApiError> store_error;
  auto write = [&](std::string& content, const std::string& file_id, std::string_view purpose,
                   std::string_view suffix, std::optional<std::string>* id) {
    if (content.empty() || store_error) return;
    ApiResult<StoredFile> f =
        ctx_.files.add(file_id, std::string(purpose), fmt::format("{}_{}.jsonl", job->id, suffix),
                       std::move(content), false);
    if (f.ok()) {
      *id = f.value().id;
    } else {
      store_error = f.error();
    }
  };
  write(job->output, planned_output, "batch_output", "output", &output_id);
  write(job->errors, planned_error, "batch_error", "error", &error_id);
  if (store_error) {
    // Nothing half-written: a file that was stored is dropped again.
    if (output_id) ctx_.files.remove(*output_id);
    KEEL_LOG_WARN("batch {}: results not stored: {}", job->id, store_error->message);
  }
  const bool cancelled = job->cancelled;
  const bool expired = job->expired;
  ctx_.batches.update(job->id, [&](BatchRecord& r) {
    const int64_t now = now_unix();
    if (store_error) {
      r.status = BatchStatus::kFailed;
      r.failed_at = now;
      r.errors.push_back({store_error->code.value_or("file_store_full"), store_error->message,
                          std::nullopt, std::nullopt});
      return;
    }
    r.output_file_id = output_id;
    r.error_file_id = error_id;
    if (cancelled) {
      r.status = BatchStatus::kCancelled;
      r.cancelled_at = now;
    } else if (expired) {
      r.status = BatchStatus::kExpired;
      r.expired_at = now;
    } else {
      r.status = BatchStatus::kCompleted;
      r.completed_at = now;
    }
  });
  release(*job);
}

}  // namespace keel::server
