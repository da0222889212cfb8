// ChannelRemoteExperts: model::RemoteExperts over ExpertChannels (ep/expert_channel.h) — an
// expert-parallel leader's view of its expert members, on this host (ShmChannel) or others
// (UcxChannel). connect() says hello to each member and waits for its kReady;
// dispatch() splits a layer's remote slots by owner (expert e of n lives on shard ⌊e · count / n⌋,
// model::ExpertShard), writes each member's kWork frame into its request mailbox (the batch's rows,
// its slots) and wakes it; collect() waits for each reply and places the outputs at their slots. A
// member that dies, does not answer within step_timeout or answers with an error loses the
// instance: that call and every later one fail with Unavailable naming the member (a member's state
// cannot be rebuilt behind the engine's back; its manager restarts the gang). The destructor says
// kBye to the members still reachable.
//
// Timing (stats()): per call the round trip (dispatch to the reply seen), the member's own compute
// time, how long collect() waited, and the part of that wait the members' compute does not explain
// (the exchange left exposed after the overlap with the leader's own experts), and the slots
// each member computed (how evenly replicated experts spread the work).
//
// Thread safety: dispatch/collect from one thread; stats() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "ep/expert_channel.h"
#include "ep/expert_frame.h"
#include "model/expert_placement.h"
#include "model/expert_shard.h"
#include "model/model.h"
#include "model/remote_experts.h"

namespace keel::ep {

// One member as the leader reaches it.
struct MemberLink {
  std::unique_ptr<ExpertChannel> channel;  // connected to the member
  int32_t shard = 1;                       // its ExpertShard::index
  std::function<bool()> alive;             // whether its process still runs (empty: assumed)
  std::string name;                        // for messages: "expert member 1 (pid 123)"
};

struct RemoteExpertsStats {
  int64_t calls = 0;            // dispatches that reached at least one member
  double round_trip_s = 0;      // Σ dispatch → last reply seen
  double member_compute_s = 0;  // Σ the members' compute (the slowest member per call)
  double collect_wait_s = 0;    // Σ time blocked in collect()
  // Σ the part of each wait that the members' compute does not explain: the wait less the slowest
  // member's compute beyond the leader's own work since the dispatch — the exchange left exposed.
  double exposed_s = 0;
  int64_t slots = 0;  // remote slots computed
  // Slots computed per member, in the order of the members given to connect().
  std::vector<int64_t> member_slots;
};

class ChannelRemoteExperts final : public model::RemoteExperts {
 public:
  // `model`: the leader's (its shape goes into the hello); shard_count: members + 1; max_rows:
  // the leader's batch size. Unavailable when a member does not answer within hello_timeout, its
  // refusal otherwise.
  // on_lost (optional) is told first, once, when a member is lost, on the caller's thread, and may
  // end the process. placement (optional, borrowed for the call): replicated experts — each
  // member's hello names its replicas, and dispatch() follows ExpertWork::slot_shard.
  static Result<std::unique_ptr<ChannelRemoteExperts>> connect(
      std::vector<MemberLink> members, const model::Model& model, int32_t shard_count,
      int32_t max_rows, std::chrono::milliseconds hello_timeout,
      std::chrono::milliseconds step_timeout, std::function<void(const Status&)> on_lost = {},
      const model::ExpertPlacement* placement = nullptr);
  ~ChannelRemoteExperts() override;
  ChannelRemoteExperts(const ChannelRemoteExperts&) = delete;
  ChannelRemoteExperts& operator=(const ChannelRemoteExperts&) = delete;

  Status dispatch(const model::ExpertWork& work) override;
  Status collect(float* ys) override;

  [[nodiscard]] RemoteExpertsStats stats() const;

 private:
  struct Member {
    MemberLink link;
    uint32_t seen = 0;                        // the last reply number consumed
    bool sent = false;                        // a work frame is out
    std::vector<int32_t> row, expert, index;  // this call's slots and their places in the work
    std::shared_ptr<std::atomic<int64_t>> slots = std::make_shared<std::atomic<int64_t>>(0);
  };
  ChannelRemoteExperts(std::vector<Member> members, int32_t shard_count, int32_t n_embd,
                       int64_t n_expert, std::chrono::milliseconds step_timeout)
      : members_(std::move(members)),
        shard_count_(shard_count),
        n_embd_(n_embd),
        n_expert_(n_expert),
        step_timeout_(step_timeout) {}
  Status lose(const Member& m, const Status& why);
  // Waits for member m's reply to the frame it was sent; the reply frame.
  Result<Frame> await_reply(Member& m, std::chrono::milliseconds timeout);

  std::vector<Member> members_;
  int32_t shard_count_;
  int32_t n_embd_;
  int64_t n_expert_;
  std::chrono::milliseconds step_timeout_;
  Status lost_;  // set once: every later call fails with it
  std::function<void(const Status&)> on_lost_;
  std::chrono::steady_clock::time_point dispatched_at_;
  std::atomic<int64_t> calls_{0}, slots_{0}, round_trip_ns_{0}, compute_ns_{0}, wait_ns_{0},
      exposed_ns_{0};
};

}  // namespace keel::ep
