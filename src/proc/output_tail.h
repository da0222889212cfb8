// OutputTail: the last lines a supervisor's children printed, each tagged with the child's name
// ("[colocated] ..."), kept for an error report — a ProcessSupervisor sink (process_supervisor.h)
// for commands that run a fleet quietly and show what it said only when something fails. With
// `echo` every line is also forwarded as it comes (and print() then prints nothing again).
//
// Invariants: at most `capacity` lines are kept, the newest last; older ones are dropped.
// Thread safety: add() may be called from any thread (the supervisor's drain threads); lines()
// and print() from any thread.
#pragma once

#include <cstddef>
#include <cstdio>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"

namespace keel::proc {

class OutputTail {
 public:
  static constexpr size_t kDefaultCapacity = 30;

  // `echo`: forward each line to `out` as it comes; `out` is borrowed for the tail's life.
  explicit OutputTail(bool echo, size_t capacity = kDefaultCapacity, std::FILE* out = stderr);

  // One line of child `name`'s output.
  void add(std::string_view name, std::string_view line);
  // The kept lines, oldest first, as "[name] line".
  [[nodiscard]] std::vector<std::string> lines() const;
  // Writes the kept lines to `out`, one per line — unless they were echoed already.
  void print() const;

 private:
  const bool echo_;
  const size_t capacity_;
  std::FILE* const out_;
  mutable Mutex mu_;  // also keeps echoed lines whole (one fprintf at a time)
  std::deque<std::string> lines_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::proc
