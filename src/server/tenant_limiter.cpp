// The sliding-window quota limiter (see tenant_limiter.h).
#include "server/tenant_limiter.h"

#include <fmt/format.h>

#include <algorithm>

namespace keel::server {
namespace {

void expire(LimiterState* s, int64_t now_ms) {
  while (!s->window.empty() && s->window.front().at_ms + kRateWindowMs <= now_ms) {
    s->window.pop_front();
  }
}

int64_t used_tokens(const LimiterState& s) {
  int64_t used = 0;
  for (const LimiterState::Entry& e : s.window) used += e.tokens;
  return used;
}

// When entries expire (oldest first) until `fits(freed requests, freed tokens)` holds.
template <typename Fits>
int64_t wait_ms(const LimiterState& s, int64_t now_ms, Fits fits) {
  int64_t requests = 0, tokens = 0;
  for (const LimiterState::Entry& e : s.window) {
    ++requests;
    tokens += e.tokens;
    if (fits(requests, tokens)) return std::max<int64_t>(1, e.at_ms + kRateWindowMs - now_ms);
  }
  return kRateWindowMs;
}

}  // namespace

QuotaAdmission limiter_admit(LimiterState* s, const TenantLimits& limits, int64_t now_ms,
                             int64_t tokens) {
  expire(s, now_ms);
  QuotaAdmission a;
  const auto requests = static_cast<int64_t>(s->window.size());
  if (limits.requests_per_minute > 0 && requests + 1 > limits.requests_per_minute) {
    a.hit = LimitHit::kRequests;
    a.retry_after_ms = wait_ms(*s, now_ms, [&](int64_t freed, int64_t) {
      return requests - freed + 1 <= limits.requests_per_minute;
    });
    return a;
  }
  if (limits.tokens_per_minute > 0) {
    if (tokens > limits.tokens_per_minute) {
      a.hit = LimitHit::kTooLarge;
      return a;
    }
    const int64_t used = used_tokens(*s);
    if (used + tokens > limits.tokens_per_minute) {
      a.hit = LimitHit::kTokens;
      a.retry_after_ms = wait_ms(*s, now_ms, [&](int64_t, int64_t freed) {
        return used - freed + tokens <= limits.tokens_per_minute;
      });
      return a;
    }
  }
  if (limits.max_concurrent > 0 && s->in_flight >= limits.max_concurrent) {
    a.hit = LimitHit::kConcurrency;
    a.retry_after_ms = 1000;  // no schedule to read: a request in flight may end any time
    return a;
  }
  a.entry_id = s->next_id++;
  s->window.push_back({now_ms, tokens, a.entry_id});
  ++s->in_flight;
  return a;
}

void limiter_settle(LimiterState* s, uint64_t entry_id, int64_t tokens) {
  for (LimiterState::Entry& e : s->window) {
    if (e.id == entry_id) e.tokens = tokens;
  }
  if (s->in_flight > 0) --s->in_flight;
}

RateLimitView limiter_view(const LimiterState& s, const TenantLimits& limits, int64_t now_ms) {
  RateLimitView v;
  int64_t requests = 0, tokens = 0, last_request_ms = -1, last_tokens_ms = -1;
  for (const LimiterState::Entry& e : s.window) {
    if (e.at_ms + kRateWindowMs <= now_ms) continue;
    ++requests;
    tokens += e.tokens;
    last_request_ms = e.at_ms;
    if (e.tokens > 0) last_tokens_ms = e.at_ms;
  }
  const auto reset = [&](int64_t last) {
    return last < 0 ? 0 : std::max<int64_t>(0, last + kRateWindowMs - now_ms);
  };
  v.limit_requests = limits.requests_per_minute;
  v.remaining_requests = std::max<int64_t>(0, limits.requests_per_minute - requests);
  v.reset_requests_ms = reset(last_request_ms);
  v.limit_tokens = limits.tokens_per_minute;
  v.remaining_tokens = std::max<int64_t>(0, limits.tokens_per_minute - tokens);
  v.reset_tokens_ms = reset(last_tokens_ms);
  return v;
}

std::string format_reset(int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  const int64_t s = (ms + 999) / 1000;
  if (s < 60) return fmt::format("{}s", s);
  return fmt::format("{}m{}s", s / 60, s % 60);
}

}  // namespace keel::server
