// BatchRunner (see batch_runner.h).
#include "server/batch_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "core/log.h"
#include "server/batch_input.h"

namespace keel::server {
namespace {

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace

struct BatchRunner::Job {
  std::string id;
  ApiKind kind = ApiKind::kChat;
  std::string endpoint;
  std::shared_ptr<const std::string> input;  // the lines' text points into it
  bool validating = false;
  bool validated = false;
  bool cancelled = false;
  std::vector<BatchLine> lines;  // set once, by validate(); read by the line workers
  size_t next = 0;               // the next line to start
  size_t in_flight = 0;
  std::vector<std::shared_ptr<LineInbox>> running;
  std::string output;  // JSONL of the completed lines
  std::string errors;  // JSONL of the failed lines

  [[nodiscard]] bool finished() const {
    return !validating && in_flight == 0 && (cancelled || (validated && next == lines.size()));
  }
};

BatchRunner::BatchRunner(ServerContext& ctx, int32_t num_workers, size_t max_lines)
    : ctx_(ctx), max_lines_(max_lines) {
  for (int32_t i = 0; i < std::max(num_workers, 1); ++i) {
    workers_.emplace_back([this] { worker(); });
  }
}

BatchRunner::~BatchRunner() { stop(); }

void BatchRunner::submit(const std::string& id, ApiKind kind, std::string endpoint,
                         std::shared_ptr<const std::string> input) {
  auto job = std::make_shared<Job>();
  job->id = id;
  job->kind = kind;
  job->endpoint = std::move(endpoint);
  job->input = std::move(input);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {  // the workers may be gone: it never runs
      ctx_.batches.update(id, [](BatchRecord& r) {
        r.status = BatchStatus::kCancelled;
        r.cancelling_at = r.cancelled_at = now_unix();
      });
      return;
    }
    jobs_.push_back(std::move(job));
  }
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

ApiResult<BatchRecord> BatchRunner::cancel(std::string_view id) {
  std::unique_lock<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& job : jobs_) cancel_job(*job);
  }
  cv_.notify_all();
}

void BatchRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (const auto& job : jobs_) cancel_job(*job);
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

size_t BatchRunner::num_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

BatchRunner::Pick BatchRunner::pick() {
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    const std::shared_ptr<Job>& job = *it;
    if (job->finished()) {
      Pick p{.task = Task::kFinalize, .job = job};
      if (!job->cancelled) {
        ctx_.batches.update(job->id, [](BatchRecord& r) {
          r.status = BatchStatus::kFinalizing;
          r.finalizing_at = now_unix();
        });
      }
      jobs_.erase(it);
      return p;
    }
    if (job->cancelled) continue;
    if (!job->validated && !job->validating) {
      job->validating = true;
      return Pick{.task = Task::kValidate, .job = job};
    }
    if (job->validated && job->next < job->lines.size()) {
      Pick p{.task = Task::kLine, .job = job, .line_idx = job->next++};
      p.inbox = std::make_shared<LineInbox>();
      job->running.push_back(p.inbox);
      ++job->in_flight;
      ++in_flight_;
      return p;
    }
  }
  return Pick{};
}

void BatchRunner::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Pick p = pick();
    if (p.task == Task::kNone) {
      if (stopping_ && jobs_.empty()) return;
      cv_.wait(lock);
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
  std::lock_guard<std::mutex> lock(mu_);
  job->validating = false;
  if (job->cancelled) return;  // finished(): finalize() marks it cancelled
  if (!input.errors.empty()) {
    ctx_.batches.update(job->id, [&input](BatchRecord& r) {
      r.status = BatchStatus::kFailed;
      r.failed_at = now_unix();
      r.errors = std::move(input.errors);
    });
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
    return;
  }
  job->lines = std::move(input.lines);
  job->validated = true;
  const int64_t total = static_cast<int64_t>(job->lines.size());
  ctx_.batches.update(job->id, [total](BatchRecord& r) {
    r.status = BatchStatus::kInProgress;
    r.in_progress_at = now_unix();
    r.total = total;
  });
}

void BatchRunner::run_line(const Pick& p) {
  Job& job = *p.job;
  BatchLineResult result = run_batch_line(ctx_, job.kind, job.lines[p.line_idx], p.inbox);
  std::lock_guard<std::mutex> lock(mu_);
  --job.in_flight;
  --in_flight_;
  std::erase(job.running, p.inbox);
  if (result.kind == BatchLineResult::Kind::kCancelled) return;
  const bool ok = result.kind == BatchLineResult::Kind::kCompleted;
  std::string& file = ok ? job.output : job.errors;
  file += result.jsonl;
  file += '\n';
  ctx_.batches.update(job.id, [ok](BatchRecord& r) { ++(ok ? r.completed : r.failed); });
}

void BatchRunner::finalize(const std::shared_ptr<Job>& job) {
  // The job is out of jobs_: nothing else touches it or its record's status now.
  std::optional<std::string> output_id, error_id;
  std::optional<ApiError> store_error;
  auto write = [&](std::string& content, std::string_view purpose, std::string_view suffix,
                   std::optional<std::string>* id) {
    if (content.empty() || store_error) return;
    ApiResult<StoredFile> f =
        ctx_.files.add("file-" + ctx_.ids.next(), std::string(purpose),
                       fmt::format("{}_{}.jsonl", job->id, suffix), std::move(content), false);
    if (f.ok()) {
      *id = f.value().id;
    } else {
      store_error = f.error();
    }
  };
  write(job->output, "batch_output", "output", &output_id);
  write(job->errors, "batch_error", "error", &error_id);
  if (store_error) {
    // Nothing half-written: a file that was stored is dropped again.
    if (output_id) ctx_.files.remove(*output_id);
    KEEL_LOG_WARN("batch {}: results not stored: {}", job->id, store_error->message);
  }
  const bool cancelled = job->cancelled;
  ctx_.batches.update(job->id, [&](BatchRecord& r) {
    const int64_t now = now_unix();
    if (store_error) {
      r.status = BatchStatus::kFailed;
      r.failed_at = now;
      r.errors.push_back({"file_store_full", store_error->message, std::nullopt, std::nullopt});
      return;
    }
    r.output_file_id = output_id;
    r.error_file_id = error_id;
    if (cancelled) {
      r.status = BatchStatus::kCancelled;
      r.cancelled_at = now;
    } else {
      r.status = BatchStatus::kCompleted;
      r.completed_at = now;
    }
  });
}

}  // namespace keel::server
