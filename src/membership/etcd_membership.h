// EtcdMembership: a Membership session on etcd v3 through its JSON gateway (EtcdClient). The
// session's lease is granted at open and refreshed by /v3/lease/keepalive every TTL/3 (and taken
// as lost, lease_alive() false, after TTL − TTL/6 without a confirmed keepalive: fencing); members
// are /v3/kv/put under the lease; list is one /v3/kv/range over the members prefix; watch is an
// EtcdWatch from the range's revision + 1; try_lead is one /v3/kv/txn — "if the election key's
// create_revision is 0 (absent), put it under my lease, else read it" — so exactly one session
// holds a name until its lease goes; resign and deregister delete only under a lease compare.
//
// Thread safety: as Membership.
#pragma once

#include <atomic>
#include <memory>

#include "membership/etcd_client.h"
#include "membership/keepalive_loop.h"
#include "membership/membership.h"

namespace keel::membership {

class EtcdMembership final : public Membership {
 public:
  // Grants the lease (Unavailable with the endpoints named when etcd cannot be reached).
  static Result<std::unique_ptr<EtcdMembership>> open(const EtcdClientConfig& client,
                                                      const MembershipConfig& config);
  ~EtcdMembership() override;

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

  int64_t lease_id() const { return lease_id_; }

 private:
  EtcdMembership(EtcdClient client, MembershipConfig config, int64_t lease_id);
  Status refresh_lease() const;
  // Deletes `key` if this session's lease holds it.
  Status delete_if_owned(const std::string& key);

  const EtcdClient client_;
  const MembershipConfig config_;
  const int64_t lease_id_;
  std::unique_ptr<KeepaliveLoop> keepalive_;
  std::atomic<bool> closed_{false};
};

}  // namespace keel::membership
