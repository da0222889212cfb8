// WeightsHasher (see weights_hasher.h): a streaming XXH3-64 state fed on its own thread.
#include "cluster/weights/weights_hasher.h"

#include <xxhash.h>

#include <algorithm>
#include <memory>

namespace keel::cluster {

namespace {
// Hashed per step, so a stop request is seen within a few milliseconds.
constexpr uint64_t kStepBytes = uint64_t{16} << 20;
}  // namespace

WeightsHasher::WeightsHasher(const std::byte* bytes, uint64_t total)
    : bytes_(bytes), total_(total), thread_([this] { run(); }) {}

WeightsHasher::~WeightsHasher() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WeightsHasher::advance(uint64_t available) {
  {
    MutexLock lock(mu_);
    if (available <= available_) return;
    available_ = std::min(available, total_);
  }
  cv_.notify_all();
}

Result<uint64_t> WeightsHasher::result(std::chrono::steady_clock::time_point deadline) {
  UniqueLock lock(mu_);
  if (!cv_.wait_until(lock.native(), deadline, [&] {
        mu_.assert_held();  // a wait's predicate runs under its lock
        return hashed_ == total_;
      })) {
    return Status::unavailable("weights hash: " + std::to_string(hashed_) + " of " +
                               std::to_string(total_) + " bytes hashed by the deadline");
  }
  return digest_;
}

void WeightsHasher::run() {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  UniqueLock lock(mu_);
  while (true) {
    cv_.wait(lock.native(), [&] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stop_ || available_ > hashed_;
    });
    if (stop_) return;
    const uint64_t from = hashed_;
    const uint64_t to = std::min(available_, from + kStepBytes);
    lock.unlock();
    XXH3_64bits_update(state.get(), bytes_ + from, to - from);  // final bytes: no lock needed
    lock.lock();
    hashed_ = to;
    if (hashed_ == total_) {
      digest_ = XXH3_64bits_digest(state.get());
      cv_.notify_all();
      return;
    }
  }
}

}  // namespace keel::cluster
