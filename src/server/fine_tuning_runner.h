// FineTuningRunner: runs the jobs of /v1/fine_tuning/jobs through a FineTuner (fine_tuner.h), one
// training at a time, first come first served, on threads of its own (never an io thread):
//   - the runner thread (normal priority) validates files (validating_files → queued, or failed
//     with the bad line named), starts the oldest queued job, and applies what the training
//     reports: metrics events, checkpoints (each epoch's adapter served as
//     "<model>:ckpt-step-N"; the last kKeptCheckpoints kept), the end (the adapter served as
//     "ft:BASE:keel:SUFFIX:ID" through the engine's LoRA registry, a metrics CSV among the files);
//   - a training thread per run calls FineTuner::train — which lowers itself to idle priority —
//     and only posts messages to the runner thread.
// Cancel and pause set the job's status at once and raise the training's stop flag (it yields
// within ~100 ms); a paused job's state is saved and resume queues it again, to continue exactly
// where it stopped. A job holds pins on its files (FileStore::pin) until it ends.
//
// Restarts (with a state store): stopping the server stops the training and saves its state (the
// job stays `running` on disk); start() queues unfinished jobs again — a running one resumes from
// its last saved state (its last checkpoint, pause or stop), or starts over without one — and the
// runner thread serves the models of finished jobs (and every kept checkpoint) once the engine is
// ready. Without a state store, adapters go to a temporary directory removed with the runner.
//
// Thread safety: every public member may be called from any thread but the runner's own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <variant>

#include "core/mutex.h"
#include "server/api_error.h"
#include "server/fine_tuner.h"
#include "server/fine_tuning_job.h"
#include "server/server_context.h"

namespace keel::server {

inline constexpr size_t kKeptCheckpoints = 3;  // as OpenAI keeps the last three
inline constexpr size_t kMaxUnfinishedFineTuningJobs = 64;

class FineTuningRunner {
 public:
  // `ctx` (its files, fine-tuning store and engine) and `tuner` must outlive the runner.
  // `models_dir`: where each job's adapter files go (<models_dir>/<job id>/); "" = a temporary
  // directory of the runner's own. Call start() next.
  FineTuningRunner(ServerContext& ctx, FineTuner& tuner, std::string models_dir);
  ~FineTuningRunner();
  FineTuningRunner(const FineTuningRunner&) = delete;
  FineTuningRunner& operator=(const FineTuningRunner&) = delete;

  // Queues the store's unfinished jobs (after a restart) and starts the runner thread. Once,
  // before requests arrive. IoError when the models directory cannot be made.
  Status start();
  // Queues `job` (already in the store, validating_files) for validation; its files are pinned
  // here. 404 file_not_found when a file went away meanwhile.
  ApiResult<FineTuningJob> submit(const FineTuningJob& job);
  // cancel / pause / resume: the job as it is now; 404 unknown, 400 when the action does not
  // apply to its status.
  ApiResult<FineTuningJob> act(std::string_view id, FtAction action);
  // Stops the training (saving its state with a state store) and joins the threads. Idempotent.
  void stop();

 private:
  enum class StopReason { kNone, kCancel, kPause, kShutdown };
  struct Done {
    Status status;
    FineTuneOutcome outcome;
  };
  using Message = std::variant<FineTuneStep, FineTuneCheckpoint, Done>;
  // The training in progress.
  struct Active {
    std::string job_id;
    std::atomic<bool> stop{false};
    StopReason reason = StopReason::kNone;  // guarded by the runner's mu_
    int64_t start_step = 0;
    int64_t start_time_ms = 0;
    int64_t stop_asked_ms = 0;  // guarded by the runner's mu_; when the stop flag was raised
    std::thread thread;
  };
  struct Files {
    std::shared_ptr<const std::string> training, validation;
  };

  void run();
  bool wait_until_ready();
  void serve_kept_models();
  void validate(const std::string& id);
  void start_training(const std::string& id);
  void on_step(const std::string& id, const FineTuneStep& s);
  void on_checkpoint(const std::string& id, const FineTuneCheckpoint& c);
  void on_done(Done done);
  void succeed(const std::string& id, const FineTuneOutcome& outcome);
  void fail(const std::string& id, FtError error);
  // Pins the job's files; false (the job failed) when one is gone.
  bool pin_files(const FineTuningJob& job) KEEL_REQUIRES(mu_);
  // The job ended: its pins and saved state go; with `drop_models`, its served checkpoints and
  // their files too.
  void release(const std::string& id, bool drop_models) KEEL_REQUIRES(mu_);
  void post(Message m);
  FtEvent event(std::string message, std::string level = "info");

  ServerContext& ctx_;
  FineTuner& tuner_;
  std::string models_dir_;
  bool own_models_dir_ = false;  // a temporary directory: removed by the destructor
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> to_validate_ KEEL_GUARDED_BY(mu_);
  std::deque<std::string> queue_ KEEL_GUARDED_BY(mu_);  // queued job ids, oldest first
  std::unordered_map<std::string, Files> files_ KEEL_GUARDED_BY(mu_);  // pinned, by job id
  std::unique_ptr<Active> active_ KEEL_GUARDED_BY(mu_);
  std::deque<Message> inbox_ KEEL_GUARDED_BY(mu_);  // from the training thread
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace keel::server
