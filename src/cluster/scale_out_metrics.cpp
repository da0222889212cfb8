// ScaleOutMetrics and scale_out_event (see scale_out_metrics.h).
#include "cluster/scale_out_metrics.h"

#include <cstdio>

namespace keel::cluster {
namespace {

constexpr const char* kPhaseNames[ScaleOutMetrics::kPhases] = {"scaler_pre", "pre_load", "load",
                                                               "post_load", "announce"};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void ScaleOutMetrics::Histogram::add(double v) {
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (v <= kBuckets[i]) {
      ++counts[i];
      break;
    }
  }
  ++count;
  sum += v;
}

void ScaleOutMetrics::observe(const ScaleOutPhases& p) {
  const int64_t marks[] = {p.decision_ns, p.bound_ns,       p.preloaded_ns,
                           p.loaded_ns,   p.first_token_ns, p.announced_ns};
  std::lock_guard lock(mu_);
  for (int i = 0; i < kPhases; ++i) {
    phases_[static_cast<size_t>(i)].add(static_cast<double>(marks[i + 1] - marks[i]) * 1e-9);
  }
  first_token_.add(static_cast<double>(p.first_token_ns - p.decision_ns) * 1e-9);
}

std::string ScaleOutMetrics::text() const {
  auto render = [](const std::string& name, const std::string& labels, const Histogram& h) {
    std::string out;
    int64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : labels + ",";
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.counts[i];
      out += name + "_bucket{" + sep + "le=\"" + number(kBuckets[i]) + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += name + "_bucket{" + sep + "le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    out += name + "_sum" + braces + " " + number(h.sum) + "\n";
    out += name + "_count" + braces + " " + std::to_string(h.count) + "\n";
    return out;
  };
  std::lock_guard lock(mu_);
  std::string out =
      "# HELP keel:scale_out_phase_seconds Scale-out phases of TEs bound from the warm pool\n"
      "# TYPE keel:scale_out_phase_seconds histogram\n";
  for (int i = 0; i < kPhases; ++i) {
    out += render("keel:scale_out_phase_seconds", std::string("phase=\"") + kPhaseNames[i] + "\"",
                  phases_[static_cast<size_t>(i)]);
  }
  out +=
      "# HELP keel:scale_out_first_token_seconds Scale-out decision to the bound TE's first token\n"
      "# TYPE keel:scale_out_first_token_seconds histogram\n";
  out += render("keel:scale_out_first_token_seconds", "", first_token_);
  return out;
}

Json scale_out_event(const std::string& te, int64_t pid, const std::string& address,
                     const BindReply& reply) {
  const ScaleOutPhases& p = reply.phases;
  return Json{{"event", "scale_out"},
              {"te", te},
              {"pid", pid},
              {"address", address},
              {"from_store", reply.from_store},
              {"store_note", reply.store_note},
              {"decision_ns", p.decision_ns},
              {"phases_s", phase_seconds(p)},
              {"first_token_s", static_cast<double>(p.first_token_ns - p.decision_ns) * 1e-9},
              {"ready_s", static_cast<double>(p.announced_ns - p.decision_ns) * 1e-9}};
}

}  // namespace keel::cluster
