// EmbeddedMembership: a Membership session on an in-process EmbeddedStore — what one machine
// uses without etcd (`keel cluster up`'s default). Several sessions on one store stand for
// several processes (tests, the cluster manager registering its children). The store is
// borrowed and must outlive the session.
//
// Thread safety: as Membership.
#pragma once

#include <atomic>
#include <memory>

#include "membership/embedded_store.h"
#include "membership/keepalive_loop.h"
#include "membership/membership.h"

namespace keel::membership {

class EmbeddedMembership final : public Membership {
 public:
  static Result<std::unique_ptr<EmbeddedMembership>> open(EmbeddedStore* store,
                                                          const MembershipConfig& config);
  ~EmbeddedMembership() override;

  Status register_member(const Member& m) override;
  Status deregister_member(MemberKind kind, const std::string& id) override;
  Result<std::vector<Member>> list() override;
  Result<std::unique_ptr<MemberWatch>> watch() override;
  Result<bool> try_lead(const std::string& name, const std::string& value) override;
  Result<std::optional<std::string>> leader(const std::string& name) override;
  Result<int64_t> leadership_token(const std::string& name) override;
  Status resign(const std::string& name) override;
  bool lease_alive() override;
  void stop_keepalive() override;
  Status close() override;

 private:
  EmbeddedMembership(EmbeddedStore* store, MembershipConfig config, int64_t lease_id);

  EmbeddedStore* store_;
  const MembershipConfig config_;
  const int64_t lease_id_;
  std::unique_ptr<KeepaliveLoop> keepalive_;
  std::atomic<bool> closed_{false};
};

}  // namespace keel::membership
