// TaskQueue (see task_queue.h): the worker loop over a time-ordered map of closures.
#include "core/task_queue.h"

#include <pthread.h>

#include <exception>

#include "core/log.h"

namespace keel {

TaskQueue::TaskQueue(std::string name) : name_(std::move(name)) {
  worker_ = std::thread([this] { run(); });
}

TaskQueue::~TaskQueue() { stop(); }

bool TaskQueue::post_at(Clock::time_point when, std::function<void()> fn) {
  MutexLock lock(mu_);
  if (stopping_) return false;
  queue_.emplace(std::make_pair(when, next_seq_++), std::move(fn));
  cv_.notify_one();
  return true;
}

size_t TaskQueue::pending() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void TaskQueue::stop(bool run_remaining) {
  {
    MutexLock lock(mu_);
    if (!stopping_) run_remaining_ = run_remaining;
    stopping_ = true;
    cv_.notify_one();
  }
  if (worker_.joinable()) worker_.join();
  MutexLock lock(mu_);
  queue_.clear();
}

void TaskQueue::run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  UniqueLock lock(mu_);
  while (true) {
    if (queue_.empty()) {
      if (stopping_) return;
      cv_.wait(lock.native(), [&] {
        mu_.assert_held();
        return stopping_ || !queue_.empty();
      });
      continue;
    }
    const auto first = queue_.begin();
    const Clock::time_point when = first->first.first;
    const bool due = when <= Clock::now();
    if (stopping_ && (!run_remaining_ || !due)) return;
    if (!due) {
      cv_.wait_until(lock.native(), when);
      continue;
    }
    std::function<void()> fn = std::move(first->second);
    queue_.erase(first);
    lock.unlock();
    try {
      fn();
    } catch (const std::exception& e) {  // a closure's bug must not take the process down
      KEEL_LOG_ERROR("task queue {}: a task failed: {}", name_, e.what());
    }
    lock.lock();
  }
}

}  // namespace keel
