// SemiPdControlLoop: dynamic semi-PD (`keel serve --mode semi-pd --semi-pd-dynamic`). A thread
// that, once per time window, takes the engine's window (SemiPdEngine::take_window), forms the
// controller's observation (semi_pd_window_stats.h), calls SemiPdController::on_window, applies the
// split it chooses with SemiPdEngine::set_split when it changed, records the decision for /metrics
// (SemiPdEngine::note_decision) and logs it as one JSON line. A time window is used rather than a
// count of iterations: a window with no traffic yields no samples and the controller keeps.
//
// Ownership: the owner (the serve command) creates it after the engine started and destroys it
// before the engine goes; the destructor stops and joins the thread. No singletons.
// Thread safety: construction and destruction on the owner's thread; the loop runs on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>

#include "core/mutex.h"
#include "engine/semi_pd_controller.h"
#include "engine/semi_pd_engine.h"

namespace keel::host {

// The decision of one window as one JSON object (one log line): the observation, the reason, the
// fits and the predictions.
[[nodiscard]] std::string semi_pd_decision_json(const engine::WindowObservation& obs,
                                                const engine::Decision& d);

class SemiPdControlLoop {
 public:
  // `engine` is borrowed and outlives the loop; `cfg` must validate; `window` > 0.
  SemiPdControlLoop(engine::SemiPdEngine* engine, engine::ControllerConfig cfg,
                    std::chrono::milliseconds window);
  SemiPdControlLoop(const SemiPdControlLoop&) = delete;
  SemiPdControlLoop& operator=(const SemiPdControlLoop&) = delete;
  ~SemiPdControlLoop();  // stop() and join

  void stop();

 private:
  void run();
  void one_window() KEEL_EXCLUDES(mu_);

  engine::SemiPdEngine* engine_;
  engine::SemiPdController controller_;  // the loop thread's only
  const double percentile_;
  const std::chrono::milliseconds window_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ KEEL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace keel::host
