// ClusterMembership; see cluster_membership.h.
#include "control/manager/cluster_membership.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/log.h"
#include "membership/campaign.h"
#include "membership/embedded_membership.h"
#include "membership/etcd_membership.h"

namespace keel::control {

using membership::MemberKind;

Result<std::unique_ptr<ClusterMembership>> ClusterMembership::open(const MembershipConfig& o) {
  std::unique_ptr<ClusterMembership> m(new ClusterMembership());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  m->manager_id_ = std::string(host) + "-" + std::to_string(::getpid());
  m->options_ = o;
  m->mode_ = o.mode;
  KEEL_TRY(m->open_session());
  return m;
}

Status ClusterMembership::open_session() {
  const MembershipConfig& o = options_;
  membership::MembershipConfig config;
  config.prefix = o.prefix;
  config.ttl_s = o.ttl_s;
  if (o.mode == "embedded") {
    if (!o.etcd_endpoints.empty()) {
      return Status::invalid_argument("--etcd-endpoints needs --membership etcd");
    }
    if (!store_) store_ = std::make_unique<membership::EmbeddedStore>(&clock_);
    KEEL_ASSIGN_OR_RETURN(session_, membership::EmbeddedMembership::open(store_.get(), config));
  } else if (o.mode == "etcd") {
    if (o.etcd_endpoints.empty()) {
      return Status::invalid_argument("--membership etcd needs --etcd-endpoints http://HOST:PORT");
    }
    membership::EtcdClientConfig client;
    client.endpoints = o.etcd_endpoints;
    Result<std::unique_ptr<membership::EtcdMembership>> s =
        membership::EtcdMembership::open(client, config);
    if (!s.ok()) return s.status().with_prefix("membership");
    session_ = std::move(*s);
  } else {
    return Status::invalid_argument("--membership must be embedded or etcd, not '" + o.mode + "'");
  }
  return {};
}

Status ClusterMembership::rejoin(const std::function<bool()>& stop) {
  KEEL_TRY(reopen(stop));
  return lead(stop);
}

Status ClusterMembership::reopen(const std::function<bool()>& stop) {
  if (session_) (void)session_->close();  // the lease is gone already; so are its keys
  session_.reset();
  constexpr auto kRetry = std::chrono::milliseconds(500);
  while (true) {  // the store may still be unreachable: keep trying until it answers or `stop`
    const Status opened = open_session();
    if (opened.ok()) break;
    if (opened.code() == StatusCode::kInvalidArgument) return opened;
    KEEL_LOG_WARN("membership: rejoin: {}", opened.to_string());
    for (auto waited = std::chrono::milliseconds(0); waited < kRetry;
         waited += std::chrono::milliseconds(50)) {
      if (stop && stop()) return Status::cancelled("stopped while rejoining the membership");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return {};
}

ClusterMembership::~ClusterMembership() { (void)close(); }

Status ClusterMembership::lead(const std::function<bool()>& stop) {
  Result<std::optional<std::string>> current = session_->leader(options_.election);
  if (current.ok() && current->has_value()) {
    KEEL_LOG_INFO("membership: '{}' is led by {}; waiting as a standby", options_.election,
                  **current);
  }
  membership::CampaignOptions c;
  c.stop = stop;
  KEEL_TRY(membership::campaign(*session_, options_.election, manager_id_, c));
  return register_leadership();
}

Status ClusterMembership::register_leadership() {
  KEEL_ASSIGN_OR_RETURN(const int64_t token, session_->leadership_token(options_.election));
  token_ = token;
  KEEL_LOG_INFO("membership ({}): this process ({}) leads '{}' (fencing token {})", mode_,
                manager_id_, options_.election, token);
  return add(MemberKind::kManager, manager_id_, "",
             {{"pid", std::to_string(::getpid())}, {"fence", std::to_string(token)}});
}

Result<bool> ClusterMembership::try_lead() {
  KEEL_ASSIGN_OR_RETURN(bool won, session_->try_lead(options_.election, manager_id_));
  if (!won) return false;
  const Status registered = register_leadership();
  if (registered.code() == StatusCode::kFailedPrecondition) return false;  // lost it meanwhile
  KEEL_TRY(registered);
  return true;
}

bool ClusterMembership::confirmed_leader() {
  Result<std::optional<std::string>> current = session_->leader(options_.election);
  return current.ok() && current->has_value() && **current == manager_id_;
}

Status ClusterMembership::add(MemberKind kind, const std::string& id, const std::string& address,
                              std::map<std::string, std::string> attributes) {
  return session_->register_member({kind, id, address, std::move(attributes)})
      .with_prefix("membership: register " + id);
}

Status ClusterMembership::close() { return session_ ? session_->close() : Status(); }

bool ClusterMembership::alive() { return session_ && session_->lease_alive(); }

Result<std::unique_ptr<ClusterMembership>> register_self(const MembershipConfig& o,
                                                         const membership::Member& self) {
  if (o.mode == "embedded") return std::unique_ptr<ClusterMembership>();
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<ClusterMembership> m, ClusterMembership::open(o));
  KEEL_TRY(m->add(self.kind, self.id, self.address, self.attributes));
  KEEL_LOG_INFO("membership: registered {}/{} at {} (lease TTL {} s)",
                membership::member_kind_name(self.kind), self.id, self.address, o.ttl_s);
  return m;
}

int wait_registered(const sigset_t& stop_signals, const MembershipConfig& o,
                    const membership::Member& self, std::unique_ptr<ClusterMembership>* member,
                    const std::function<void()>& lost,
                    const std::function<void(ClusterMembership&)>& rejoined) {
  const bool keeping = *member != nullptr;
  const std::string name = std::string(membership::member_kind_name(self.kind)) + "/" + self.id;
  auto next_try = std::chrono::steady_clock::now();
  int failed_tries = 0;
  while (true) {
    timespec tick{0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig > 0) return sig;
    if (!keeping || (*member && (*member)->alive())) continue;
    if (*member) {
      KEEL_LOG_ERROR(
          "membership: {}: lease lost (the store unreachable past the TTL); "
          "registering again",
          name);
      if (lost) lost();
      (void)(*member)->close();
      member->reset();
    }
    if (std::chrono::steady_clock::now() < next_try) continue;
    next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    Result<std::unique_ptr<ClusterMembership>> again = register_self(o, self);
    if (!again.ok()) {
      if (failed_tries++ % 20 == 0) {  // every 10 s while the store stays away
        KEEL_LOG_WARN("membership: {}: not registered yet: {}", name, again.status().to_string());
      }
      continue;
    }
    KEEL_LOG_INFO("membership: {} registered again under a new lease", name);
    failed_tries = 0;
    *member = std::move(*again);
    if (rejoined) rejoined(**member);
  }
}

}  // namespace keel::control
