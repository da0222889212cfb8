// MemberFollower; see member_follower.h.
#include "membership/member_follower.h"

#include <chrono>

namespace keel::membership {

MemberFollower::MemberFollower(MemberKind kind, std::function<bool(const Member&)> filter,
                               FollowerCallbacks callbacks)
    : kind_(kind), filter_(std::move(filter)), callbacks_(std::move(callbacks)) {}

Result<std::unique_ptr<MemberFollower>> MemberFollower::start(
    Membership* membership, MemberKind kind, std::function<bool(const Member&)> filter,
    FollowerCallbacks callbacks) {
  std::unique_ptr<MemberFollower> f(
      new MemberFollower(kind, std::move(filter), std::move(callbacks)));
  KEEL_ASSIGN_OR_RETURN(f->watch_, membership->watch());  // before the list: nothing is lost
  KEEL_ASSIGN_OR_RETURN(std::vector<Member> live, membership->list());
  for (Member& m : live) f->apply({MemberEventType::kAdded, std::move(m)});
  MemberFollower* self = f.get();
  f->thread_ = std::thread([self] { self->loop(); });
  return f;
}

MemberFollower::~MemberFollower() { stop(); }

void MemberFollower::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<Member> MemberFollower::members() const {
  MutexLock lock(mu_);
  std::vector<Member> out;
  for (const auto& [id, m] : members_) out.push_back(m);
  return out;
}

void MemberFollower::apply(const MemberEvent& event) {
  if (event.member.kind != kind_) return;
  const bool wanted = event.type == MemberEventType::kAdded && (!filter_ || filter_(event.member));
  std::optional<Member> gone, added;
  {
    MutexLock lock(mu_);
    auto it = members_.find(event.member.id);
    const bool known = it != members_.end();
    if (wanted && known && it->second.address == event.member.address) {
      it->second = event.member;  // attributes may change; nothing to report
      return;
    }
    if (known) {  // removed, no longer matching, or moved to another address
      gone = it->second;
      members_.erase(it);
    }
    if (wanted) {
      members_[event.member.id] = event.member;
      added = event.member;
    }
  }
  if (gone && callbacks_.removed) callbacks_.removed(*gone);
  if (added && callbacks_.added) callbacks_.added(*added);
}

void MemberFollower::loop() {
  while (!stopping_) {
    std::optional<MemberEvent> e = watch_->next(std::chrono::milliseconds(100));
    if (e) apply(*e);
  }
}

}  // namespace keel::membership
