// plan_bind_sources and the mode names (see bind_source.h).
#include "cluster/weights/bind_source.h"

namespace keel::cluster {

std::string_view bind_source_mode_name(BindSourceMode mode) {
  switch (mode) {
    case BindSourceMode::kAuto:
      return "auto";
    case BindSourceMode::kStore:
      return "store";
    case BindSourceMode::kFork:
      return "fork";
    case BindSourceMode::kDisk:
      return "disk";
  }
  return "auto";
}

std::optional<BindSourceMode> parse_bind_source_mode(std::string_view name) {
  for (BindSourceMode m : {BindSourceMode::kAuto, BindSourceMode::kStore, BindSourceMode::kFork,
                           BindSourceMode::kDisk}) {
    if (bind_source_mode_name(m) == name) return m;
  }
  return std::nullopt;
}

std::string_view bind_source_kind_name(BindSourceKind kind) {
  switch (kind) {
    case BindSourceKind::kStore:
      return "store";
    case BindSourceKind::kFork:
      return "fork";
    case BindSourceKind::kDisk:
      return "disk";
  }
  return "disk";
}

std::vector<BindSourcePlan> plan_bind_sources(BindSourceMode mode,
                                              const std::vector<BindTarget>& targets,
                                              const std::vector<std::string>& peers) {
  std::vector<BindSourcePlan> plans;
  std::string relay;  // the nearest earlier forking target that can pass the chunks on
  for (const BindTarget& t : targets) {
    BindSourcePlan p;
    const bool may_store = mode == BindSourceMode::kAuto || mode == BindSourceMode::kStore;
    const bool may_fork = mode == BindSourceMode::kAuto || mode == BindSourceMode::kFork;
    const std::string source = !relay.empty() ? relay : (peers.empty() ? "" : peers.front());
    if (may_store && t.entry_in_store) {
      p.kind = BindSourceKind::kStore;
      p.why = "the host store holds the entry";
    } else if (may_fork && !source.empty()) {
      p.kind = BindSourceKind::kFork;
      p.fork_from = source;
      p.why = source == relay ? "chain relay from a TE bound in the same scale-out"
                              : "a running TE serves the entry";
      if (!t.weights_address.empty()) relay = t.weights_address;
    } else if (mode == BindSourceMode::kDisk) {
      p.why = "--bind-source disk";
    } else {
      p.why = may_fork ? "no store entry and no ready peer serves it" : "no store entry";
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace keel::cluster
