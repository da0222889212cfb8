// KV-link probe: tells a saturated decode side from a dead link while a prefill TE waits for its
// KV handoff to be delivered. The prefill side watches its transfer client's sent-block count
// while the flush is outstanding: blocks that keep completing, however slowly, mean the link is
// delayed (a busy receiver, a throttled link) and the handoff keeps waiting up to its deadline;
// no block completing for `blocked_after` means the link is blocked (a stalled or dead peer, no
// byte moves) and the handoff gives up at once, so the job is re-driven colocated on the prefill
// TE (which holds the prompt's KV) instead of hanging until the deadline.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace keel::cluster {

enum class KvLinkState {
  kClear,    // nothing outstanding: every block queued was delivered
  kDelayed,  // blocks outstanding and still moving
  kBlocked,  // blocks outstanding and none moved for blocked_after
};
[[nodiscard]] std::string_view kv_link_state_name(KvLinkState state);  // "clear", ...

struct KvLinkProgress {
  bool outstanding = false;                  // queued blocks not yet delivered (flush pending)
  std::chrono::milliseconds since_moved{0};  // since the sent-block count last changed
};

[[nodiscard]] KvLinkState classify_kv_link(const KvLinkProgress& link,
                                           std::chrono::milliseconds blocked_after);

// Follows one transfer's sent-block count over time (the handoff's flush loop feeds it).
class KvLinkWatch {
 public:
  using Clock = std::chrono::steady_clock;
  KvLinkWatch(int64_t blocks_sent, Clock::time_point now) : sent_(blocks_sent), moved_at_(now) {}
  // A sample taken while the flush is outstanding.
  [[nodiscard]] KvLinkState sample(int64_t blocks_sent, Clock::time_point now,
                                   std::chrono::milliseconds blocked_after) {
    if (blocks_sent != sent_) {
      sent_ = blocks_sent;
      moved_at_ = now;
    }
    return classify_kv_link(
        {true, std::chrono::duration_cast<std::chrono::milliseconds>(now - moved_at_)},
        blocked_after);
  }

 private:
  int64_t sent_;
  Clock::time_point moved_at_;
};

}  // namespace keel::cluster
