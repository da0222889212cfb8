// ScaleOutMetrics and scale_out_event (see scale_out_metrics.h).
#include "control/scaleout/scale_out_metrics.h"

namespace keel::control {
namespace {

constexpr const char* kScaleOutPhaseNames[ScaleOutMetrics::kPhases] = {
    "scaler_pre", "pre_load", "load", "post_load", "announce"};

}  // namespace

void ScaleOutMetrics::observe(const cluster::ScaleOutPhases& p) {
  const int64_t marks[] = {p.decision_ns, p.bound_ns,       p.preloaded_ns,
                           p.loaded_ns,   p.first_token_ns, p.announced_ns};
  MutexLock lock(mu_);
  for (int i = 0; i < kPhases; ++i) {
    phases_[static_cast<size_t>(i)].add(static_cast<double>(marks[i + 1] - marks[i]) * 1e-9);
  }
  first_token_.add(static_cast<double>(p.first_token_ns - p.decision_ns) * 1e-9);
}

std::string ScaleOutMetrics::text() const {
  MutexLock lock(mu_);
  std::string out =
      "# HELP keel:scale_out_phase_seconds Scale-out phases of TEs bound from the warm pool\n"
      "# TYPE keel:scale_out_phase_seconds histogram\n";
  for (int i = 0; i < kPhases; ++i) {
    out += phases_[static_cast<size_t>(i)].text(
        "keel:scale_out_phase_seconds", std::string("phase=\"") + kScaleOutPhaseNames[i] + "\"");
  }
  out +=
      "# HELP keel:scale_out_first_token_seconds Scale-out decision to the bound TE's first token\n"
      "# TYPE keel:scale_out_first_token_seconds histogram\n";
  out += first_token_.text("keel:scale_out_first_token_seconds");
  return out;
}

cluster::Json scale_out_event(const std::string& te, int64_t pid, const std::string& address,
                              const cluster::BindReply& reply) {
  const cluster::ScaleOutPhases& p = reply.phases;
  cluster::Json event{
      {"event", "scale_out"},
      {"te", te},
      {"pid", pid},
      {"address", address},
      {"from_store", reply.from_store},
      {"store_note", reply.store_note},
      {"decision_ns", p.decision_ns},
      {"phases_s", cluster::phase_seconds(p)},
      {"first_token_s", static_cast<double>(p.first_token_ns - p.decision_ns) * 1e-9},
      {"ready_s", static_cast<double>(p.announced_ns - p.decision_ns) * 1e-9}};
  event["forked"] = reply.forked;
  if (reply.forked) {
    event["fork_bytes"] = reply.fork_bytes;
    event["fork_s"] = reply.fork_seconds;
  }
  if (!reply.fork_error.empty()) event["fork_error"] = reply.fork_error;
  return event;
}

}  // namespace keel::control
