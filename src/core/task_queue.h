// TaskQueue: one worker thread that runs posted closures, in order, each at its time — the place
// for work that must not run on an io or link-reader thread (a TE's task intake, a fault hook's
// delayed reply) without a thread per item. Closures posted for the same time run in the order
// they were posted; a closure posted for a later time runs once that time has come.
//
// stop() (and the destructor) lets the closure that runs now finish, then drops the rest unless
// `run_remaining` asks for the ones already due to run first; nothing runs after stop() returns.
//
// Thread safety: post() from any thread, including the worker (a closure may post more); stop()
// from any thread but the worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "core/mutex.h"
#include "core/thread_annotations.h"

namespace keel {

class TaskQueue {
 public:
  using Clock = std::chrono::steady_clock;

  // `name` names the worker thread (up to 15 characters show in /proc).
  explicit TaskQueue(std::string name);
  ~TaskQueue();
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Runs `fn` on the worker as soon as it is free; false (and `fn` dropped) once stopped.
  bool post(std::function<void()> fn) { return post_at(Clock::time_point::min(), std::move(fn)); }
  // Runs `fn` on the worker once `when` has come.
  bool post_at(Clock::time_point when, std::function<void()> fn);
  bool post_after(Clock::duration delay, std::function<void()> fn) {
    return post_at(Clock::now() + delay, std::move(fn));
  }
  // Closures posted and not yet started.
  [[nodiscard]] size_t pending() const;
  void stop(bool run_remaining = false);

 private:
  void run();

  mutable Mutex mu_;
  std::condition_variable cv_;
  // By (time, sequence): one time's closures in posting order.
  std::map<std::pair<Clock::time_point, uint64_t>, std::function<void()>> queue_
      KEEL_GUARDED_BY(mu_);
  uint64_t next_seq_ KEEL_GUARDED_BY(mu_) = 0;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  bool run_remaining_ KEEL_GUARDED_BY(mu_) = false;
  const std::string name_;
  std::thread worker_;
};

}  // namespace keel
