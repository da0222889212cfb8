// parse_keys_file and sha256_hex (see tenant_keys.h).
#include "server/tenant_keys.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>

namespace keel::server {
namespace {

using Json = nlohmann::json;

// One line's settings; unset = not given on this line.
struct LineSettings {
  std::optional<double> weight;
  std::optional<int64_t> requests_per_minute;
  std::optional<int64_t> tokens_per_minute;
  std::optional<int64_t> max_concurrent;
  std::optional<std::string> cache_salt;
};

struct Where {
  std::string_view source;
  int line;
  Status error(std::string_view field, std::string_view what) const {
    if (field.empty())
      return Status::invalid_argument(fmt::format("{} line {}: {}", source, line, what));
    return Status::invalid_argument(
        fmt::format("{} line {}: field `{}`: {}", source, line, field, what));
  }
};

bool valid_tenant_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (std::isxdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

Status read_count(const Json& j, const char* field, int64_t max, const Where& w,
                  std::optional<int64_t>* out) {
  if (!j.contains(field)) return Status::ok_status();
  const Json& v = j[field];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max) {
    return w.error(field, fmt::format("must be an integer from 0 (no limit) to {}", max));
  }
  *out = v.get<int64_t>();
  return Status::ok_status();
}

Status read_line(const Json& j, const Where& w, std::string* key_hash, std::string* tenant,
                 LineSettings* s) {
  if (!j.is_object()) return w.error("", "must be a JSON object");
  static constexpr std::array<std::string_view, 8> kFields = {"key",
                                                              "key_sha256",
                                                              "tenant",
                                                              "weight",
                                                              "requests_per_minute",
                                                              "tokens_per_minute",
                                                              "max_concurrent",
                                                              "cache_salt"};
  for (const auto& [name, value] : j.items()) {
    if (std::find(kFields.begin(), kFields.end(), name) == kFields.end()) {
      return w.error(name, "unknown field");
    }
  }
  const bool has_key = j.contains("key"), has_hash = j.contains("key_sha256");
  if (has_key == has_hash) return w.error("key", "give exactly one of `key` and `key_sha256`");
  if (has_key) {
    if (!j["key"].is_string() || j["key"].get<std::string>().empty()) {
      return w.error("key", "must be a non-empty string");
    }
    *key_hash = sha256_hex(j["key"].get<std::string>());
  } else {
    if (!j["key_sha256"].is_string() || !is_hex64(j["key_sha256"].get<std::string>())) {
      return w.error("key_sha256", "must be 64 hex characters (sha256sum of the key)");
    }
    *key_hash = j["key_sha256"].get<std::string>();
    for (char& c : *key_hash) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!j.contains("tenant") || !j["tenant"].is_string() ||
      !valid_tenant_name(j["tenant"].get<std::string>())) {
    return w.error("tenant", "must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
  }
  *tenant = j["tenant"].get<std::string>();
  if (j.contains("weight")) {
    if (!j["weight"].is_number() || !(j["weight"].get<double>() > 0) ||
        j["weight"].get<double>() > 1e6) {
      return w.error("weight", "must be a number > 0 (at most 1e6)");
    }
    s->weight = j["weight"].get<double>();
  }
  KEEL_TRY(read_count(j, "requests_per_minute", int64_t{1} << 40, w, &s->requests_per_minute));
  KEEL_TRY(read_count(j, "tokens_per_minute", int64_t{1} << 50, w, &s->tokens_per_minute));
  KEEL_TRY(read_count(j, "max_concurrent", int64_t{1} << 30, w, &s->max_concurrent));
  if (j.contains("cache_salt")) {
    if (!j["cache_salt"].is_string() || j["cache_salt"].get<std::string>().empty() ||
        j["cache_salt"].get<std::string>().size() > 1024) {
      return w.error("cache_salt", "must be a string of 1 to 1024 bytes");
    }
    s->cache_salt = j["cache_salt"].get<std::string>();
  }
  return Status::ok_status();
}

// Merges one setting of a line into the tenant's; conflicting values are an error.
template <typename T>
Status merge(std::optional<T>* have, const std::optional<T>& given, const char* field,
             const Where& w) {
  if (!given) return Status::ok_status();
  if (*have && **have != *given) {
    return w.error(field, "differs from the value an earlier line gave this tenant");
  }
  *have = given;
  return Status::ok_status();
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md.data(), &len, EVP_sha256(), nullptr);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

Result<KeysFile> parse_keys_file(std::string_view text, std::string_view source) {
  KeysFile out;
  std::map<std::string, LineSettings> settings;  // per tenant, merged
  std::map<std::string, size_t> index;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const Where w{source, line_no};
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return w.error("", "not valid JSON");
    std::string key_hash, tenant;
    LineSettings s;
    KEEL_TRY(read_line(j, w, &key_hash, &tenant, &s));
    if (out.key_tenant.contains(key_hash)) return w.error("key", "the same key is given twice");
    LineSettings& t = settings[tenant];
    KEEL_TRY(merge(&t.weight, s.weight, "weight", w));
    KEEL_TRY(merge(&t.requests_per_minute, s.requests_per_minute, "requests_per_minute", w));
    KEEL_TRY(merge(&t.tokens_per_minute, s.tokens_per_minute, "tokens_per_minute", w));
    KEEL_TRY(merge(&t.max_concurrent, s.max_concurrent, "max_concurrent", w));
    KEEL_TRY(merge(&t.cache_salt, s.cache_salt, "cache_salt", w));
    auto [it, added] = index.emplace(tenant, out.tenants.size());
    if (added) out.tenants.push_back(TenantSpec{tenant});
    out.key_tenant.emplace(std::move(key_hash), it->second);
  }
  if (out.key_tenant.empty()) {
    return Status::invalid_argument(fmt::format("{}: no API key in the file", source));
  }
  for (TenantSpec& t : out.tenants) {
    const LineSettings& s = settings[t.name];
    t.weight = s.weight.value_or(1.0);
    t.limits.requests_per_minute = s.requests_per_minute.value_or(0);
    t.limits.tokens_per_minute = s.tokens_per_minute.value_or(0);
    t.limits.max_concurrent = static_cast<int32_t>(s.max_concurrent.value_or(0));
    t.cache_salt = s.cache_salt;
  }
  return out;
}

}  // namespace keel::server
