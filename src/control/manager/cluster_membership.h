// ClusterMembership: `keel cluster up`'s place in the cluster's membership. It opens a session
// (embedded: an in-process store — one machine, no etcd; etcd: --etcd-endpoints), campaigns for
// the "cluster-manager" singleton before the manager's work (warm pool, autoscaler, replacer)
// starts — a second `keel cluster up` on the same prefix waits there as a standby and takes over
// when the leader's lease expires — and registers the manager, the gateway, and the JEs and TEs
// it started (on their behalf, under its own lease: they vanish together when it stops or dies).
//
// `keel te`, `keel je` and `keel node-agent` use the same session type for themselves
// (register_self): one lease per process, so a process that dies leaves the membership within the
// TTL.
//
// Thread safety: one owner (cluster_up's thread).
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/protocol/te_spec.h"
#include "core/result.h"
#include "membership/embedded_store.h"
#include "membership/membership.h"

namespace keel::control {

// The default name of the cluster manager singleton's election (MembershipConfig::election).
inline constexpr const char* kManagerElection = "cluster-manager";

// Where a process registers itself and, for a manager, campaigns (docs/cluster.md, "Membership
// (etcd)"): `keel cluster up` registers its members and campaigns to be the cluster manager;
// `keel te`, `keel je` and `keel node-agent` register themselves under leases of their own
// (etcd mode only: "embedded" for a TE or JE means its manager registers it).
struct MembershipConfig {
  std::string mode = "embedded";            // "embedded" (in-process) or "etcd"
  std::vector<std::string> etcd_endpoints;  // http://HOST:PORT, with --membership etcd
  std::string prefix = "/keel/default";     // the cluster's key prefix
  int32_t ttl_s = 10;                       // lease TTL (keepalive every TTL/3)
  // The manager election `keel cluster up` campaigns in: one per model when several models'
  // managers share a cluster (and its node agents); the same name makes a standby.
  std::string election = kManagerElection;

  // The part a started TE or node agent's child needs (no election: only managers campaign).
  [[nodiscard]] cluster::MembershipSpec spec() const {
    return {mode, etcd_endpoints, prefix, ttl_s};
  }
  // A started process's membership from its spec (the default election).
  [[nodiscard]] static MembershipConfig from_spec(const cluster::MembershipSpec& m) {
    MembershipConfig c;
    c.mode = m.mode;
    c.etcd_endpoints = m.etcd_endpoints;
    c.prefix = m.prefix;
    c.ttl_s = m.ttl_s;
    return c;
  }
};

class ClusterMembership {
 public:
  // Opens the session (etcd unreachable → Unavailable naming the endpoints).
  static Result<std::unique_ptr<ClusterMembership>> open(const MembershipConfig& o);
  ~ClusterMembership();

  // Blocks until this process leads its election (MembershipConfig::election) (Cancelled once
  // `stop` returns true), then registers the manager.
  Status lead(const std::function<bool()>& stop);
  // One try to lead its election, without waiting: true once this process leads (the manager
  // then registered), false while another does.
  Result<bool> try_lead();
  // True when the store confirms this process leads its election now (false on an error).
  bool confirmed_leader();
  // The fencing token of this process's latest leadership (Membership::leadership_token; read
  // when lead() or try_lead() wins, and registered as the manager's "fence" attribute), 0 before
  // it first leads. The node agents refuse commands with a lower token than they have seen.
  int64_t fencing_token() const { return token_.load(); }
  // Registers a started child (kind je or te) or the gateway.
  Status add(membership::MemberKind kind, const std::string& id, const std::string& address,
             std::map<std::string, std::string> attributes);
  // False once the lease was lost (the store unreachable past the TTL).
  bool alive();
  // After the lease was lost: drops the session, opens a new one (retrying while the store is
  // unreachable) and campaigns again as lead() does (Cancelled once `stop` returns true).
  Status rejoin(const std::function<bool()>& stop);
  // rejoin() without the campaign (a standby's lost lease).
  Status reopen(const std::function<bool()>& stop);
  // Revokes the lease: every member registered here vanishes at once.
  Status close();

  const std::string& manager_id() const { return manager_id_; }
  // The session itself (to list, watch or follow members); lives as long as this object.
  membership::Membership& session() { return *session_; }

 private:
  ClusterMembership() = default;
  Status open_session();
  // After winning: reads the leadership's fencing token and registers the manager with it.
  Status register_leadership();
  MembershipConfig options_;
  SteadyClock clock_;
  std::unique_ptr<membership::EmbeddedStore> store_;  // embedded mode only
  std::unique_ptr<membership::Membership> session_;
  std::string manager_id_;
  std::string mode_;
  std::atomic<int64_t> token_{0};
};

// A process's own session (etcd mode): opens one and registers `self` under its lease. nullptr
// when `o.mode` is "embedded" (nothing to join: its manager registers it, if anyone).
Result<std::unique_ptr<ClusterMembership>> register_self(const MembershipConfig& o,
                                                         const membership::Member& self);

// What a self-registered process does while it serves: waits for one of `stop_signals` (blocked
// by the caller) and keeps `self` registered. Once its session's lease is lost — the store
// unreachable past the TTL, this host cut off — `lost` runs (stop using the session: it is
// closed next), and a new session is opened, retried every 500 ms while the store stays
// unreachable, `self` registered again under it (logged), and `rejoined` given it. With a null
// *member (embedded mode) it only waits. Returns the signal.
int wait_registered(const sigset_t& stop_signals, const MembershipConfig& o,
                    const membership::Member& self, std::unique_ptr<ClusterMembership>* member,
                    const std::function<void()>& lost = {},
                    const std::function<void(ClusterMembership&)>& rejoined = {});

}  // namespace keel::control
