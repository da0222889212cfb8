// Tenants' quotas shared by the gateways of a cluster (quota_record.h, quota_dir.h, tenants.h):
// the record's versioned text codec and its pure admission over every gateway's entries and
// requests in flight; two QuotaDirs on one directory (two gateways: each its own descriptors and
// owner lock, as two processes) deciding as one window; a gateway gone with requests in flight
// counted out by the other; two Tenants on one directory giving one tenant 429 with Retry-After
// once their admissions together reach the quota. Times are explicit (no sleeping).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/clock.h"
#include "server/quota_dir.h"
#include "server/quota_record.h"
#include "server/tenants.h"
#include "support/test_support.h"

namespace keel::server {
namespace {

constexpr int64_t kT0 = 1'765'100'000'000;  // a wall-clock time in ms

TEST(QuotaRecordTest, RoundTripsAndRefusesDamage) {
  QuotaRecord r;
  r.next_id = 43;
  r.in_flight = {{"gw-a", 2}, {"gw-b", 1}};
  r.window.push_back({kT0, 160, 41});
  r.window.push_back({kT0 + 5, 7, 42});
  const std::string text = encode_quota_record(r);
  EXPECT_EQ(text,
            "keel-quota 1\nnext 43\nowner gw-a 2\nowner gw-b 1\nentry 1765100000000 160 41\n"
            "entry 1765100000005 7 42\n");
  Result<QuotaRecord> back = decode_quota_record(text);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, r);
  ASSERT_TRUE(decode_quota_record("").ok());
  EXPECT_EQ(decode_quota_record("").value(), QuotaRecord{});

