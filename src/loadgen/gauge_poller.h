// GaugePoller: reads one gauge of the server's Prometheus /metrics at a fixed interval on its own
// thread while a benchmark runs (bench-serve's long-decode KV usage). Failed or unparsable reads
// are skipped: the poll never disturbs the run.
//
// Thread safety: start() and stop() from one thread; the samples are handed over by stop().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "loadgen/http_client.h"
#include "loadgen/length_profile.h"

namespace keel::loadgen {

class GaugePoller {
 public:
  // `metric`: e.g. "keel:kv_cache_usage_perc"; interval_s > 0.
  GaugePoller(ClientConfig client, std::string metric, double interval_s);
  ~GaugePoller();  // stops
  GaugePoller(const GaugePoller&) = delete;
  GaugePoller& operator=(const GaugePoller&) = delete;

  // Starts polling; sample times are seconds from this call.
  void start();
  // Stops and returns the samples, in time order.
  std::vector<GaugeSample> stop();

 private:
  void run();

  ClientConfig client_;
  std::string metric_;
  std::chrono::duration<double> interval_;
  std::chrono::steady_clock::time_point origin_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ KEEL_GUARDED_BY(mu_) = false;
  std::vector<GaugeSample> samples_ KEEL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace keel::loadgen
