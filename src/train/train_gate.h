// TrainGate: how a running trainer is told to give up (stop: a cancel or a pause of the job) or to
// wait (pause: interactive work is running beside it, docs/finetune.md). The trainer's products
// over frozen weights ask it per token row and its passes before every layer; while `pause` is set
// they sleep in short slices, so the trainer's threads leave the cores, caches and memory
// bandwidth to the requests until it clears.
//
// Thread safety: the flags are atomics owned by the caller; any thread may ask.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace keel::train {

struct TrainGate {
  const std::atomic<bool>* stop = nullptr;   // set: give up (null: never)
  const std::atomic<bool>* pause = nullptr;  // set: wait until it clears (null: never)

  // Waits while paused and not stopped; then whether to stop.
  [[nodiscard]] bool should_stop() const {
    while (pause != nullptr && pause->load(std::memory_order_relaxed) && !stopped()) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return stopped();
  }

 private:
  [[nodiscard]] bool stopped() const {
    return stop != nullptr && stop->load(std::memory_order_relaxed);
  }
};

}  // namespace keel::train
