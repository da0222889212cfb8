// KV-link probe (see kv_link_probe.h).
#include "cluster/health/kv_link_probe.h"

namespace keel::cluster {

std::string_view kv_link_state_name(KvLinkState state) {
  switch (state) {
    case KvLinkState::kClear:
      return "clear";
    case KvLinkState::kDelayed:
      return "delayed";
    case KvLinkState::kBlocked:
      return "blocked";
  }
  return "?";
}

KvLinkState classify_kv_link(const KvLinkProgress& link, std::chrono::milliseconds blocked_after) {
  if (!link.outstanding) return KvLinkState::kClear;
  return link.since_moved >= blocked_after ? KvLinkState::kBlocked : KvLinkState::kDelayed;
}

}  // namespace keel::cluster