  EXPECT_EQ(decode_quota_record("keel-quota 2\nnext 1\n").status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(decode_quota_record("keel-quota 1\nnext 4").status().message(),
            "quota record: line 2 is cut short");
  EXPECT_EQ(decode_quota_record("keel-quota 1\nentry 5 x 1\n").status().message(),
            "quota record: line 2 is malformed");
  EXPECT_EQ(decode_quota_record("keel-quota 1\nentry 9 1 1\nentry 5 1 2\n").status().code(),
            StatusCode::kCorrupt);  // not oldest first
  EXPECT_EQ(decode_quota_record("{}\n").status().code(), StatusCode::kCorrupt);
}

TEST(QuotaRecordTest, AdmitsOverEveryGatewaysEntriesAndRequestsInFlight) {
  const TenantLimits limits{3, 0, 2};
  QuotaRecord r;
  EXPECT_EQ(record_admit(&r, "a", limits, kT0, 10).hit, LimitHit::kNone);
  const QuotaAdmission b1 = record_admit(&r, "b", limits, kT0 + 1, 10);
  EXPECT_EQ(b1.hit, LimitHit::kNone);
  // Two in flight (one each): the concurrency limit counts both gateways.
  EXPECT_EQ(record_admit(&r, "b", limits, kT0 + 2, 10).hit, LimitHit::kConcurrency);
  record_settle(&r, "b", b1.entry_id, 4);
  EXPECT_EQ(r.in_flight, (std::map<std::string, int32_t>{{"a", 1}}));
  EXPECT_EQ(r.window[1].tokens, 4);
  EXPECT_EQ(record_admit(&r, "b", limits, kT0 + 3, 10).hit, LimitHit::kNone);
  // Three admitted in the minute: the fourth waits for the first to leave the window.
  EXPECT_TRUE(record_drop_owner(&r, "a"));
  EXPECT_FALSE(record_drop_owner(&r, "a"));
  const QuotaAdmission refused = record_admit(&r, "a", limits, kT0 + 10'000, 10);
  EXPECT_EQ(refused.hit, LimitHit::kRequests);
  EXPECT_EQ(refused.retry_after_ms, 50'000);
  const RateLimitView v = record_view(r, limits, kT0 + 10'000);
  EXPECT_EQ(v.remaining_requests, 0);
  EXPECT_EQ(v.reset_requests_ms, 50'003);  // the newest entry (kT0 + 3) leaves the window
  EXPECT_EQ(record_admit(&r, "a", limits, kT0 + 60'000, 10).hit, LimitHit::kNone);
  EXPECT_EQ(r.window.size(), 3u);  // the first expired
}

TEST(QuotaDirTest, TwoGatewaysShareOneWindowAndCountOutAGoneOne) {
  const std::string dir = keel::testing::make_temp_dir("quota_dir") + "/quotas";
  Result<std::unique_ptr<QuotaDir>> a = QuotaDir::open(dir);
  Result<std::unique_ptr<QuotaDir>> b = QuotaDir::open(dir);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_NE((*a)->owner(), (*b)->owner());
  const TenantLimits limits{4, 0, 2};

  Result<QuotaDir::Admission> a1 = (*a)->admit("alice", limits, kT0, 5);
  ASSERT_TRUE(a1.ok()) << a1.status().to_string();
  EXPECT_EQ(a1->quota.hit, LimitHit::kNone);
  EXPECT_EQ(a1->view.remaining_requests, 3);
  Result<QuotaDir::Admission> b1 = (*b)->admit("alice", limits, kT0 + 1, 5);
  ASSERT_TRUE(b1.ok());
  EXPECT_EQ(b1->quota.hit, LimitHit::kNone);
  EXPECT_NE(b1->quota.entry_id, a1->quota.entry_id);
  EXPECT_EQ(b1->view.remaining_requests, 2);
  // Both in flight: a third is over max_concurrent through either gateway.
  EXPECT_EQ((*b)->admit("alice", limits, kT0 + 2, 5)->quota.hit, LimitHit::kConcurrency);
  ASSERT_TRUE((*b)->settle("alice", b1->quota.entry_id, 3).ok());

  // Gateway A goes away with its request in flight: B counts it out.
  a->reset();
  Result<QuotaDir::Admission> b2 = (*b)->admit("alice", limits, kT0 + 3, 5);
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->quota.hit, LimitHit::kNone);
  EXPECT_EQ(b2->dropped_owners, 1);
  Result<QuotaDir::Admission> b3 = (*b)->admit("alice", limits, kT0 + 4, 5);
  EXPECT_EQ(b3->quota.hit, LimitHit::kNone);
  // Four admitted in the minute (A's still counts): the fifth is refused until A's leaves.
  ASSERT_TRUE((*b)->settle("alice", b2->quota.entry_id, 5).ok());
  const Result<QuotaDir::Admission> b4 = (*b)->admit("alice", limits, kT0 + 30'000, 5);
  EXPECT_EQ(b4->quota.hit, LimitHit::kRequests);
  EXPECT_EQ(b4->quota.retry_after_ms, 30'000);
  const Result<RateLimitView> v = (*b)->view("alice", limits, kT0 + 30'000);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->remaining_requests, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/alice.quota"));
}

TEST(QuotaDirTest, ADamagedRecordStartsAfresh) {
  const std::string dir = keel::testing::make_temp_dir("quota_damaged");
  Result<std::unique_ptr<QuotaDir>> q = QuotaDir::open(dir);
  ASSERT_TRUE(q.ok());
  std::ofstream(dir + "/bob.quota") << "keel-quota 1\nentry 5";
  Result<QuotaDir::Admission> a = (*q)->admit("bob", TenantLimits{1, 0, 0}, kT0, 1);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->quota.hit, LimitHit::kNone);
  EXPECT_EQ((*q)->admit("bob", TenantLimits{1, 0, 0}, kT0, 1)->quota.hit, LimitHit::kRequests);
}

std::string shared_header(const HeaderList& h, std::string_view name) {
  for (const auto& [k, v] : h) {
    if (k == name) return v;
  }
  return "(none)";
}

TEST(QuotaDirTest, TenantsOfTwoGatewaysGive429OnceTheirAdmissionsTogetherReachTheQuota) {
  const std::string root = keel::testing::make_temp_dir("tenants_shared");
  const std::string keys = root + "/keys.jsonl";
  std::ofstream(keys) << "{\"key\": \"sk-a\", \"tenant\": \"a\", \"requests_per_minute\": 3}\n";
  ManualClock clock;
  clock.advance_ns(kT0 * 1'000'000);
  Result<std::unique_ptr<Tenants>> ga = Tenants::open(keys, &clock, root + "/quotas");
  Result<std::unique_ptr<Tenants>> gb = Tenants::open(keys, &clock, root + "/quotas");
  ASSERT_TRUE(ga.ok()) << ga.status().to_string();
  ASSERT_TRUE(gb.ok()) << gb.status().to_string();
  Tenants::Decision d1 = (*ga)->admit("a", 10);
  Tenants::Decision d2 = (*gb)->admit("a", 10);
  Tenants::Decision d3 = (*ga)->admit("a", 10);
  ASSERT_FALSE(d1.error || d2.error || d3.error);
  EXPECT_EQ(shared_header(d3.headers, "x-ratelimit-remaining-requests"), "0");
  (*gb)->settle("a", d2.entry_id, 4, 6);
  clock.advance_ns(20'000'000'000);
  Tenants::Decision refused = (*gb)->admit("a", 10);
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->status, 429);
  EXPECT_EQ(refused.error->retry_after_s, 40);
  EXPECT_EQ(shared_header(refused.headers, "x-ratelimit-limit-requests"), "3");
  EXPECT_EQ(shared_header((*ga)->headers("a"), "x-ratelimit-reset-requests"), "40s");
  // Each gateway's /metrics counts its own requests.
  const std::string text = (*gb)->metrics_text({});
  EXPECT_NE(text.find("keel_tenant_requests_total{tenant=\"a\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("keel_tenant_rate_limited_total{tenant=\"a\",limit=\"requests\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("keel_tenant_quota_dir_errors_total 0\n"), std::string::npos);
  EXPECT_NE((*ga)->metrics_text({}).find("keel_tenant_requests_in_flight{tenant=\"a\"} 2\n"),
            std::string::npos);
}

}  // namespace
}  // namespace keel::server
