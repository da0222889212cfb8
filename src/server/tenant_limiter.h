// A tenant's quotas enforced over a sliding one-minute window (pure functions of the state and
// an explicit time, so tests inject the clock): every admitted request is logged with the tokens
// it was charged; a request is admitted when, counting the entries of the last 60 s, one more
// request stays within requests_per_minute, its token estimate (prompt + max_tokens) within
// tokens_per_minute, and one more in flight within max_concurrent. At completion the entry's
// tokens are corrected to what the request used (prompt + generated). A sliding window, unlike a
// token bucket, never lets more than the quota through in any 60 s.
//
// Thread safety: plain values; Tenants (tenants.h) guards each state with its mutex.
#pragma once

#include <cstdint>
#include <deque>

#include "server/tenant_keys.h"

namespace keel::server {

inline constexpr int64_t kRateWindowMs = 60'000;

struct LimiterState {
  struct Entry {
    int64_t at_ms = 0;
    int64_t tokens = 0;
    uint64_t id = 0;
    friend bool operator==(const Entry&, const Entry&) = default;
  };
  std::deque<Entry> window;  // admissions of the last kRateWindowMs, oldest first
  int32_t in_flight = 0;
  uint64_t next_id = 1;
};

enum class LimitHit {
  kNone,
  kRequests,     // requests_per_minute
  kTokens,       // tokens_per_minute (waiting frees room)
  kTooLarge,     // the estimate alone exceeds tokens_per_minute (waiting does not help)
  kConcurrency,  // max_concurrent
};

struct QuotaAdmission {
  LimitHit hit = LimitHit::kNone;
  int64_t retry_after_ms = 0;  // refused (not kTooLarge): when room frees at the earliest
  uint64_t entry_id = 0;       // admitted: its window entry (limiter_settle)
};

// Drops entries older than the window; admits (logging an entry, counting one in flight) or not.
QuotaAdmission limiter_admit(LimiterState* s, const TenantLimits& limits, int64_t now_ms,
                             int64_t tokens);
// The admitted request `entry_id` finished having used `tokens`: corrects its entry (if still in
// the window) and counts it out of flight.
void limiter_settle(LimiterState* s, uint64_t entry_id, int64_t tokens);

// What the x-ratelimit-* headers report (limits 0 = none: no headers for that kind).
struct RateLimitView {
  int64_t limit_requests = 0, remaining_requests = 0, reset_requests_ms = 0;
  int64_t limit_tokens = 0, remaining_tokens = 0, reset_tokens_ms = 0;
};
[[nodiscard]] RateLimitView limiter_view(const LimiterState& s, const TenantLimits& limits,
                                         int64_t now_ms);

// A duration as OpenAI writes reset times: "250ms", "12s", "1m30s".
[[nodiscard]] std::string format_reset(int64_t ms);

}  // namespace keel::server
