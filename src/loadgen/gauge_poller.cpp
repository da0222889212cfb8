// GaugePoller (see gauge_poller.h).
#include "loadgen/gauge_poller.h"

#include <algorithm>

#include "loadgen/load_runner.h"

namespace keel::loadgen {

GaugePoller::GaugePoller(ClientConfig client, std::string metric, double interval_s)
    : client_(std::move(client)), metric_(std::move(metric)), interval_(interval_s) {
  // A read that hangs must not hold the run's end (stop() joins the thread).
  client_.request_timeout_s = std::min(client_.request_timeout_s, 5.0);
}

GaugePoller::~GaugePoller() { stop(); }

void GaugePoller::start() {
  origin_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

std::vector<GaugeSample> GaugePoller::stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  MutexLock lock(mu_);
  return std::move(samples_);
}

void GaugePoller::run() {
  for (;;) {
    const auto t = std::chrono::steady_clock::now();
    Result<std::string> body = http_get(client_, "/metrics");
    std::optional<double> v;
    if (body.ok()) v = parse_prometheus_gauge(*body, metric_);
    UniqueLock lock(mu_);
    if (v) samples_.push_back({std::chrono::duration<double>(t - origin_).count(), *v});
    const bool stopped = cv_.wait_for(lock.native(), interval_, [this] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stop_;
    });
    if (stopped) return;
  }
}

}  // namespace keel::loadgen
