// Membership: one process's session with the cluster's membership store — a lease with a TTL,
// refreshed in the background well inside it (every TTL/3); members registered under the lease;
// a list and a watch of the members prefix; leader election for named singletons, the leader's
// key held under the same lease. When the session closes its lease is revoked and its keys
// vanish at once; when the process dies (or its keepalive stops) they vanish when the TTL runs
// out, and a standby's campaign then wins.
//
// Two implementations: EmbeddedMembership (in-process, one machine, no etcd) and EtcdMembership
// (etcd v3's JSON gateway over HTTP). Both pass tests/membership's shared behavioural suite.
//
// Thread safety: every method may be called from any thread. Watches deliver events to their own
// queue, read with MemberWatch::next().
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "membership/member.h"

namespace keel::membership {

struct MembershipConfig {
  std::string prefix = "/keel/default";  // the cluster's key prefix (validate_prefix)
  int ttl_s = 10;                        // lease TTL; keepalive every ttl_s / 3
  Status validate() const;
};

// A stream of member changes after the watch began.
class MemberWatch {
 public:
  virtual ~MemberWatch() = default;
  // The next event, or nullopt when none came within `timeout`.
  virtual std::optional<MemberEvent> next(std::chrono::milliseconds timeout) = 0;
};

class Membership {
 public:
  virtual ~Membership() = default;

  // Puts (or replaces) `m` under this session's lease.
  virtual Status register_member(const Member& m) = 0;
  // Deletes a member this session registered.
  virtual Status deregister_member(MemberKind kind, const std::string& id) = 0;
  // Every live member, ordered by key.
  virtual Result<std::vector<Member>> list() = 0;
  // Changes under the members prefix from now on.
  virtual Result<std::unique_ptr<MemberWatch>> watch() = 0;

  // One attempt to become `name`'s leader with `value` (a member id): true when this session now
  // holds it (also when it already did), false when another session does.
  virtual Result<bool> try_lead(const std::string& name, const std::string& value) = 0;
  // The current leader's value, nullopt when there is none.
  virtual Result<std::optional<std::string>> leader(const std::string& name) = 0;
  // The fencing token of this session's leadership of `name`: the leader key's create revision,
  // which grows with every new leadership (etcd: one global revision counter, so it also grows
  // across a store restart that keeps its data). FailedPrecondition when this session does not
  // lead `name` now. Commands sent while leading carry it; receivers refuse a lower one than they
  // have seen (cluster/policy/leader_fence.h).
  virtual Result<int64_t> leadership_token(const std::string& name) = 0;
  // Gives up `name` if this session holds it.
  virtual Status resign(const std::string& name) = 0;

  // False once the lease is lost (expired while the keepalive could not reach the store).
  virtual bool lease_alive() = 0;
  // Stops refreshing the lease without revoking it, as if the process had died: its keys vanish
  // after the TTL (fault injection for tests and drills).
  virtual void stop_keepalive() = 0;
  // Revokes the lease (its members and leaderships vanish now) and stops the keepalive.
  virtual Status close() = 0;
};

}  // namespace keel::membership
