// Member: who a process is in the cluster's membership (kind, id, address, plain attributes), its
// key under the cluster prefix and its value encoding (JSON). Keys are
// "<prefix>/members/<kind>/<id>"; election keys are "<prefix>/election/<name>". Plain data and
// pure functions; no I/O.
#pragma once

#include <map>
#include <string>

#include "core/result.h"

namespace keel::membership {

// kNode: a host's node agent (`keel node-agent`), its capacity in the attributes.
enum class MemberKind { kGateway, kJobExecutor, kTaskExecutor, kManager, kNode };

// "gateway", "je", "te", "manager", "node".
const char* member_kind_name(MemberKind kind);
Result<MemberKind> parse_member_kind(const std::string& name);

struct Member {
  MemberKind kind = MemberKind::kTaskExecutor;
  std::string id;                                 // unique within its kind, no '/'
  std::string address;                            // "host:port" others reach it at
  std::map<std::string, std::string> attributes;  // plain data (model, role, pid, ...)
  bool operator==(const Member&) const = default;
};

enum class MemberEventType { kAdded, kRemoved };

// A change under the members prefix. A removed member carries only kind and id.
struct MemberEvent {
  MemberEventType type = MemberEventType::kAdded;
  Member member;
};

// Checks a prefix ("/keel/<cluster>": starts with '/', no trailing '/').
Status validate_prefix(const std::string& prefix);
// Checks an id or election name: non-empty, at most 128 bytes, no '/', no whitespace.
Status validate_name(const std::string& what, const std::string& name);

std::string members_prefix(const std::string& prefix);  // "<prefix>/members/"
std::string member_key(const std::string& prefix, MemberKind kind, const std::string& id);
std::string election_key(const std::string& prefix, const std::string& name);

// The value stored under a member's key, and back (InvalidArgument on malformed input).
std::string encode_member(const Member& m);
Result<Member> decode_member(const std::string& value);
// Kind and id from a member key (for removals, whose value is gone).
Result<Member> member_from_key(const std::string& prefix, const std::string& key);

}  // namespace keel::membership
