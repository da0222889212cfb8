// ScaleOutMetrics: the scale-out phases (bind_model.h: scaler-pre, pre-load, load, post-load,
// announce) and decision → first token of every TE bound by the cluster manager, as Prometheus
// histograms for the gateway's /metrics (keel:scale_out_phase_seconds{phase=...},
// keel:scale_out_first_token_seconds), plus the JSON line of each scale-out for the event log.
//
// Thread safety: observe() and text() from any thread (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "cluster/protocol/bind_model.h"
#include "cluster/protocol/seconds_histogram.h"
#include "core/mutex.h"

namespace keel::control {

class ScaleOutMetrics {
 public:
  static constexpr int kPhases = 5;  // scaler_pre, pre_load, load, post_load, announce

  void observe(const cluster::ScaleOutPhases& p);
  // Prometheus text (HELP, TYPE, buckets, sum, count) of both histograms.
  [[nodiscard]] std::string text() const;

 private:
  static cluster::SecondsHistogram histogram() {
    return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0};
  }
  mutable Mutex mu_;
  std::array<cluster::SecondsHistogram, kPhases> phases_ KEEL_GUARDED_BY(mu_) = {
      histogram(), histogram(), histogram(), histogram(), histogram()};
  cluster::SecondsHistogram first_token_ KEEL_GUARDED_BY(mu_) = histogram();
};

// One scale-out's event-log line: {"event":"scale_out","te","pid","address","from_store",
// "store_note","decision_ns","phases_s":{...},"first_token_s","ready_s"}.
[[nodiscard]] cluster::Json scale_out_event(const std::string& te, int64_t pid,
                                            const std::string& address,
                                            const cluster::BindReply& reply);

}  // namespace keel::control
