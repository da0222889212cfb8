// SecondsHistogram (see seconds_histogram.h).
#include "cluster/protocol/seconds_histogram.h"

#include <cstdio>

namespace keel::cluster {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

SecondsHistogram::SecondsHistogram(std::initializer_list<double> bounds)
    : bounds_(bounds), counts_(bounds_.size(), 0) {}

void SecondsHistogram::add(double seconds) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (seconds <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += seconds;
}

std::string SecondsHistogram::text(const std::string& name, const std::string& labels) const {
  std::string out;
  int64_t cumulative = 0;
  const std::string sep = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + sep + "le=\"" + number(bounds_[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{" + sep + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
  return out;
}

}  // namespace keel::cluster
