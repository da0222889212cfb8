// EmbeddedMembership; see embedded_membership.h.
#include "membership/embedded_membership.h"

namespace keel::membership {
namespace {

// Store events under the members prefix as member events.
class EmbeddedWatch final : public MemberWatch {
 public:
  EmbeddedWatch(EmbeddedStore* store, std::string prefix)
      : store_(store),
        prefix_(std::move(prefix)),
        sub_(store->subscribe(members_prefix(prefix_))) {}
  ~EmbeddedWatch() override { store_->unsubscribe(sub_); }

  std::optional<MemberEvent> next(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      std::optional<StoreEvent> e = store_->next_event(sub_, std::max(left, {}));
      if (!e) return std::nullopt;
      Result<Member> m = e->deleted ? member_from_key(prefix_, e->key) : decode_member(e->value);
      if (m.ok()) {
        return MemberEvent{e->deleted ? MemberEventType::kRemoved : MemberEventType::kAdded, *m};
      }
    }
  }

 private:
  EmbeddedStore* store_;
  const std::string prefix_;
  std::shared_ptr<StoreSubscription> sub_;
};

}  // namespace

Result<std::unique_ptr<EmbeddedMembership>> EmbeddedMembership::open(
    EmbeddedStore* store, const MembershipConfig& config) {
  KEEL_TRY(config.validate());
  const int64_t lease = store->grant(config.ttl_s);
  return std::unique_ptr<EmbeddedMembership>(new EmbeddedMembership(store, config, lease));
}

EmbeddedMembership::EmbeddedMembership(EmbeddedStore* store, MembershipConfig config,
                                       int64_t lease_id)
    : store_(store), config_(std::move(config)), lease_id_(lease_id) {
  keepalive_ =
      std::make_unique<KeepaliveLoop>(std::chrono::milliseconds(config_.ttl_s * 1000 / 3),
                                      [store, lease_id] { return store->keepalive(lease_id); });
}

EmbeddedMembership::~EmbeddedMembership() { (void)close(); }

Status EmbeddedMembership::register_member(const Member& m) {
  KEEL_TRY(validate_name("member id", m.id));
  return store_->put(member_key(config_.prefix, m.kind, m.id), encode_member(m), lease_id_);
}

Status EmbeddedMembership::deregister_member(MemberKind kind, const std::string& id) {
  store_->erase_if_owned(member_key(config_.prefix, kind, id), lease_id_);
  return {};
}

Result<std::vector<Member>> EmbeddedMembership::list() {
  std::vector<Member> out;
  for (const auto& [key, value] : store_->range(members_prefix(config_.prefix))) {
    KEEL_ASSIGN_OR_RETURN(Member m, decode_member(value));
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::unique_ptr<MemberWatch>> EmbeddedMembership::watch() {
  return std::unique_ptr<MemberWatch>(new EmbeddedWatch(store_, config_.prefix));
}

Result<bool> EmbeddedMembership::try_lead(const std::string& name, const std::string& value) {
  KEEL_TRY(validate_name("election name", name));
  return store_->put_if_absent(election_key(config_.prefix, name), value, lease_id_);
}

Result<std::optional<std::string>> EmbeddedMembership::leader(const std::string& name) {
  KEEL_TRY(validate_name("election name", name));
  return store_->get(election_key(config_.prefix, name));
}

Result<int64_t> EmbeddedMembership::leadership_token(const std::string& name) {
  KEEL_TRY(validate_name("election name", name));
  const int64_t token =
      store_->create_revision_if_owned(election_key(config_.prefix, name), lease_id_);
  if (token == 0) return Status::failed_precondition("this session does not lead " + name);
  return token;
}

Status EmbeddedMembership::resign(const std::string& name) {
  KEEL_TRY(validate_name("election name", name));
  store_->erase_if_owned(election_key(config_.prefix, name), lease_id_);
  return {};
}

bool EmbeddedMembership::lease_alive() { return keepalive_->alive() && !closed_; }

void EmbeddedMembership::stop_keepalive() { keepalive_->stop(); }

Status EmbeddedMembership::close() {
  if (closed_.exchange(true)) return {};
  keepalive_->stop();
  store_->revoke(lease_id_);
  return {};
}

}  // namespace keel::membership
