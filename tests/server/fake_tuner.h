// FakeTuner: a FineTuner for the server tests, without a model. check_data takes a JSONL file
// whose non-blank lines are JSON objects with "messages" ("line N: ..." otherwise); train() takes
// n_epochs × ceil(examples / batch_size) steps of `step_ms` each (polling the stop flag every
// millisecond), loss 1/step, writes a small file per epoch end (a checkpoint, state "step=N")
// and at the end (model.gguf), and resumes from "step=N". It records what it was given and when
// its last run returned.
//
// Thread safety: check_data and train may run concurrently (as the runner calls them).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "server/fine_tuner.h"

namespace keel::server::testing {

class FakeTuner final : public FineTuner {
 public:
  explicit FakeTuner(int step_ms = 5) : step_ms_(step_ms) {}

  Result<FineTuneDataSummary> check_data(const std::string& jsonl) override;
  Result<FineTuneOutcome> train(const FineTuneSpec& spec, const std::string& resume_state,
                                const FineTuneHooks& hooks) override;

  // The resume states train() was called with, in order ("" for a fresh start).
  std::vector<std::string> resumes() const;
  // When the last train() returned (steady clock), and how many runs are in train() now.
  std::chrono::steady_clock::time_point last_return() const;
  int running() const { return running_.load(); }

 private:
  const int step_ms_;
  mutable std::mutex mu_;
  std::vector<std::string> resumes_;  // guarded by mu_
  std::chrono::steady_clock::time_point last_return_;
  std::atomic<int> running_{0};
};

}  // namespace keel::server::testing
