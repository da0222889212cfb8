// LocalRing: the CpRing (model/context_parallel.h) of a context-parallel group whose members are
// threads of one process — each member's inbox a queue of shared messages, so passing a shard on
// copies nothing. close() ends every wait (a member that failed tells the others at once rather
// than leaving them to time out).
//
// Thread safety: each end is used by its member's thread; close() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <vector>

#include "core/mutex.h"
#include "model/context_parallel.h"

namespace keel::cp {

class LocalRing {
 public:
  // n_members ≥ 1 ends; a wait longer than `timeout` fails with Unavailable.
  explicit LocalRing(int n_members,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));
  ~LocalRing();
  LocalRing(const LocalRing&) = delete;
  LocalRing& operator=(const LocalRing&) = delete;

  [[nodiscard]] model::CpRing& end(int rank);
  [[nodiscard]] int size() const { return static_cast<int>(ends_.size()); }
  void close();

 private:
  class End;
  struct Shared {
    Mutex mu;
    std::condition_variable cv;
    std::vector<std::deque<model::CpMessage>> inbox KEEL_GUARDED_BY(mu);  // [rank]
    bool closed KEEL_GUARDED_BY(mu) = false;
    std::chrono::milliseconds timeout;
  };
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<End>> ends_;
};

}  // namespace keel::cp
