// Mutex, MutexLock and UniqueLock: std::mutex and its locks with clang's thread-safety
// annotations (core/thread_annotations.h), so that members marked KEEL_GUARDED_BY(mu_) and
// functions marked KEEL_REQUIRES(mu_) are checked by -Wthread-safety. UniqueLock is the one to
// wait on a std::condition_variable with (native()); the analysis then assumes the lock is held
// again when the wait returns, as it is.
//
// Thread safety: as std::mutex.
#pragma once

#include <mutex>

#include "core/thread_annotations.h"

namespace keel {

class KEEL_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void lock() KEEL_ACQUIRE() { m_.lock(); }
  void unlock() KEEL_RELEASE() { m_.unlock(); }
  bool try_lock() KEEL_TRY_ACQUIRE(true) { return m_.try_lock(); }
  // For the analysis only: tells it this thread holds the mutex (a callback run under it).
  void assert_held() const KEEL_THREAD_ANNOTATION(assert_capability(this)) {}
  std::mutex& native() KEEL_RETURN_CAPABILITY(this) { return m_; }

 private:
  std::mutex m_;
};

// Holds `mu` for its scope.
class KEEL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KEEL_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() KEEL_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds `mu`, may release and take it again, and waits on condition variables with native().
class KEEL_SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) KEEL_ACQUIRE(mu) : lock_(mu.native()) {}
  ~UniqueLock() KEEL_RELEASE() = default;
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;
  void lock() KEEL_ACQUIRE() { lock_.lock(); }
  void unlock() KEEL_RELEASE() { lock_.unlock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace keel
