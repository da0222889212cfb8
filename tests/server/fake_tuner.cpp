// FakeTuner (see fake_tuner.h).
#include "fake_tuner.h"

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace keel::server::testing {

Result<FineTuneDataSummary> FakeTuner::check_data(const std::string& jsonl) {
  FineTuneDataSummary s;
  size_t line = 0, pos = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string::npos) end = jsonl.size();
    const std::string text = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("messages")) {
      return Status::invalid_argument("line " + std::to_string(line) +
                                      ": not a conversation (no \"messages\")");
    }
    ++s.examples;
    s.tokens += 10;
    s.targets += 4;
  }
  if (s.examples == 0) return Status::invalid_argument("the file holds no conversation");
  return s;
}

namespace {

Result<std::string> write_fake_adapter(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "fake adapter\n";
  return path;
}

}  // namespace

Result<FineTuneOutcome> FakeTuner::train(const FineTuneSpec& spec, const std::string& resume_state,
                                         const FineTuneHooks& hooks) {
  ++running_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    resumes_.push_back(resume_state);
  }
  const auto finish = [&](FineTuneOutcome o) {
    std::lock_guard<std::mutex> lock(mu_);
    last_return_ = std::chrono::steady_clock::now();
    --running_;
    return o;
  };
  Result<FineTuneDataSummary> data = check_data(*spec.training);
  if (!data.ok()) {
    finish({});
    return data.status();
  }
  const int64_t per_epoch = (data->examples + spec.batch_size - 1) / spec.batch_size;
  const int64_t total = per_epoch * spec.n_epochs;
  int64_t step = resume_state.empty() ? 0 : std::stoll(resume_state.substr(5));
  FineTuneOutcome out;
  while (step < total) {
    for (int ms = 0; ms < step_ms_; ++ms) {
      if (hooks.stop != nullptr && hooks.stop->load()) {
        out.stopped = true;
        out.step = step;
        out.state = "step=" + std::to_string(step);
        return finish(out);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ++step;
    const auto epoch = static_cast<int32_t>((step - 1) / per_epoch + 1);
    if (hooks.on_step) {
      hooks.on_step({step, total, epoch, 1.0 / static_cast<double>(step), 0.5, step * 10});
    }
    if (step % per_epoch == 0 && hooks.on_checkpoint) {
      FineTuneCheckpoint c;
      c.step = step;
      c.epoch = epoch;
      c.adapter_path =
          *write_fake_adapter(spec.out_dir, "ckpt-step-" + std::to_string(step) + ".gguf");
      c.train_loss = 1.0 / static_cast<double>(step);
      c.train_accuracy = 0.5;
      if (spec.validation != nullptr) {
        c.valid_loss = 2.0 / static_cast<double>(step);
        c.valid_accuracy = 0.25;
      }
      c.state = "step=" + std::to_string(step);
      hooks.on_checkpoint(c);
    }
  }
  out.step = step;
  out.trained_tokens = step * 10;
  out.adapter_path = *write_fake_adapter(spec.out_dir, "model.gguf");
  return finish(out);
}

std::vector<std::string> FakeTuner::resumes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resumes_;
}

std::chrono::steady_clock::time_point FakeTuner::last_return() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_return_;
}

}  // namespace keel::server::testing
