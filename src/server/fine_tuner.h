// FineTuner: what the fine-tuning API (fine_tuning_runner.h) asks of a trainer — checking a chat
// JSONL file line by line, and training a LoRA adapter for the served model from the files'
// bytes, stoppable and resumable. The server reaches the trainer only through this interface (it
// does not link the model or the trainer): `keel serve` gives host::FinetuneBackend
// (src/host/finetune_backend.h), the server tests a fake.
//
// Resumable state is opaque bytes: what train() returns when stopped, or hands to on_checkpoint
// at an epoch's end, given back as `resume_state` continues the run exactly (the same remaining
// steps and losses as a run that never stopped, for the same spec).
//
// Thread safety: check_data() and train() may run at the same time on different threads (the
// runner validates one job while another trains); train() is called on a thread of its own,
// which it may lower to idle priority, and its hooks run on that thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/result.h"

namespace keel::server {

// What a data file holds (check_data).
struct FineTuneDataSummary {
  int64_t examples = 0;   // conversations
  int64_t tokens = 0;     // Σ tokens of the rendered conversations
  int64_t targets = 0;    // trained tokens per epoch
  int64_t truncated = 0;  // conversations cut to the model's context
};

// One training run.
struct FineTuneSpec {
  std::string job_id;
  std::shared_ptr<const std::string> training;    // chat JSONL (required)
  std::shared_ptr<const std::string> validation;  // chat JSONL, null = none
  int32_t n_epochs = 1;
  int32_t batch_size = 1;
  double learning_rate_multiplier = 1.0;  // × the trainer's base learning rate
  uint64_t seed = 0;
  std::string out_dir;  // where the adapter files go (exists)
};

// One optimizer step.
struct FineTuneStep {
  int64_t step = 0;  // 1-based, over the whole run
  int64_t total_steps = 0;
  int32_t epoch = 0;  // 1-based
  double train_loss = 0.0;
  double train_accuracy = 0.0;  // share of the step's trained tokens that were the argmax
  int64_t trained_tokens = 0;   // so far
};

// An epoch's end: a servable adapter file and the state to resume from.
struct FineTuneCheckpoint {
  int64_t step = 0;
  int32_t epoch = 0;
  std::string adapter_path;  // in spec.out_dir
  double train_loss = 0.0;   // of the epoch's last step
  double train_accuracy = 0.0;
  std::optional<double> valid_loss;  // over the whole validation file, with a validation file
  std::optional<double> valid_accuracy;
  std::string state;  // resumable state at this checkpoint
};

struct FineTuneHooks {
  std::function<void(const FineTuneStep&)> on_step;              // may be empty
  std::function<void(const FineTuneCheckpoint&)> on_checkpoint;  // may be empty
  // Polled at least every ~100 ms of training; once true train() returns `stopped`.
  const std::atomic<bool>* stop = nullptr;
};

struct FineTuneOutcome {
  bool stopped = false;
  std::string state;         // stopped: the resumable state of the last finished step
  int64_t step = 0;          // steps taken in all
  std::string adapter_path;  // finished: the final adapter, in spec.out_dir
  int64_t trained_tokens = 0;
};

class FineTuner {
 public:
  virtual ~FineTuner() = default;
  // The summary of a chat JSONL file, or InvalidArgument "line N: ..." naming the first bad line.
  virtual Result<FineTuneDataSummary> check_data(const std::string& jsonl) = 0;
  // Trains (from `resume_state` when non-empty). Errors: bad data or a state that does not fit
  // (InvalidArgument), the model's or the disk's.
  virtual Result<FineTuneOutcome> train(const FineTuneSpec& spec, const std::string& resume_state,
                                        const FineTuneHooks& hooks) = 0;
};

}  // namespace keel::server
