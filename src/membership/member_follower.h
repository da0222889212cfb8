// MemberFollower: one process's view of the members of one kind (e.g. the TEs of one model), kept
// in step with the membership. start() opens a watch first, then lists the live members and
// reports each as added — so a member registered between the two is not lost — and a thread then
// reads the watch and reports additions and removals. A member is reported added once per
// (id, address) and removed once, with the address it had (a removal event carries only its id).
// A filter picks the members of interest; a member that stops matching is reported removed.
//
// Thread safety: the callbacks run on start()'s caller for the first list, then on the
// follower's thread, one at a time; they must not call stop(). members() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "membership/membership.h"

namespace keel::membership {

struct FollowerCallbacks {
  std::function<void(const Member&)> added;    // a new member (or one whose address changed)
  std::function<void(const Member&)> removed;  // gone: its lease expired or it deregistered
};

class MemberFollower {
 public:
  // `membership` is borrowed and must outlive the follower.
  static Result<std::unique_ptr<MemberFollower>> start(Membership* membership, MemberKind kind,
                                                       std::function<bool(const Member&)> filter,
                                                       FollowerCallbacks callbacks);
  ~MemberFollower();
  MemberFollower(const MemberFollower&) = delete;
  MemberFollower& operator=(const MemberFollower&) = delete;

  // Joins the thread. Idempotent.
  void stop();
  // The members followed now, by id.
  [[nodiscard]] std::vector<Member> members() const;

 private:
  MemberFollower(MemberKind kind, std::function<bool(const Member&)> filter,
                 FollowerCallbacks callbacks);
  // Applies one change: reports it when it changes the view.
  void apply(const MemberEvent& event);
  void loop();

  const MemberKind kind_;
  const std::function<bool(const Member&)> filter_;
  const FollowerCallbacks callbacks_;
  std::unique_ptr<MemberWatch> watch_;
  mutable Mutex mu_;
  std::map<std::string, Member> members_ KEEL_GUARDED_BY(mu_);  // by id
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace keel::membership
