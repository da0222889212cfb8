// Issue 39's tenants across the gateways of a cluster: `keel cluster up` (gateway A) and
// `keel cluster gateway` (gateway B, over A's JE), both with one --api-keys-file and one
// --responses-dir (whose quotas/ holds the shared quota windows). Unknown keys are 401 through
// both; a tenant's prefix cache is its own through the cluster (another tenant's identical prompt
// finds nothing cached); a tenant's requests per minute are counted over both gateways together —
// past the quota, 429 with Retry-After and the x-ratelimit-* headers through either — while
// another tenant goes on; each gateway's /metrics counts its own requests; a keys file raised in
// place is picked up by the gateways without a restart. Every process is a child of a supervisor,
// stopped by PID; the gateways listen on free loopback ports.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "ready_child.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// Starts a child of `sup` (ready_child.h).
int start(proc::ProcessSupervisor& sup, const std::string& name, std::vector<std::string> argv,
          pid_t* pid) {
  return start_ready_child(sup, name, std::move(argv), pid);
}

void write_keys(const std::string& path, int alice_rpm) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << "{\"key\": \"sk-alice\", \"tenant\": \"alice\", \"requests_per_minute\": "
                     << alice_rpm << "}\n{\"key\": \"sk-bob\", \"tenant\": \"bob\"}\n";
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

const std::string kLongPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
    "with her friends.";

HttpResponse complete(int port, const std::string& key, const std::string& prompt = "Once upon") {
  const json body = {{"model", "stories"},
                     {"prompt", prompt},
                     {"max_tokens", 4},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  return http_request(port, "POST", "/v1/completions", body.dump(),
                      {{"Authorization", "Bearer " + key}});
}

int cached_tokens(const HttpResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("usage")) return -1;
  return j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

std::string header(const HttpResponse& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "(none)" : it->second;
}

TEST(ClusterTenants, QuotasHoldAcrossTwoGatewaysWithSaltedCachesAndCounters) {
  KEEL_REQUIRE_SHARED();
  const std::string root = make_temp_dir("cluster_tenants");
  const std::string keys = root + "/keys.jsonl";
  write_keys(keys, 6);
  proc::ProcessSupervisor sup;
  pid_t pid_a = 0, pid_b = 0;
  const int a = start(sup, "cluster",
                      {KEEL_BINARY,
                       "cluster",
                       "up",
                       "-m",
                       stories(),
                       "--served-model-name",
                       "stories",
                       "--colocated",
                       "1",
                       "--jes",
                       "1",
                       "--threads-per-te",
                       "1",
                       "--port",
                       "0",
                       "--drain-timeout",
                       "2",
                       "--no-state",
                       "--api-keys-file",
                       keys,
                       "--responses-dir",
                       root + "/shared"},
                      &pid_a);
  ASSERT_GT(a, 0);
  const HttpResponse st =
      http_request(a, "GET", "/v1/cluster/status", "", {{"Authorization", "Bearer sk-bob"}});
  ASSERT_EQ(st.status, 200) << st.body;
  const std::string je = json::parse(st.body)["job_executors"][0]["address"];
  const int b = start(sup, "gateway-b",
                      {KEEL_BINARY, "cluster", "gateway", "-m", stories(), "--served-model-name",
                       "stories", "--je", je, "--port", "0", "--drain-timeout", "2", "--no-state",
                       "--api-keys-file", keys, "--responses-dir", root + "/shared"},
                      &pid_b);
  ASSERT_GT(b, 0);

  for (const int port : {a, b}) {
    EXPECT_EQ(complete(port, "sk-wrong").status, 401);
    EXPECT_EQ(http_request(port, "POST", "/v1/completions", R"({"prompt": "x"})").status, 401);
  }
  // alice's prompt is cached for alice (through either gateway), not for bob.
  EXPECT_EQ(cached_tokens(complete(a, "sk-alice", kLongPrompt)), 0);
  EXPECT_GE(cached_tokens(complete(b, "sk-alice", kLongPrompt)), 16);
  EXPECT_EQ(cached_tokens(complete(a, "sk-bob", kLongPrompt)), 0);

  // alice's 6 a minute are counted over both gateways: 2 above, 4 more alternating.
  for (int i = 3; i <= 6; ++i) {
    const HttpResponse r = complete(i % 2 == 1 ? b : a, "sk-alice");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(header(r, "x-ratelimit-limit-requests"), "6");
    EXPECT_EQ(header(r, "x-ratelimit-remaining-requests"), std::to_string(6 - i));
  }
  for (const int port : {b, a}) {
    const HttpResponse over = complete(port, "sk-alice");
    ASSERT_EQ(over.status, 429) << over.body;
    EXPECT_NE(header(over, "retry-after"), "(none)");
    EXPECT_GE(std::stoi(header(over, "retry-after")), 50);
    EXPECT_EQ(header(over, "x-ratelimit-remaining-requests"), "0");
    EXPECT_NE(header(over, "x-ratelimit-reset-requests"), "(none)");
    const json err = json::parse(over.body)["error"];
    EXPECT_EQ(err["code"], "rate_limit_exceeded");
    EXPECT_EQ(err["type"], "requests");
  }
  EXPECT_EQ(complete(b, "sk-bob").status, 200);  // another tenant goes on
  EXPECT_EQ(header(http_request(b, "GET", "/v1/models", "", {{"Authorization", "Bearer sk-alice"}}),
                   "x-ratelimit-remaining-requests"),
            "0");

  // Each gateway counts its own: A admitted alice's 1st, 4th and 6th, B the 2nd, 3rd and 5th.
  for (const int port : {a, b}) {
    const std::string m = http_request(port, "GET", "/metrics").body;
    EXPECT_EQ(metric_value(m, "keel_tenant_requests_total", "tenant=\"alice\""), 3) << m;
    EXPECT_EQ(metric_value(m, "keel_tenant_rate_limited_total", "limit=\"requests\""), 1);
    EXPECT_EQ(metric_value(m, "keel_tenant_quota_dir_errors_total"), 0);
  }
  EXPECT_TRUE(std::filesystem::exists(root + "/shared/quotas/alice.quota"));

  // A raised quota is picked up by both without a restart.
  write_keys(keys, 8);
  EXPECT_EQ(complete(a, "sk-alice").status, 200);
  const HttpResponse last = complete(b, "sk-alice");
  EXPECT_EQ(last.status, 200) << last.body;
  EXPECT_EQ(header(last, "x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(complete(a, "sk-alice").status, 429);

  EXPECT_TRUE(sup.stop(pid_b, 10s).ok());
  EXPECT_TRUE(sup.stop(pid_a, 20s).ok());
}

}  // namespace
}  // namespace keel::testing
