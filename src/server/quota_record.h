// One tenant's quota window as the gateways of a cluster share it (quota_dir.h keeps it in a file
// of the shared directory): the sliding one-minute window of admissions (tenant_limiter.h) whose
// entries any gateway adds, and the requests in flight counted per gateway ("owner"), so that a
// gateway that died can be counted out without knowing which requests were its. Pure functions of
// the record and an explicit time; the text codec is versioned:
//
//   keel-quota 1
//   next 43                         the next entry id (ids are unique across the gateways)
//   owner 7f3a…  2                  a gateway's requests in flight (omitted at 0)
//   entry 1765100000123 160 42      an admission: wall-clock ms, tokens charged, id (oldest first)
//
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>

#include "core/result.h"
#include "server/tenant_keys.h"
#include "server/tenant_limiter.h"

namespace keel::server {

inline constexpr int kQuotaRecordVersion = 1;

struct QuotaRecord {
  uint64_t next_id = 1;
  std::map<std::string, int32_t> in_flight;  // owner (a gateway) → its requests in flight (> 0)
  std::deque<LimiterState::Entry> window;    // every gateway's admissions, oldest first
  friend bool operator==(const QuotaRecord&, const QuotaRecord&) = default;
};

[[nodiscard]] std::string encode_quota_record(const QuotaRecord& r);
// "" is the empty record (a tenant's first request). Corrupt naming the line otherwise; an
// unknown version is Unsupported.
Result<QuotaRecord> decode_quota_record(std::string_view text);

// Admits one request of `owner` within `limits` at `now_ms` charging `tokens` (limiter_admit over
// every gateway's entries and requests in flight), or refuses it; the record drops expired
// entries either way.
QuotaAdmission record_admit(QuotaRecord* r, const std::string& owner, const TenantLimits& limits,
                            int64_t now_ms, int64_t tokens);
// `owner`'s admitted request `entry_id` ended having used `tokens` (limiter_settle).
void record_settle(QuotaRecord* r, const std::string& owner, uint64_t entry_id, int64_t tokens);
// Forgets the requests in flight of a gateway that is gone; whether it had any.
bool record_drop_owner(QuotaRecord* r, const std::string& owner);
[[nodiscard]] RateLimitView record_view(const QuotaRecord& r, const TenantLimits& limits,
                                        int64_t now_ms);

}  // namespace keel::server
