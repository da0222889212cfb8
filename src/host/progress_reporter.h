// ProgressReporter: shows the progress of a long step (loading a model's weights, downloading or
// writing one) — a redrawn bar when the stream is a terminal, a plain log line per 10% otherwise
// (CI logs, pipes). `keel serve`, `keel run` and the model-writing commands use it; a task
// executor loading weights will.
//
// Invariants: nothing is printed when disabled, after finish(), or for a total of 0; a terminal
// bar is redrawn at most once per percent, a log line at most once per decile.
// Thread safety: one owner; update() is cheap enough to call per tensor or per 64 MiB chunk.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace keel::host {

// Seconds elapsed on the steady clock since `t` (progress and timing lines).
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// `v` for people: "1.5 MiB" with `unit` "B", else the plain count.
[[nodiscard]] std::string human_amount(uint64_t v, const std::string& unit);

class ProgressReporter {
 public:
  // `label` names the step ("loading model.gguf"); `unit` is "B" for bytes or "" for counts;
  // `out` is where it prints (borrowed for the reporter's life), a bar when it is a terminal.
  ProgressReporter(std::string label, std::string unit, bool enabled = true,
                   std::FILE* out = stderr);
  ~ProgressReporter();  // finishes the line if the bar was drawn

  void update(uint64_t done, uint64_t total);
  void finish();

 private:
  std::string label_;
  std::string unit_;
  bool enabled_;
  std::FILE* out_;
  bool tty_;
  bool finished_ = false;
  int last_decile_ = -1;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace keel::host
