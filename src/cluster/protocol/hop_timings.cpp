// HopTimings (see hop_timings.h): per-hop histograms and the slow-request log line.
#include "cluster/protocol/hop_timings.h"

#include <fmt/format.h>

namespace keel::cluster {

namespace {

SecondsHistogram hop_histogram() {
  return SecondsHistogram{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                          0.25,   0.5,   1.0,    2.5,   5.0,  10.0,  30.0};
}

}  // namespace

std::string describe_hops(const std::string& request_id, double placed_s,
                          const nlohmann::json& hops) {
  std::string parts;
  for (const char* name : kHopNames) {
    const auto it = hops.is_object() ? hops.find(name) : hops.end();
    if (it == hops.end() || !it->is_number()) continue;
    if (!parts.empty()) parts += ", ";
    parts += fmt::format("{} {:.3f} s", name, it->get<double>());
  }
  return fmt::format("request {} placed in {:.3f} s ({})", request_id.empty() ? "-" : request_id,
                     placed_s, parts.empty() ? "no hops reported" : parts);
}

HopTimings::HopTimings() {
  hist_.emplace("placed", hop_histogram());
  for (const char* name : kHopNames) hist_.emplace(name, hop_histogram());
}

void HopTimings::observe(double placed_s, const nlohmann::json& hops) {
  MutexLock lock(mu_);
  hist_.at("placed").add(placed_s);
  if (!hops.is_object()) return;
  for (const char* name : kHopNames) {
    const auto it = hops.find(name);
    if (it != hops.end() && it->is_number()) hist_.at(name).add(it->get<double>());
  }
}

std::string HopTimings::metrics_text() const {
  MutexLock lock(mu_);
  std::string text =
      "# HELP keel:request_hop_seconds Time a request spent on each hop while it was placed "
      "(gateway, JE, TE)\n# TYPE keel:request_hop_seconds histogram\n";
  for (const auto& [name, h] : hist_) {
    text += h.text("keel:request_hop_seconds", fmt::format("hop=\"{}\"", name));
  }
  return text;
}

}  // namespace keel::cluster
