// choose_peer_hint: see peer_hint.h.
#include "cluster/job/peer_hint.h"

namespace keel::cluster {

std::optional<PeerHint> choose_peer_hint(std::string_view chosen_te_id,
                                         std::span<const PeerCandidate> tes) {
  const PeerCandidate* chosen = nullptr;
  for (const PeerCandidate& t : tes) {
    if (t.te_id == chosen_te_id) chosen = &t;
  }
  if (chosen == nullptr || chosen->fetch_address.empty()) return std::nullopt;
  const PeerCandidate* best = nullptr;
  for (const PeerCandidate& t : tes) {
    if (&t == chosen || !t.healthy || t.fetch_address.empty()) continue;
    if (t.match.num_blocks <= chosen->match.num_blocks) continue;
    if (best == nullptr || t.match.num_blocks > best->match.num_blocks ||
        (t.match.num_blocks == best->match.num_blocks &&
         t.match.num_pool_blocks > best->match.num_pool_blocks)) {
      best = &t;
    }
  }
  if (best == nullptr) return std::nullopt;
  return PeerHint{best->te_id, best->fetch_address, chosen->match.num_blocks,
                  best->match.num_blocks};
}

}  // namespace keel::cluster
