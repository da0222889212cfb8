// WeightsHasher: the whole-entry XXH3-64 of a weights stream, computed while the stream arrives —
// on a thread of its own, over the in-order prefix of the partial entry's mapping that the
// receiver has filed so far — so that at the end of the stream only the last chunk remains to be
// hashed instead of the whole entry (weights_receiver.h).
//
// Invariant: bytes [0, available) of `bytes` never change once advance() announced them (the
// receiver files each offset once and receives no payload in place over a filed one). The result
// equals XXH3_64bits(bytes, total) (seed 0, the frame checksum's function).
//
// Thread safety: advance() and result() from any thread; the destructor stops the thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "core/mutex.h"
#include "core/result.h"

namespace keel::cluster {

class WeightsHasher {
 public:
  // Hashes `total` bytes at `bytes` (which must outlive this object) as they become available.
  WeightsHasher(const std::byte* bytes, uint64_t total);
  ~WeightsHasher();
  WeightsHasher(const WeightsHasher&) = delete;
  WeightsHasher& operator=(const WeightsHasher&) = delete;

  // Bytes [0, available) are final. Monotonic: a smaller value than before is ignored.
  void advance(uint64_t available);
  // The digest once all `total` bytes are available and hashed; Unavailable at the deadline.
  Result<uint64_t> result(std::chrono::steady_clock::time_point deadline);

 private:
  void run();

  const std::byte* bytes_;
  const uint64_t total_;
  Mutex mu_;
  std::condition_variable cv_;
  uint64_t available_ KEEL_GUARDED_BY(mu_) = 0;
  uint64_t hashed_ KEEL_GUARDED_BY(mu_) = 0;
  uint64_t digest_ KEEL_GUARDED_BY(mu_) = 0;  // valid once hashed_ == total_
  bool stop_ KEEL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the fields above
};

}  // namespace keel::cluster
