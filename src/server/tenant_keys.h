// The API keys file of `keel serve --api-keys-file` (docs/tenants.md): JSON Lines, one key per
// line, each naming its tenant, and the tenants' weights, quotas and prefix-cache salts. Parsing
// is a pure function of the text; every error names the line and the field. Keys are kept only
// as SHA-256 digests (a line may give the key itself or its digest).
//
//   {"key": "sk-alice-1", "tenant": "alice", "weight": 2, "requests_per_minute": 600,
//    "tokens_per_minute": 200000, "max_concurrent": 8}
//   {"key_sha256": "<64 hex>", "tenant": "alice"}
//   {"key": "sk-bob", "tenant": "bob", "cache_salt": "shared-with-carol"}
//
// Blank lines and lines starting with '#' are skipped. A tenant's settings may be given on any of
// its lines; two lines giving one setting different values are an error.
//
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::server {

// A tenant's quotas; 0 = no limit.
struct TenantLimits {
  int64_t requests_per_minute = 0;
  int64_t tokens_per_minute = 0;  // prompt + generated tokens
  int32_t max_concurrent = 0;     // generation requests in flight at once
  friend bool operator==(const TenantLimits&, const TenantLimits&) = default;
};

struct TenantSpec {
  std::string name;     // [A-Za-z0-9._-], 1 to 64 characters (a Prometheus label value as is)
  double weight = 1.0;  // > 0: its share of the engine while tenants wait (engine/vtc.h)
  TenantLimits limits;
  // The prefix-cache scope of its requests; unset = its own (the tenant name), so tenants never
  // share cached prefixes unless two name the same cache_salt here.
  std::optional<std::string> cache_salt;
  friend bool operator==(const TenantSpec&, const TenantSpec&) = default;
};

struct KeysFile {
  std::vector<TenantSpec> tenants;           // in order of first mention
  std::map<std::string, size_t> key_tenant;  // SHA-256 hex of a key → index into tenants
};

// Parses the text of a keys file; `source` names it in errors ("keys.jsonl line 3: field
// `weight`: ..."). InvalidArgument on any malformed line, unknown field, bad value, duplicate
// key, conflicting tenant settings, or a file with no key.
Result<KeysFile> parse_keys_file(std::string_view text, std::string_view source);

// SHA-256 of `bytes` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view bytes);

}  // namespace keel::server
