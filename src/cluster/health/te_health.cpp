// Health from progress (see te_health.h).
#include "cluster/health/te_health.h"

namespace keel::cluster::health {

std::string_view te_state_name(TeState state) {
  switch (state) {
    case TeState::kHealthy:
      return "healthy";
    case TeState::kBusy:
      return "busy";
    case TeState::kHung:
      return "hung";
    case TeState::kDead:
      return "dead";
  }
  return "?";
}

std::optional<TeState> parse_te_state(std::string_view name) {
  for (TeState s : {TeState::kHealthy, TeState::kBusy, TeState::kHung, TeState::kDead}) {
    if (te_state_name(s) == name) return s;
  }
  return std::nullopt;
}

Status HealthConfig::validate() const {
  if (hang_timeout.count() <= 0) return Status::invalid_argument("hang timeout must be > 0");
  if (report_timeout.count() <= 0) return Status::invalid_argument("report timeout must be > 0");
  return Status::ok_status();
}

TeState classify(const TeProgressSnapshot& te, const HealthConfig& config) {
  if (!te.link_open) return TeState::kDead;
  if (!te.reported) return TeState::kHealthy;  // starting: the JE routes nothing to it yet
  if (te.since_report > config.report_timeout) return TeState::kHung;
  if (!te.has_work) return TeState::kHealthy;
  if (te.since_progress > config.hang_timeout) return TeState::kHung;
  return TeState::kBusy;
}

TeState shown_state(TeState shown, bool in_service, bool reported, TeState verdict) {
  if (in_service) return verdict;
  if (verdict == TeState::kDead && shown != TeState::kHung) return TeState::kDead;
  if (reported && serving(shown)) return TeState::kDead;
  return shown;
}

}  // namespace keel::cluster::health
