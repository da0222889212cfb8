// ClusterMembership; see cluster_membership.h.
#include "cluster_membership.h"

#include <unistd.h>

#include "core/log.h"
#include "membership/campaign.h"
#include "membership/embedded_membership.h"
#include "membership/etcd_membership.h"

namespace keel::cli {

using membership::MemberKind;

Result<std::unique_ptr<ClusterMembership>> ClusterMembership::open(const MembershipOptions& o) {
  std::unique_ptr<ClusterMembership> m(new ClusterMembership());
  membership::MembershipConfig config;
  config.prefix = o.prefix;
  config.ttl_s = o.ttl_s;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  m->manager_id_ = std::string(host) + "-" + std::to_string(::getpid());
  m->mode_ = o.mode;
  if (o.mode == "embedded") {
    if (!o.etcd_endpoints.empty()) {
      return Status::invalid_argument("--etcd-endpoints needs --membership etcd");
    }
    m->store_ = std::make_unique<membership::EmbeddedStore>(&m->clock_);
    KEEL_ASSIGN_OR_RETURN(m->session_,
                          membership::EmbeddedMembership::open(m->store_.get(), config));
  } else if (o.mode == "etcd") {
    if (o.etcd_endpoints.empty()) {
      return Status::invalid_argument("--membership etcd needs --etcd-endpoints http://HOST:PORT");
    }
    membership::EtcdClientConfig client;
    client.endpoints = o.etcd_endpoints;
    Result<std::unique_ptr<membership::EtcdMembership>> s =
        membership::EtcdMembership::open(client, config);
    if (!s.ok()) return s.status().with_prefix("membership");
    m->session_ = std::move(*s);
  } else {
    return Status::invalid_argument("--membership must be embedded or etcd, not '" + o.mode + "'");
  }
  return m;
}

ClusterMembership::~ClusterMembership() { (void)close(); }

Status ClusterMembership::lead(const std::function<bool()>& stop) {
  Result<std::optional<std::string>> current = session_->leader(kManagerElection);
  if (current.ok() && current->has_value()) {
    KEEL_LOG_INFO("membership: '{}' is led by {}; waiting as a standby", kManagerElection,
                  **current);
  }
  membership::CampaignOptions c;
  c.stop = stop;
  KEEL_TRY(membership::campaign(*session_, kManagerElection, manager_id_, c));
  KEEL_LOG_INFO("membership ({}): this process ({}) leads '{}'", mode_, manager_id_,
                kManagerElection);
  return add(MemberKind::kManager, manager_id_, "", {{"pid", std::to_string(::getpid())}});
}

Status ClusterMembership::add(MemberKind kind, const std::string& id, const std::string& address,
                              std::map<std::string, std::string> attributes) {
  return session_->register_member({kind, id, address, std::move(attributes)})
      .with_prefix("membership: register " + id);
}

Status ClusterMembership::close() { return session_ ? session_->close() : Status(); }

}  // namespace keel::cli
