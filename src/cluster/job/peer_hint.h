// The job executor's tier-T3 hint as a pure function: after the router picked a TE, is there
// another TE holding more of the prompt's leading blocks (per the JE's prefix index, any tier)
// that the chosen one could fetch them from? The chosen TE decides whether fetching is worth it
// (its measured link and prefill costs, kv::peer_blocks_to_fetch); the JE only points.
//
// Rules: no hint unless the chosen TE runs a fetch service itself (it has peer fetching on);
// candidates are the other healthy TEs with a fetch address; the best holds the most leading
// blocks, then the most of them in its pool (a pool read needs no tier read on the peer), then
// comes first; it must hold more than the chosen TE.
// Thread safety: pure function over values.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cluster/job/prefix_index.h"
#include "cluster/protocol/messages.h"

namespace keel::cluster {

struct PeerCandidate {
  std::string te_id;
  std::string fetch_address;  // its KV fetch service; "" = it serves none
  bool healthy = true;
  PrefixMatch match;  // the prompt's leading blocks it holds
};

[[nodiscard]] std::optional<PeerHint> choose_peer_hint(std::string_view chosen_te_id,
                                                       std::span<const PeerCandidate> tes);

}  // namespace keel::cluster
