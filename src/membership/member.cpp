// Member keys and the JSON value codec; see member.h.
#include "membership/member.h"

#include <nlohmann/json.hpp>

namespace keel::membership {

const char* member_kind_name(MemberKind kind) {
  switch (kind) {
    case MemberKind::kGateway:
      return "gateway";
    case MemberKind::kJobExecutor:
      return "je";
    case MemberKind::kTaskExecutor:
      return "te";
    case MemberKind::kManager:
      return "manager";
    case MemberKind::kNode:
      return "node";
  }
  return "?";
}

Result<MemberKind> parse_member_kind(const std::string& name) {
  for (MemberKind k : {MemberKind::kGateway, MemberKind::kJobExecutor, MemberKind::kTaskExecutor,
                       MemberKind::kManager, MemberKind::kNode}) {
    if (name == member_kind_name(k)) return k;
  }
  return Status::invalid_argument("unknown member kind '" + name +
                                  "' (expected gateway, je, te, manager or node)");
}

Status validate_prefix(const std::string& prefix) {
  if (prefix.size() < 2 || prefix.front() != '/' || prefix.back() == '/') {
    return Status::invalid_argument("membership prefix '" + prefix +
                                    "' must start with '/' and not end with '/'");
  }
  return {};
}

Status validate_name(const std::string& what, const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return Status::invalid_argument(what + " must be 1 to 128 bytes");
  }
  for (char c : name) {
    if (c == '/' || c == ' ' || c == '\n' || c == '\t' || c == '\0') {
      return Status::invalid_argument(what + " '" + name + "' holds '/', whitespace or NUL");
    }
  }
  return {};
}

std::string members_prefix(const std::string& prefix) { return prefix + "/members/"; }

std::string member_key(const std::string& prefix, MemberKind kind, const std::string& id) {
  return members_prefix(prefix) + member_kind_name(kind) + "/" + id;
}

std::string election_key(const std::string& prefix, const std::string& name) {
  return prefix + "/election/" + name;
}

std::string encode_member(const Member& m) {
  nlohmann::json j = {{"kind", member_kind_name(m.kind)},
                      {"id", m.id},
                      {"address", m.address},
                      {"attributes", m.attributes}};
  return j.dump();
}

Result<Member> decode_member(const std::string& value) {
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || !j.contains("id") ||
      !j["id"].is_string() || !j.contains("address") || !j["address"].is_string()) {
    return Status::invalid_argument("member value is not {kind, id, address, attributes}: " +
                                    value.substr(0, 200));
  }
  Member m;
  KEEL_ASSIGN_OR_RETURN(m.kind, parse_member_kind(j["kind"].get<std::string>()));
  m.id = j["id"].get<std::string>();
  m.address = j["address"].get<std::string>();
  if (j.contains("attributes")) {
    const nlohmann::json& a = j["attributes"];
    if (!a.is_object()) return Status::invalid_argument("member attributes are not an object");
    for (const auto& [k, v] : a.items()) {
      if (!v.is_string()) return Status::invalid_argument("member attribute '" + k + "' not text");
      m.attributes[k] = v.get<std::string>();
    }
  }
  return m;
}

Result<Member> member_from_key(const std::string& prefix, const std::string& key) {
  const std::string p = members_prefix(prefix);
  if (key.rfind(p, 0) != 0) return Status::invalid_argument("key '" + key + "' not a member key");
  const std::string rest = key.substr(p.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return Status::invalid_argument("member key '" + key + "'");
  Member m;
  KEEL_ASSIGN_OR_RETURN(m.kind, parse_member_kind(rest.substr(0, slash)));
  m.id = rest.substr(slash + 1);
  return m;
}

}  // namespace keel::membership
