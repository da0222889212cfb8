// FineTuningJob: one job of /v1/fine_tuning/jobs as OpenAI's fine_tuning.job object describes it,
// with its events (fine_tuning.job.event) and checkpoints (fine_tuning.job.checkpoint): their
// JSON for the API (to_json) and the JSON the state store keeps (to_state_json / *_from_state_json:
// the API object plus what only keel needs), the names of the served models, and the status rules
// as a pure function.
//
// Status flow: validating_files → queued → running → succeeded; validating_files → failed (a bad
// line), running → failed (the trainer's error); queued/running ⇄ paused (pause, resume: a
// resumed job queues again); any unfinished status → cancelled.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::server {

enum class FtStatus {
  kValidatingFiles,
  kQueued,
  kRunning,
  kPaused,
  kSucceeded,
  kFailed,
  kCancelled,
};
std::string_view ft_status_name(FtStatus status);
std::optional<FtStatus> parse_ft_status(std::string_view name);
// succeeded, failed, cancelled.
bool is_terminal(FtStatus status);

enum class FtAction { kCancel, kPause, kResume };
std::string_view ft_action_name(FtAction action);
// The status `action` moves a job in `status` to, or nullopt when it does not apply: cancel
// needs an unfinished job, pause a queued or running one, resume a paused one.
std::optional<FtStatus> status_after(FtStatus status, FtAction action);

// A job's hyperparameters; nullopt is "auto" until the training file is validated, when
// resolve_hyperparameters() fills it in.
struct FtHyperparameters {
  std::optional<int32_t> n_epochs;
  std::optional<int32_t> batch_size;
  std::optional<double> learning_rate_multiplier;
};
// "auto" resolved for a training file of `num_examples` conversations, by OpenAI's published rules
// of thumb: n_epochs 3, raised so that about 100 examples are seen (at most 25 epochs) or lowered
// so that at most about 25,000 are (at least 1); batch_size 0.2 % of the examples, in [1, 256];
// learning_rate_multiplier 1. Values that were given are kept.
FtHyperparameters resolve_hyperparameters(const FtHyperparameters& h, int64_t num_examples);

struct FtError {
  std::string code;
  std::string message;
  std::optional<std::string> param;
};

struct FtCheckpoint {
  std::string id;  // "ftckpt-<hex>"
  int64_t created_at = 0;
  int64_t step = 0;
  std::string model;         // fine_tuned_model_checkpoint, served under this name
  std::string adapter_path;  // not in the API object
  double train_loss = 0.0;
  double train_accuracy = 0.0;
  std::optional<double> valid_loss, valid_accuracy;

  [[nodiscard]] nlohmann::json to_json(std::string_view job_id) const;
};

struct FtEvent {
  std::string id;  // "ftevent-<hex>"
  int64_t created_at = 0;
  std::string level = "info";  // info | warn | error
  std::string message;
  nlohmann::json data = nlohmann::json::object();  // metrics: step, train_loss, ...
  bool metrics = false;                            // type "metrics", else "message"

  [[nodiscard]] nlohmann::json to_json() const;
  // The step of a metrics event, else nullopt.
  [[nodiscard]] std::optional<int64_t> step() const;
};
// to_json()'s inverse; Corrupt naming what is missing.
Result<FtEvent> ft_event_from_json(const nlohmann::json& j);

struct FineTuningJob {
  std::string id;  // "ftjob-<hex>"
  std::string model;
  std::string training_file;
  std::optional<std::string> validation_file;
  std::optional<std::string> suffix;
  FtHyperparameters hyperparameters;
  int64_t seed = 0;
  nlohmann::json metadata;  // null or an object of strings
  FtStatus status = FtStatus::kValidatingFiles;
  int64_t created_at = 0;
  std::optional<int64_t> finished_at, estimated_finish, trained_tokens;
  std::optional<std::string> fine_tuned_model;
  std::optional<FtError> error;
  std::vector<std::string> result_files;
  // Not in the API object:
  std::vector<FtCheckpoint> checkpoints;  // the ones kept and served, oldest first
  std::string adapter_path;               // the fine-tuned model's file (succeeded)
  int64_t step = 0;                       // optimizer steps taken
  int64_t total_steps = 0;                // 0 until training starts
  int64_t state_step = -1;                // the step of the saved resumable state; -1: none

  [[nodiscard]] nlohmann::json to_json() const;
  // to_json() plus "keel": {seq, checkpoints with their files, adapter_path, steps}.
  [[nodiscard]] nlohmann::json to_state_json(uint64_t seq) const;
};

// The job (and its `seq`) of to_state_json's output; Corrupt naming what is missing or mistyped.
Result<std::pair<FineTuningJob, uint64_t>> fine_tuning_job_from_state_json(const nlohmann::json& j);

// The results file of a finished job (OpenAI's step_metrics.csv): a header
// "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy" and a row per metrics
// event in step order, the validation columns filled at the steps whose checkpoint event carries
// them (epoch ends), empty elsewhere.
std::string fine_tuning_results_csv(const std::vector<FtEvent>& events);

// OpenAI's "ft:{base}:{org}:{suffix}:{id}" with org "keel" and id the first 8 characters after
// the job id's "ftjob-" ("" suffix: "ft:base:keel::abcd1234").
std::string fine_tuned_model_name(std::string_view base, std::string_view suffix,
                                  std::string_view job_id);
// "{model}:ckpt-step-{step}", as OpenAI names a checkpoint's model.
std::string checkpoint_model_name(std::string_view model, int64_t step);

}  // namespace keel::server
