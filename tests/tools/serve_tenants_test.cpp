// End to end: `keel serve --api-keys-file` (docs/tenants.md) with the built-in model — a wrong
// key is refused (401); past a tenant's requests per minute a 429 with Retry-After, the
// x-ratelimit-* headers and OpenAI's rate_limit_exceeded error; a changed keys file is picked up
// without a restart; /metrics counts per tenant.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

void write_keys(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

HttpResponse complete(int port, const std::string& key) {
  return http_request(port, "POST", "/v1/completions",
                      R"({"prompt": "Once upon a time", "max_tokens": 4, "ignore_eos": true})",
                      {{"Authorization", "Bearer " + key}});
}

std::string header(const HttpResponse& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? "(none)" : it->second;
}

TEST(ServeTenantsTest, KeysQuotasReloadAndMetrics) {
  const std::string dir = make_temp_dir("serve-tenants");
  const std::string keys = dir + "/keys.jsonl";
  write_keys(keys,
             "{\"key\": \"sk-alice\", \"tenant\": \"alice\", \"requests_per_minute\": 2, "
             "\"tokens_per_minute\": 100000}\n"
             "{\"key\": \"sk-bob\", \"tenant\": \"bob\", \"weight\": 2}\n");
  ServeProcess s({"--api-keys-file", keys, "-t", "1"}, {"KEEL_HOME=" + dir});
  ASSERT_TRUE(s.ok()) << s.error();
  const int port = s.port();

  EXPECT_EQ(complete(port, "sk-wrong").status, 401);
  EXPECT_EQ(http_request(port, "POST", "/v1/completions", R"({"prompt": "x"})").status, 401);

  const HttpResponse first = complete(port, "sk-alice");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(header(first, "x-ratelimit-limit-requests"), "2");
  EXPECT_EQ(header(first, "x-ratelimit-remaining-requests"), "1");
  EXPECT_EQ(header(first, "x-ratelimit-limit-tokens"), "100000");
  EXPECT_NE(header(first, "x-ratelimit-remaining-tokens"), "(none)");
  EXPECT_NE(header(first, "x-ratelimit-reset-tokens"), "(none)");
  ASSERT_EQ(complete(port, "sk-alice").status, 200);
  const HttpResponse over = complete(port, "sk-alice");
  ASSERT_EQ(over.status, 429) << over.body;
  EXPECT_NE(header(over, "retry-after"), "(none)");
  EXPECT_GE(std::stoi(header(over, "retry-after")), 1);
  EXPECT_EQ(header(over, "x-ratelimit-remaining-requests"), "0");
  EXPECT_NE(header(over, "x-ratelimit-reset-requests"), "(none)");
  const json err = json::parse(over.body)["error"];
  EXPECT_EQ(err["code"], "rate_limit_exceeded");
  EXPECT_NE(err["message"].get<std::string>().find("requests per minute"), std::string::npos);
  // Every response to a keyed tenant carries the headers, not only generations.
  const HttpResponse models =
      http_request(port, "GET", "/v1/models", "", {{"Authorization", "Bearer sk-alice"}});
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(header(models, "x-ratelimit-limit-requests"), "2");
  // bob has no quotas: served, and no x-ratelimit headers.
  const HttpResponse bob = complete(port, "sk-bob");
  EXPECT_EQ(bob.status, 200);
  EXPECT_EQ(header(bob, "x-ratelimit-limit-requests"), "(none)");

  // A raised quota, picked up from the changed file without a restart.
  write_keys(keys,
             "{\"key\": \"sk-alice\", \"tenant\": \"alice\", \"requests_per_minute\": 5}\n"
             "{\"key\": \"sk-bob\", \"tenant\": \"bob\", \"weight\": 2}\n");
  const HttpResponse reloaded = complete(port, "sk-alice");
  ASSERT_EQ(reloaded.status, 200) << reloaded.body;
  EXPECT_EQ(header(reloaded, "x-ratelimit-limit-requests"), "5");
  EXPECT_EQ(header(reloaded, "x-ratelimit-limit-tokens"), "(none)");

  const std::string metrics = http_request(port, "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "keel_tenant_requests_total", "tenant=\"alice\""), 3);
  EXPECT_EQ(metric_value(metrics, "keel_tenant_requests_total", "tenant=\"bob\""), 1);
  EXPECT_EQ(metric_value(metrics, "keel_tenant_rate_limited_total", "limit=\"requests\""), 1);
  EXPECT_GT(metric_value(metrics, "keel_tenant_prompt_tokens_total", "tenant=\"alice\""), 0);
  EXPECT_EQ(metric_value(metrics, "keel_tenant_generation_tokens_total", "tenant=\"alice\""), 12);
  EXPECT_EQ(metric_value(metrics, "keel_tenant_requests_in_flight", "tenant=\"alice\""), 0);
  EXPECT_GT(metric_value(metrics, "keel_tenant_vtc_counter", "tenant=\"alice\""), 0);
  EXPECT_EQ(metric_value(metrics, "keel_api_keys_reloads_total"), 1);
}

TEST(ServeTenantsTest, AnUnreadableKeysFileStopsTheStart) {
  const std::string dir = make_temp_dir("serve-tenants-bad");
  const std::string keys = dir + "/keys.jsonl";
  write_keys(keys, "{\"key\": \"sk\", \"tenant\": \"t\", \"weight\": -1}\n");
  ServeProcess s({"--api-keys-file", keys, "-t", "1"}, {"KEEL_HOME=" + dir});
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace keel::testing
