// Tenants (docs/tenants.md) without a server: the keys file's parsing (errors name the line and
// the field), the sliding-window quota limiter on an injected clock (requests, tokens with the
// correction at completion, concurrency, Retry-After, the x-ratelimit-* view), and the Tenants
// registry (authentication, 429s, reload when the file changes, per-tenant metrics).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/clock.h"
#include "server/tenant_keys.h"
#include "server/tenant_limiter.h"
#include "server/tenants.h"
#include "support/test_support.h"

namespace keel::server {
namespace {

std::string error_of(std::string_view text) {
  Result<KeysFile> r = parse_keys_file(text, "keys.jsonl");
  return r.ok() ? std::string("(parsed)") : r.status().message();
}

TEST(TenantKeysTest, ParsesKeysTenantsAndDefaults) {
  const std::string hash = sha256_hex("sk-carol");
  const std::string text =
      "# tenants\n"
      "{\"key\": \"sk-alice\", \"tenant\": \"alice\", \"weight\": 2, \"requests_per_minute\": "
      "60, \"tokens_per_minute\": 1000, \"max_concurrent\": 3}\n"
      "\n"
      "{\"key\": \"sk-alice-2\", \"tenant\": \"alice\", \"weight\": 2}\n"
      "{\"key_sha256\": \"" +
      hash + "\", \"tenant\": \"carol\", \"cache_salt\": \"team\"}\n";
  Result<KeysFile> r = parse_keys_file(text, "keys.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tenants.size(), 2u);
  const TenantSpec& alice = r->tenants[0];
  EXPECT_EQ(alice.name, "alice");
  EXPECT_EQ(alice.weight, 2.0);
  EXPECT_EQ(alice.limits, (TenantLimits{60, 1000, 3}));
  EXPECT_FALSE(alice.cache_salt.has_value());
  const TenantSpec& carol = r->tenants[1];
  EXPECT_EQ(carol.weight, 1.0);
  EXPECT_EQ(carol.limits, TenantLimits{});
  EXPECT_EQ(carol.cache_salt, "team");
  EXPECT_EQ(r->key_tenant.size(), 3u);
  EXPECT_EQ(r->key_tenant.at(sha256_hex("sk-alice-2")), 0u);
  EXPECT_EQ(r->key_tenant.at(hash), 1u);
  // sha256("abc"), the FIPS 180-2 example.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TenantKeysTest, ErrorsNameTheLineAndTheField) {
  EXPECT_EQ(error_of("{\"key\": \"a\", \"tenant\": \"t\"}\n{\"key\": \"b\""),
            "keys.jsonl line 2: not valid JSON");
  EXPECT_EQ(error_of("\n\n{\"key\": \"a\", \"tenant\": \"t\", \"weight\": 0}"),
            "keys.jsonl line 3: field `weight`: must be a number > 0 (at most 1e6)");
  EXPECT_EQ(error_of("{\"key\": \"a\", \"tenant\": \"t\", \"rpm\": 5}"),
            "keys.jsonl line 1: field `rpm`: unknown field");
  EXPECT_EQ(error_of("{\"key\": \"a\", \"tenant\": \"t\", \"requests_per_minute\": -1}"),
            "keys.jsonl line 1: field `requests_per_minute`: must be an integer from 0 (no "
            "limit) to 1099511627776");
  EXPECT_EQ(error_of("{\"key\": \"a\", \"tenant\": \"a b\"}"),
            "keys.jsonl line 1: field `tenant`: must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
  EXPECT_EQ(error_of("{\"tenant\": \"t\"}"),
            "keys.jsonl line 1: field `key`: give exactly one of `key` and `key_sha256`");
  EXPECT_EQ(error_of("{\"key_sha256\": \"abc\", \"tenant\": \"t\"}"),
            "keys.jsonl line 1: field `key_sha256`: must be 64 hex characters (sha256sum of the "
            "key)");
  EXPECT_EQ(error_of("{\"key\": \"a\", \"tenant\": \"t\"}\n{\"key\": \"a\", \"tenant\": \"u\"}"),
            "keys.jsonl line 2: field `key`: the same key is given twice");
  EXPECT_EQ(error_of("{\"key\": \"a\", \"tenant\": \"t\", \"max_concurrent\": 2}\n"
                     "{\"key\": \"b\", \"tenant\": \"t\", \"max_concurrent\": 3}"),
            "keys.jsonl line 2: field `max_concurrent`: differs from the value an earlier line "
            "gave this tenant");
  EXPECT_EQ(error_of("[1]"), "keys.jsonl line 1: must be a JSON object");
  EXPECT_EQ(error_of("# nothing\n"), "keys.jsonl: no API key in the file");
}

TEST(TenantLimiterTest, RequestsPerMinuteSlideWithTheWindow) {
  LimiterState s;
  const TenantLimits limits{3, 0, 0};
  for (int64_t t : {0, 10'000, 20'000}) {
    const QuotaAdmission a = limiter_admit(&s, limits, t, 5);
    ASSERT_EQ(a.hit, LimitHit::kNone);
    limiter_settle(&s, a.entry_id, 5);
  }
  RateLimitView v = limiter_view(s, limits, 30'000);
  EXPECT_EQ(v.limit_requests, 3);
  EXPECT_EQ(v.remaining_requests, 0);
  EXPECT_EQ(v.reset_requests_ms, 50'000);  // the newest entry leaves at 80 s
  const QuotaAdmission refused = limiter_admit(&s, limits, 30'000, 5);
  EXPECT_EQ(refused.hit, LimitHit::kRequests);
  EXPECT_EQ(refused.retry_after_ms, 30'000);  // the oldest (t = 0) leaves at 60 s
  EXPECT_EQ(limiter_admit(&s, limits, 59'999, 5).hit, LimitHit::kRequests);
  EXPECT_EQ(limiter_admit(&s, limits, 60'000, 5).hit, LimitHit::kNone);
  EXPECT_EQ(limiter_view(s, limits, 60'000).remaining_requests, 0);
  EXPECT_EQ(limiter_view(s, limits, 70'000).remaining_requests, 1);
}

TEST(TenantLimiterTest, TokensAreChargedByEstimateAndCorrectedAtCompletion) {
  LimiterState s;
  const TenantLimits limits{0, 1000, 0};
  const QuotaAdmission a = limiter_admit(&s, limits, 0, 600);  // prompt + max_tokens
  ASSERT_EQ(a.hit, LimitHit::kNone);
  const QuotaAdmission b = limiter_admit(&s, limits, 1000, 600);
  EXPECT_EQ(b.hit, LimitHit::kTokens);
  EXPECT_EQ(b.retry_after_ms, 59'000);
  EXPECT_EQ(limiter_view(s, limits, 1000).remaining_tokens, 400);
  limiter_settle(&s, a.entry_id, 150);  // it used 150
  EXPECT_EQ(limiter_view(s, limits, 1000).remaining_tokens, 850);
  EXPECT_EQ(limiter_admit(&s, limits, 1000, 600).hit, LimitHit::kNone);
  EXPECT_EQ(limiter_admit(&s, limits, 1000, 1001).hit, LimitHit::kTooLarge);
  EXPECT_EQ(limiter_view(s, limits, 1000).reset_tokens_ms, 60'000);
}

TEST(TenantLimiterTest, ConcurrencyCountsRequestsInFlight) {
  LimiterState s;
  const TenantLimits limits{0, 0, 2};
  const QuotaAdmission a = limiter_admit(&s, limits, 0, 1);
  ASSERT_EQ(limiter_admit(&s, limits, 0, 1).hit, LimitHit::kNone);
  const QuotaAdmission c = limiter_admit(&s, limits, 0, 1);
  EXPECT_EQ(c.hit, LimitHit::kConcurrency);
  EXPECT_EQ(c.retry_after_ms, 1000);
  limiter_settle(&s, a.entry_id, 1);
  EXPECT_EQ(limiter_admit(&s, limits, 0, 1).hit, LimitHit::kNone);
  // No limits: no x-ratelimit values.
  EXPECT_EQ(limiter_view(s, limits, 0).limit_requests, 0);
  EXPECT_EQ(format_reset(250), "250ms");
  EXPECT_EQ(format_reset(12'000), "12s");
  EXPECT_EQ(format_reset(90'000), "1m30s");
}

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);  // a new inode: seen as changed
}

std::string header(const HeaderList& h, std::string_view name) {
  for (const auto& [k, v] : h) {
    if (k == name) return v;
  }
  return "(none)";
}

TEST(TenantsTest, AuthenticatesLimitsReloadsAndCounts) {
  const std::string path = keel::testing::make_temp_dir("tenants") + "/keys.jsonl";
  write_file(path,
             "{\"key\": \"sk-a\", \"tenant\": \"a\", \"requests_per_minute\": 1}\n"
             "{\"key\": \"sk-b\", \"tenant\": \"b\", \"weight\": 3, \"cache_salt\": \"s\"}\n");
  ManualClock clock;
  Result<std::unique_ptr<Tenants>> opened = Tenants::open(path, &clock);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  Tenants& tenants = **opened;
  EXPECT_FALSE(tenants.authenticate("sk-wrong").has_value());
  EXPECT_FALSE(tenants.authenticate("").has_value());
  const std::optional<TenantGrant> a = tenants.authenticate("sk-a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->tenant, "a");
  EXPECT_EQ(a->cache_scope, "a");
  const std::optional<TenantGrant> b = tenants.authenticate("sk-b");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->weight, 3.0);
  EXPECT_EQ(b->cache_scope, "s");
  EXPECT_NE(scoped_cache_salt("a", ""), scoped_cache_salt("s", ""));
  EXPECT_NE(scoped_cache_salt("a", "x"), scoped_cache_salt("a", ""));

  Tenants::Decision first = tenants.admit("a", 10);
  ASSERT_FALSE(first.error.has_value());
  EXPECT_EQ(header(first.headers, "x-ratelimit-limit-requests"), "1");
  EXPECT_EQ(header(first.headers, "x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(header(first.headers, "x-ratelimit-limit-tokens"), "(none)");
  tenants.settle("a", first.entry_id, 4, 6);
  clock.advance_ns(15'000'000'000);
  Tenants::Decision second = tenants.admit("a", 10);
  ASSERT_TRUE(second.error.has_value());
  EXPECT_EQ(second.error->status, 429);
  EXPECT_EQ(second.error->code, "rate_limit_exceeded");
  EXPECT_EQ(second.error->retry_after_s, 45);
  EXPECT_NE(second.error->message.find("requests per minute"), std::string::npos);
  EXPECT_EQ(header(second.headers, "x-ratelimit-reset-requests"), "45s");

  // Reload: a raised quota applies at once; the window and counters are kept.
  write_file(path, "{\"key\": \"sk-a\", \"tenant\": \"a\", \"requests_per_minute\": 2}\n");
  ASSERT_TRUE(tenants.authenticate("sk-a").has_value());
  EXPECT_FALSE(tenants.authenticate("sk-b").has_value());  // b's key is gone
  Tenants::Decision third = tenants.admit("a", 10);
  EXPECT_FALSE(third.error.has_value());
  EXPECT_EQ(header(third.headers, "x-ratelimit-remaining-requests"), "0");
  // A file that no longer parses keeps the keys loaded before.
  write_file(path, "{\"key\": \"sk-a\"}\n");
  EXPECT_TRUE(tenants.authenticate("sk-a").has_value());

  const std::string text = tenants.metrics_text({{"a", 12.5}});
  EXPECT_NE(text.find("keel_tenant_requests_total{tenant=\"a\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("keel_tenant_rate_limited_total{tenant=\"a\",limit=\"requests\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("keel_tenant_prompt_tokens_total{tenant=\"a\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("keel_tenant_generation_tokens_total{tenant=\"a\"} 6\n"), std::string::npos);
  EXPECT_NE(text.find("keel_tenant_requests_in_flight{tenant=\"a\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("keel_tenant_vtc_counter{tenant=\"a\"} 12.5\n"), std::string::npos);
  EXPECT_NE(text.find("keel_api_keys_reloads_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("keel_api_keys_reload_errors_total 1\n"), std::string::npos);
}

}  // namespace
}  // namespace keel::server
