// SecondsHistogram: a fixed-bucket histogram of durations in seconds for the cluster manager's
// /metrics (scale-out phases, TE replacement times), rendered as Prometheus text — cumulative
// `_bucket{le=...}` lines, `+Inf`, `_sum`, `_count`. Bounds are ascending and fixed at
// construction; a value above the last bound counts only in `+Inf`.
//
// Thread safety: none; its owner holds a lock around add() and text().
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace keel::cluster {

class SecondsHistogram {
 public:
  SecondsHistogram(std::initializer_list<double> bounds);

  void add(double seconds);
  // The sample lines of metric `name`, with `labels` (e.g. `phase="load"`; "" = none) on each.
  [[nodiscard]] std::string text(const std::string& name, const std::string& labels = "") const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative
  int64_t count_ = 0;
  double sum_ = 0.0;
};

}  // namespace keel::cluster
