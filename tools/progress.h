// ProgressReporter: shows the progress of a long step (loading a model, writing one) on stderr —
// a redrawn bar when stderr is a terminal, a plain log line per 10% otherwise (CI logs, pipes).
//
// Thread safety: one owner; update() is cheap enough to call per tensor or per 64 MiB chunk.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace keel::cli {

// Seconds elapsed on the steady clock since `t` (the training commands' progress lines).
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class ProgressReporter {
 public:
  // `label` names the step ("loading model.gguf"); `unit` is "B" for bytes or "" for counts.
  ProgressReporter(std::string label, std::string unit, bool enabled = true);
  ~ProgressReporter();  // finishes the line if the bar was drawn

  void update(uint64_t done, uint64_t total);
  void finish();

 private:
  std::string label_;
  std::string unit_;
  bool enabled_;
  bool tty_;
  bool finished_ = false;
  int last_decile_ = -1;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace keel::cli
