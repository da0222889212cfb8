// FineTuningRunner (see fine_tuning_runner.h): the queue, the actions and the runner thread.
#include "server/fine_tuning_runner.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>

#include "core/log.h"

namespace keel::server {
namespace {

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// While the engine is not ready (a `keel serve` still loading its model), look again this often.
constexpr auto kReadyPoll = std::chrono::milliseconds(100);

ApiError job_not_found(std::string_view id) {
  ApiError e = ApiError::bad_request(fmt::format("No such fine-tuning job: {}", id), "id",
                                     "fine_tuning_job_not_found");
  e.status = 404;
  return e;
}

void erase_id(std::deque<std::string>* q, std::string_view id) {
  q->erase(std::remove(q->begin(), q->end(), id), q->end());
}

void remove_file(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace

FineTuningRunner::FineTuningRunner(ServerContext& ctx, FineTuner& tuner, std::string models_dir)
    : ctx_(ctx), tuner_(tuner), models_dir_(std::move(models_dir)) {}

FineTuningRunner::~FineTuningRunner() {
  stop();
  if (own_models_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(models_dir_, ec);
  }
}

FtEvent FineTuningRunner::event(std::string message, std::string level) {
  FtEvent e;
  e.id = "ftevent-" + ctx_.ids.next().substr(0, 24);
  e.created_at = unix_now();
  e.level = std::move(level);
  e.message = std::move(message);
  return e;
}

Status FineTuningRunner::start() {
  std::error_code ec;
  if (models_dir_.empty()) {
    std::string tmpl =
        (std::filesystem::temp_directory_path(ec) / "keel-fine-tuning-XXXXXX").string();
    if (ec || mkdtemp(tmpl.data()) == nullptr) {
      return Status::io_error("fine-tuning: cannot make a temporary directory for adapters");
    }
    models_dir_ = tmpl;
    own_models_dir_ = true;
  } else if (std::filesystem::create_directories(models_dir_, ec); ec) {
    return Status::io_error(
        fmt::format("fine-tuning: cannot make {}: {}", models_dir_, ec.message()));
  }
  {
    MutexLock lock(mu_);
    for (const FineTuningJob& job : ctx_.fine_tuning.all()) {
      if (is_terminal(job.status) || !pin_files(job)) continue;
      if (job.status == FtStatus::kValidatingFiles) to_validate_.push_back(job.id);
      if (job.status != FtStatus::kQueued && job.status != FtStatus::kRunning) continue;
      if (job.status == FtStatus::kRunning) {
        ctx_.fine_tuning.update(job.id, [](FineTuningJob& j) { j.status = FtStatus::kQueued; });
        ctx_.fine_tuning.add_event(
            job.id,
            event(job.state_step > 0
                      ? fmt::format("The server restarted: the job resumes from step {}",
                                    job.state_step)
                      : std::string("The server restarted: the job starts over")),
            true);
      }
      queue_.push_back(job.id);
    }
  }
  thread_ = std::thread([this] { run(); });
  return Status();
}

bool FineTuningRunner::pin_files(const FineTuningJob& job) {
  Files f;
  f.training = ctx_.files.pin(job.training_file);
  if (job.validation_file) f.validation = ctx_.files.pin(*job.validation_file);
  if (f.training != nullptr && (!job.validation_file || f.validation != nullptr)) {
    files_[job.id] = std::move(f);
    return true;
  }
  if (f.training != nullptr) ctx_.files.unpin(job.training_file);
  if (f.validation != nullptr) ctx_.files.unpin(*job.validation_file);
  const bool training_lost = f.training == nullptr;
  const std::string file = training_lost ? job.training_file : *job.validation_file;
  ctx_.fine_tuning.update(job.id, [&](FineTuningJob& j) {
    j.status = FtStatus::kFailed;
    j.finished_at = unix_now();
    j.error = FtError{"file_not_found", fmt::format("The file {} is gone.", file),
                      training_lost ? "training_file" : "validation_file"};
  });
  return false;
}

void FineTuningRunner::release(const std::string& id, bool drop_models) {
  if (auto it = files_.find(id); it != files_.end()) {
    const std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
    if (job) {
      ctx_.files.unpin(job->training_file);
      if (job->validation_file) ctx_.files.unpin(*job->validation_file);
    }
    files_.erase(it);
  }
  ctx_.fine_tuning.drop_state(id);
  if (!drop_models) return;
  const std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
  if (!job) return;
  for (const FtCheckpoint& c : job->checkpoints) (void)ctx_.deps.engine->unload_lora(c.model);
  ctx_.fine_tuning.update(id, [](FineTuningJob& j) { j.checkpoints.clear(); });
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(models_dir_) / id, ec);
}

ApiResult<FineTuningJob> FineTuningRunner::submit(const FineTuningJob& job) {
  MutexLock lock(mu_);
  if (stopping_) return ApiError::unavailable("The server is shutting down.");
  if (Status added = ctx_.fine_tuning.add(job); !added.ok()) {
    KEEL_LOG_WARN("fine-tuning job {} not created: {}", job.id, added.message());
    ApiError e = ApiError::internal(
        "The job could not be written to the server's state directory; see the server's log.");
    e.code = "fine_tuning_store_write_failed";
    return e;
  }
  ctx_.fine_tuning.add_event(job.id, event("Created fine-tuning job: " + job.id), true);
  if (!pin_files(job)) {
    ApiError e = ApiError::bad_request(fmt::format("No such File object: {}", job.training_file),
                                       "training_file", "file_not_found");
    e.status = 404;
    return e;
  }
  to_validate_.push_back(job.id);
  cv_.notify_all();
  return *ctx_.fine_tuning.find(job.id);
}

ApiResult<FineTuningJob> FineTuningRunner::act(std::string_view id, FtAction action) {
  MutexLock lock(mu_);
  const std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
  if (!job) return job_not_found(id);
  const std::optional<FtStatus> next = status_after(job->status, action);
  if (!next) {
    return ApiError::bad_request(
        fmt::format("Cannot {} job {}: its status is {}.", ft_action_name(action), id,
                    ft_status_name(job->status)),
        "id", "invalid_job_status");
  }
  const bool training = active_ != nullptr && active_->job_id == id;
  const std::string key(id);
  erase_id(&to_validate_, id);
  erase_id(&queue_, id);
  if (action == FtAction::kResume) queue_.push_back(key);
  FineTuningJob updated = *ctx_.fine_tuning.update(id, [&](FineTuningJob& j) {
    j.status = *next;
    j.estimated_finish.reset();
    if (*next == FtStatus::kCancelled) j.finished_at = unix_now();
  });
  static constexpr std::string_view kMessages[] = {
      "Fine-tuning job cancelled", "Fine-tuning job paused", "Fine-tuning job resumed"};
  ctx_.fine_tuning.add_event(id, event(std::string(kMessages[static_cast<int>(action)])), true);
  if (training && action != FtAction::kResume) {
    active_->reason = action == FtAction::kCancel ? StopReason::kCancel : StopReason::kPause;
    active_->stop_asked_ms = steady_ms();
    active_->stop.store(true);
  } else if (action == FtAction::kCancel) {
    release(key, /*drop_models=*/true);
    updated = *ctx_.fine_tuning.find(id);
  }
  cv_.notify_all();
  return updated;
}

void FineTuningRunner::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    if (active_ != nullptr) {
      if (active_->reason == StopReason::kNone) active_->reason = StopReason::kShutdown;
      if (active_->stop_asked_ms == 0) active_->stop_asked_ms = steady_ms();
      active_->stop.store(true);
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FineTuningRunner::post(Message m) {
  {
    MutexLock lock(mu_);
    inbox_.push_back(std::move(m));
  }
  cv_.notify_all();
}

bool FineTuningRunner::wait_until_ready() {
  UniqueLock lock(mu_);
  while (!ctx_.ready()) {
    if (stopping_) return false;
    cv_.wait_for(lock.native(), kReadyPoll);
  }
  return !stopping_;
}

void FineTuningRunner::serve_kept_models() {
  for (const FineTuningJob& job : ctx_.fine_tuning.all()) {
    if (job.status == FtStatus::kCancelled) continue;
    if (job.status == FtStatus::kSucceeded && job.fine_tuned_model) {
      if (Status s = ctx_.deps.engine->load_lora(*job.fine_tuned_model, job.adapter_path);
          !s.ok()) {
        KEEL_LOG_WARN("fine-tuning: {} is not served: {}", *job.fine_tuned_model, s.message());
      }
    }
    for (const FtCheckpoint& c : job.checkpoints) {
      if (Status s = ctx_.deps.engine->load_lora(c.model, c.adapter_path); !s.ok()) {
        KEEL_LOG_WARN("fine-tuning: {} is not served: {}", c.model, s.message());
      }
    }
  }
}

void FineTuningRunner::run() {
  if (!wait_until_ready()) return;
  serve_kept_models();
  for (;;) {
    std::optional<Message> message;
    std::string validate_id, start_id;
    {
      UniqueLock lock(mu_);
      cv_.wait(lock.native(), [this] {
        mu_.assert_held();
        if (!inbox_.empty()) return true;
        if (stopping_) return active_ == nullptr;
        return !to_validate_.empty() || (active_ == nullptr && !queue_.empty());
      });
      if (!inbox_.empty()) {
        message = std::move(inbox_.front());
        inbox_.pop_front();
      } else if (stopping_) {
        return;
      } else if (!to_validate_.empty()) {
        validate_id = to_validate_.front();
        to_validate_.pop_front();
      } else {
        start_id = queue_.front();
        queue_.pop_front();
      }
    }
    if (message) {
      const std::string id = [this] {
        MutexLock lock(mu_);
        return active_ != nullptr ? active_->job_id : std::string();
      }();
      if (auto* s = std::get_if<FineTuneStep>(&*message)) on_step(id, *s);
      if (auto* c = std::get_if<FineTuneCheckpoint>(&*message)) on_checkpoint(id, *c);
      if (auto* d = std::get_if<Done>(&*message)) on_done(std::move(*d));
    } else if (!validate_id.empty()) {
      validate(validate_id);
    } else {
      start_training(start_id);
    }
  }
}

void FineTuningRunner::validate(const std::string& id) {
  Files files;
  std::optional<FineTuningJob> job;
  {
    MutexLock lock(mu_);
    job = ctx_.fine_tuning.find(id);
    if (!job || job->status != FtStatus::kValidatingFiles || !files_.contains(id)) return;
    files = files_[id];
  }
  ctx_.fine_tuning.add_event(
      id,
      event("Validating training file: " + job->training_file +
            (job->validation_file ? " and validation file: " + *job->validation_file : "")),
      true);
  Result<FineTuneDataSummary> train = tuner_.check_data(*files.training);
  if (!train.ok()) {
    return fail(id, {"invalid_training_file",
                     fmt::format("The training file {} is not valid: {}", job->training_file,
                                 train.status().message()),
                     "training_file"});
  }
  if (files.validation != nullptr) {
    Result<FineTuneDataSummary> valid = tuner_.check_data(*files.validation);
    if (!valid.ok()) {
      return fail(id, {"invalid_validation_file",
                       fmt::format("The validation file {} is not valid: {}", *job->validation_file,
                                   valid.status().message()),
                       "validation_file"});
    }
  }
  MutexLock lock(mu_);
  job = ctx_.fine_tuning.find(id);
  if (!job || job->status != FtStatus::kValidatingFiles) return;  // cancelled meanwhile
  const FtHyperparameters resolved = resolve_hyperparameters(job->hyperparameters, train->examples);
  ctx_.fine_tuning.update(id, [&](FineTuningJob& j) {
    j.status = FtStatus::kQueued;
    j.hyperparameters = resolved;
  });
  ctx_.fine_tuning.add_event(
      id,
      event(fmt::format("Files validated ({} conversations, {} trained tokens per epoch{}), "
                        "moving job to queued state",
                        train->examples, train->targets,
                        train->truncated > 0
                            ? fmt::format(", {} cut to the model's context", train->truncated)
                            : std::string())),
      true);
  queue_.push_back(id);
}

void FineTuningRunner::fail(const std::string& id, FtError error) {
  MutexLock lock(mu_);
  const std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
  if (!job || is_terminal(job->status)) return;
  KEEL_LOG_WARN("fine-tuning job {} failed: {}", id, error.message);
  const std::string message = "Fine-tuning job failed: " + error.message;
  ctx_.fine_tuning.update(id, [&](FineTuningJob& j) {
    j.status = FtStatus::kFailed;
    j.finished_at = unix_now();
    j.estimated_finish.reset();
    j.error = std::move(error);
  });
  ctx_.fine_tuning.add_event(id, event(message, "error"), true);
  release(id, /*drop_models=*/false);
}

void FineTuningRunner::start_training(const std::string& id) {
  const std::string out_dir = (std::filesystem::path(models_dir_) / id).string();
  std::error_code ec;
  if (std::filesystem::create_directories(out_dir, ec); ec) {
    return fail(id, {"training_failed", fmt::format("cannot make {}: {}", out_dir, ec.message()),
                     std::nullopt});
  }
  MutexLock lock(mu_);
  const std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
  if (!job || job->status != FtStatus::kQueued || !files_.contains(id)) return;
  FineTuneSpec spec;
  spec.job_id = id;
  spec.training = files_[id].training;
  spec.validation = files_[id].validation;
  spec.n_epochs = job->hyperparameters.n_epochs.value_or(1);
  spec.batch_size = job->hyperparameters.batch_size.value_or(1);
  spec.learning_rate_multiplier = job->hyperparameters.learning_rate_multiplier.value_or(1.0);
  spec.seed = static_cast<uint64_t>(job->seed);
  spec.out_dir = out_dir;
  std::string state = ctx_.fine_tuning.state(id);
  const int64_t from = state.empty() ? 0 : std::max<int64_t>(job->state_step, 0);
  ctx_.fine_tuning.update(id, [&](FineTuningJob& j) {
    j.status = FtStatus::kRunning;
    j.step = from;
  });
  ctx_.fine_tuning.add_event(
      id,
      event(from > 0 ? fmt::format("Fine-tuning job resumed from step {}", from)
                     : std::string("Fine-tuning job started")),
      true);
  active_ = std::make_unique<Active>();
  active_->job_id = id;
  active_->start_step = from;
  active_->start_time_ms = steady_ms();
  Active* a = active_.get();
  a->thread = std::thread([this, spec = std::move(spec), state = std::move(state), a] {
    FineTuneHooks hooks;
    hooks.stop = &a->stop;
    hooks.on_step = [this](const FineTuneStep& s) { post(s); };
    hooks.on_checkpoint = [this](const FineTuneCheckpoint& c) { post(c); };
    Result<FineTuneOutcome> r = tuner_.train(spec, state, hooks);
    Done d;
    if (r.ok()) {
      d.outcome = std::move(*r);
    } else {
      d.status = r.status();
    }
    post(std::move(d));
  });
}

void FineTuningRunner::on_step(const std::string& id, const FineTuneStep& s) {
  int64_t start_step = 0, start_ms = 0;
  {
    MutexLock lock(mu_);
    if (active_ == nullptr) return;
    start_step = active_->start_step;
    start_ms = active_->start_time_ms;
  }
  const int64_t done = s.step - start_step;
  const double per_step_s = static_cast<double>(steady_ms() - start_ms) / 1000.0 /
                            static_cast<double>(std::max<int64_t>(done, 1));
  const auto finish =
      unix_now() + static_cast<int64_t>(per_step_s * static_cast<double>(s.total_steps - s.step));
  ctx_.fine_tuning.update(
      id,
      [&](FineTuningJob& j) {
        j.step = s.step;
        j.total_steps = s.total_steps;
        if (j.status == FtStatus::kRunning) j.estimated_finish = finish;
      },
      /*persist=*/false);
  FtEvent e =
      event(fmt::format("Step {}/{}: training loss={:.4f}", s.step, s.total_steps, s.train_loss));
  e.metrics = true;
  e.data = {{"step", s.step},
            {"total_steps", s.total_steps},
            {"epoch", s.epoch},
            {"train_loss", s.train_loss},
            {"train_mean_token_accuracy", s.train_accuracy},
            {"trained_tokens", s.trained_tokens}};
  ctx_.fine_tuning.add_event(id, std::move(e), false);
}

void FineTuningRunner::on_checkpoint(const std::string& id, const FineTuneCheckpoint& c) {
  const std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
  if (!job || is_terminal(job->status)) return;
  FtCheckpoint k;
  k.id = "ftckpt-" + ctx_.ids.next().substr(0, 24);
  k.created_at = unix_now();
  k.step = c.step;
  k.model = checkpoint_model_name(
      fine_tuned_model_name(job->model, job->suffix.value_or(""), job->id), c.step);
  k.adapter_path = c.adapter_path;
  k.train_loss = c.train_loss;
  k.train_accuracy = c.train_accuracy;
  k.valid_loss = c.valid_loss;
  k.valid_accuracy = c.valid_accuracy;
  if (Status s = ctx_.deps.engine->load_lora(k.model, k.adapter_path); !s.ok()) {
    KEEL_LOG_WARN("fine-tuning: checkpoint {} is not served: {}", k.model, s.message());
  }
  if (Status s = ctx_.fine_tuning.put_state(id, c.state); !s.ok()) {
    KEEL_LOG_WARN("fine-tuning: the state of {} at step {} is not saved: {}", id, c.step,
                  s.message());
  }
  std::vector<FtCheckpoint> dropped;
  ctx_.fine_tuning.update(id, [&](FineTuningJob& j) {
    j.checkpoints.push_back(k);
    while (j.checkpoints.size() > kKeptCheckpoints) {
      dropped.push_back(std::move(j.checkpoints.front()));
      j.checkpoints.erase(j.checkpoints.begin());
    }
    j.state_step = c.step;
  });
  for (const FtCheckpoint& old : dropped) {
    (void)ctx_.deps.engine->unload_lora(old.model);
    remove_file(old.adapter_path);
  }
  FtEvent e = event(fmt::format("Checkpoint created at step {}: {}", c.step, k.model));
  e.data = {{"step", c.step}, {"fine_tuned_model_checkpoint", k.model}};
  if (c.valid_loss) e.data["valid_loss"] = *c.valid_loss;
  if (c.valid_accuracy) e.data["valid_mean_token_accuracy"] = *c.valid_accuracy;
  ctx_.fine_tuning.add_event(id, std::move(e), true);
}

void FineTuningRunner::on_done(Done done) {
  std::unique_ptr<Active> a;
  {
    MutexLock lock(mu_);
    a = std::move(active_);
  }
  if (a == nullptr) return;
  a->thread.join();
  const std::string& id = a->job_id;
  StopReason reason = StopReason::kNone;
  int64_t asked_ms = 0;
  {
    MutexLock lock(mu_);
    reason = a->reason;
    asked_ms = a->stop_asked_ms;
  }
  if (asked_ms > 0 && done.outcome.stopped) {
    KEEL_LOG_INFO("fine-tuning job {}: training stopped at step {}, {} ms after it was asked to",
                  id, done.outcome.step, steady_ms() - asked_ms);
  }
  if (!done.status.ok()) {
    if (reason == StopReason::kCancel) {
      MutexLock lock(mu_);
      return release(id, /*drop_models=*/true);
    }
    return fail(id, {"training_failed", done.status.message(), std::nullopt});
  }
  const FineTuneOutcome& o = done.outcome;
  if (!o.stopped) return succeed(id, o);
  MutexLock lock(mu_);
  if (reason == StopReason::kCancel) return release(id, /*drop_models=*/true);
  if (reason == StopReason::kShutdown && !ctx_.fine_tuning.durable()) return;
  if (Status s = ctx_.fine_tuning.put_state(id, o.state); !s.ok()) {
    KEEL_LOG_WARN("fine-tuning: the state of {} at step {} is not saved: {}", id, o.step,
                  s.message());
    return;
  }
  ctx_.fine_tuning.update(id, [&](FineTuningJob& j) { j.state_step = o.step; });
  ctx_.fine_tuning.add_event(id, event(fmt::format("Training stopped at step {}", o.step)), true);
}

void FineTuningRunner::succeed(const std::string& id, const FineTuneOutcome& o) {
  std::optional<FineTuningJob> job = ctx_.fine_tuning.find(id);
  if (!job) return;
  const std::string name = fine_tuned_model_name(job->model, job->suffix.value_or(""), id);
  if (Status s = ctx_.deps.engine->load_lora(name, o.adapter_path); !s.ok()) {
    return fail(id, {"model_not_served", "The fine-tuned model could not be served: " + s.message(),
                     std::nullopt});
  }
  ApiResult<StoredFile> csv =
      ctx_.files.add("file-" + ctx_.ids.next(), "fine-tune-results", "step_metrics.csv",
                     fine_tuning_results_csv(ctx_.fine_tuning.all_events(id)), false);
  if (!csv.ok()) {
    KEEL_LOG_WARN("fine-tuning: the results file of {} is not kept: {}", id, csv.error().message);
  }
  MutexLock lock(mu_);
  job = ctx_.fine_tuning.find(id);
  if (!job || job->status == FtStatus::kCancelled) {  // cancelled as it finished
    (void)ctx_.deps.engine->unload_lora(name);
    return release(id, /*drop_models=*/true);
  }
  erase_id(&queue_, id);  // paused and resumed as it finished
  ctx_.fine_tuning.update(id, [&](FineTuningJob& j) {
    j.status = FtStatus::kSucceeded;
    j.fine_tuned_model = name;
    j.adapter_path = o.adapter_path;
    j.finished_at = unix_now();
    j.estimated_finish.reset();
    j.trained_tokens = o.trained_tokens;
    j.step = o.step;
    j.state_step = -1;
    if (csv.ok()) j.result_files = {csv.value().id};
  });
  ctx_.fine_tuning.add_event(id, event("New fine-tuned model created: " + name), false);
  ctx_.fine_tuning.add_event(id, event("The job has successfully completed"), true);
  KEEL_LOG_INFO("fine-tuning job {} succeeded: {} ({} steps, {} tokens)", id, name, o.step,
                o.trained_tokens);
  release(id, /*drop_models=*/false);
}

}  // namespace keel::server
