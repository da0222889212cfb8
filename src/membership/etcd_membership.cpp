// EtcdMembership; see etcd_membership.h.
#include "membership/etcd_membership.h"

#include "membership/base64.h"
#include "membership/etcd_watch.h"

namespace keel::membership {
namespace {

using nlohmann::json;

int64_t int64_field(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name)) return 0;
  const json& v = j[name];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return 0;
  try {
    return std::stoll(v.get<std::string>());
  } catch (...) {
    return 0;
  }
}

// The kvs of a range answer as decoded (key, value, lease) triples.
struct Kv {
  std::string key, value;
  int64_t lease = 0;
  int64_t create_revision = 0;
};

Result<std::vector<Kv>> decode_kvs(const json& range) {
  std::vector<Kv> out;
  if (!range.is_object() || !range.contains("kvs")) return out;  // none: the field is omitted
  if (!range["kvs"].is_array()) return Status::corrupt("etcd range answer: kvs not a list");
  for (const json& kv : range["kvs"]) {
    if (!kv.is_object()) return Status::corrupt("etcd range answer: kv not an object");
    Kv k;
    KEEL_ASSIGN_OR_RETURN(k.key, base64_decode(kv.value("key", std::string())));
    KEEL_ASSIGN_OR_RETURN(k.value, base64_decode(kv.value("value", std::string())));
    k.lease = int64_field(kv, "lease");
    k.create_revision = int64_field(kv, "create_revision");
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<EtcdMembership>> EtcdMembership::open(const EtcdClientConfig& client,
                                                             const MembershipConfig& config) {
  KEEL_TRY(config.validate());
  KEEL_ASSIGN_OR_RETURN(EtcdClient c, EtcdClient::create(client));
  KEEL_ASSIGN_OR_RETURN(json granted, c.call("/v3/lease/grant", {{"TTL", config.ttl_s}}));
  const int64_t lease = int64_field(granted, "ID");
  if (lease == 0) return Status::corrupt("etcd lease grant without an ID: " + granted.dump());
  return std::unique_ptr<EtcdMembership>(new EtcdMembership(std::move(c), config, lease));
}

EtcdMembership::EtcdMembership(EtcdClient client, MembershipConfig config, int64_t lease_id)
    : client_(std::move(client)), config_(std::move(config)), lease_id_(lease_id) {
  // Keepalive every TTL/3; fenced at TTL − TTL/6 without a confirmed one (keepalive_loop.h), so a
  // holder cut off from etcd gives the lease up before etcd can expire it.
  const int64_t ttl_ms = int64_t{config_.ttl_s} * 1000;
  keepalive_ = std::make_unique<KeepaliveLoop>(
      std::chrono::milliseconds(ttl_ms / 3), [this] { return refresh_lease(); },
      std::chrono::milliseconds(ttl_ms - ttl_ms / 6));
}

EtcdMembership::~EtcdMembership() { (void)close(); }

Status EtcdMembership::refresh_lease() const {
  KEEL_ASSIGN_OR_RETURN(json r, client_.call_stream_first("/v3/lease/keepalive",
                                                          {{"ID", std::to_string(lease_id_)}}));
  if (int64_field(r, "TTL") <= 0) {
    return Status::not_found("etcd lease " + std::to_string(lease_id_) + " expired");
  }
  return {};
}

Status EtcdMembership::register_member(const Member& m) {
  KEEL_TRY(validate_name("member id", m.id));
  const json body = {{"key", base64_encode(member_key(config_.prefix, m.kind, m.id))},
                     {"value", base64_encode(encode_member(m))},
                     {"lease", std::to_string(lease_id_)}};
  return client_.call("/v3/kv/put", body).status();
}

Status EtcdMembership::delete_if_owned(const std::string& key) {
  const json body = {{"compare",
                      {{{"key", base64_encode(key)},
                        {"target", "LEASE"},
                        {"result", "EQUAL"},
                        {"lease", std::to_string(lease_id_)}}}},
                     {"success", {{{"request_delete_range", {{"key", base64_encode(key)}}}}}}};
  return client_.call("/v3/kv/txn", body).status();
}

Status EtcdMembership::deregister_member(MemberKind kind, const std::string& id) {
  KEEL_TRY(validate_name("member id", id));
  return delete_if_owned(member_key(config_.prefix, kind, id));
}

Result<std::vector<Member>> EtcdMembership::list() {
  const std::string begin = members_prefix(config_.prefix);
  KEEL_ASSIGN_OR_RETURN(
      json r,
      client_.call("/v3/kv/range", {{"key", base64_encode(begin)},
                                    {"range_end", base64_encode(prefix_range_end(begin))}}));
  KEEL_ASSIGN_OR_RETURN(std::vector<Kv> kvs, decode_kvs(r));
  std::vector<Member> out;
  for (const Kv& kv : kvs) {
    KEEL_ASSIGN_OR_RETURN(Member m, decode_member(kv.value));
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::unique_ptr<MemberWatch>> EtcdMembership::watch() {
  // A one-key range for the store's current revision: the watch starts right after it.
  KEEL_ASSIGN_OR_RETURN(
      json r,
      client_.call("/v3/kv/range", {{"key", base64_encode(config_.prefix)}, {"count_only", true}}));
  const int64_t revision = r.contains("header") ? int64_field(r["header"], "revision") : 0;
  if (revision <= 0) return Status::corrupt("etcd range answer without a revision");
  return std::unique_ptr<MemberWatch>(new EtcdWatch(client_, config_.prefix, revision + 1));
}

Result<bool> EtcdMembership::try_lead(const std::string& name, const std::string& value) {
  KEEL_TRY(validate_name("election name", name));
  const std::string key = base64_encode(election_key(config_.prefix, name));
  const json body = {
      {"compare",
       {{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
      {"success",
       {{{"request_put",
          {{"key", key}, {"value", base64_encode(value)}, {"lease", std::to_string(lease_id_)}}}}}},
      {"failure", {{{"request_range", {{"key", key}}}}}}};
  KEEL_ASSIGN_OR_RETURN(json r, client_.call("/v3/kv/txn", body));
  if (r.value("succeeded", false)) return true;
  // Held already: by this session's lease?
  if (!r.contains("responses") || !r["responses"].is_array() || r["responses"].empty()) {
    return Status::corrupt("etcd txn answer without responses: " + r.dump().substr(0, 200));
  }
  const json& range = r["responses"][0].value("response_range", json::object());
  KEEL_ASSIGN_OR_RETURN(std::vector<Kv> kvs, decode_kvs(range));
  return !kvs.empty() && kvs[0].lease == lease_id_;
}

Result<std::optional<std::string>> EtcdMembership::leader(const std::string& name) {
  KEEL_TRY(validate_name("election name", name));
  KEEL_ASSIGN_OR_RETURN(
      json r,
      client_.call("/v3/kv/range", {{"key", base64_encode(election_key(config_.prefix, name))}}));
  KEEL_ASSIGN_OR_RETURN(std::vector<Kv> kvs, decode_kvs(r));
  if (kvs.empty()) return std::optional<std::string>();
  return std::optional<std::string>(kvs[0].value);
}

Result<int64_t> EtcdMembership::leadership_token(const std::string& name) {
  KEEL_TRY(validate_name("election name", name));
  KEEL_ASSIGN_OR_RETURN(
      json r,
      client_.call("/v3/kv/range", {{"key", base64_encode(election_key(config_.prefix, name))}}));
  KEEL_ASSIGN_OR_RETURN(std::vector<Kv> kvs, decode_kvs(r));
  if (kvs.empty() || kvs[0].lease != lease_id_) {
    return Status::failed_precondition("this session does not lead " + name);
  }
  if (kvs[0].create_revision <= 0) {
    return Status::corrupt("etcd range answer without a create_revision for " + name);
  }
  return kvs[0].create_revision;
}

Status EtcdMembership::resign(const std::string& name) {
  KEEL_TRY(validate_name("election name", name));
  return delete_if_owned(election_key(config_.prefix, name));
}

bool EtcdMembership::lease_alive() { return keepalive_->alive() && !closed_; }

void EtcdMembership::stop_keepalive() { keepalive_->stop(); }

Status EtcdMembership::close() {
  if (closed_.exchange(true)) return {};
  keepalive_->stop();
  return client_.call("/v3/lease/revoke", {{"ID", std::to_string(lease_id_)}}).status();
}

}  // namespace keel::membership
