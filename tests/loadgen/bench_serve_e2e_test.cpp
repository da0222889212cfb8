// End to end against FakeOpenAiServer on 127.0.0.1: model discovery, the request bodies, timings
// consistent with the injected delays (lower bounds only: a loaded machine can only make things
// slower), token counts from usage, and failures (HTTP 500, connection closed mid-stream, error
// and malformed payloads, refused connections, timeouts, missing API key) counted with reasons.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "fake_openai_server.h"
#include "loadgen/bench_serve.h"
#include "loadgen/load_runner.h"

namespace keel::loadgen {
namespace {

using testing::FakeFault;
using testing::FakeOpenAiServer;
using testing::FakeServerOptions;

BenchServeConfig small_config(const FakeOpenAiServer& server, int64_t n) {
  BenchServeConfig c;
  c.base_url = server.base_url();
  c.workload.num_prompts = n;
  c.workload.input_len = 16;
  c.workload.output_len = 5;
  c.workload.vocab_size = 500;
  c.request_timeout_s = 60.0;
  return c;
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

TEST(BenchServeE2eTest, TimingsAndCountsMatchTheServersStream) {
  constexpr int kChunks = 5;
  constexpr double kFirst = 0.040, kGap = 0.010;
  FakeOpenAiServer server({.num_chunks = kChunks, .first_delay_ms = 40, .chunk_delay_ms = 10});
  BenchServeConfig c = small_config(server, 8);
  c.load.max_concurrency = 4;
  c.keep_text = true;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const BenchmarkMetrics& m = r->metrics;
  EXPECT_EQ(r->config.model, "fake-model");  // discovered through GET /v1/models
  EXPECT_EQ(m.completed, 8);
  EXPECT_EQ(m.failed, 0);
  EXPECT_EQ(m.total_output_tokens, 8 * kChunks);
  EXPECT_EQ(m.total_input_tokens, 8 * 16);  // the fake server's usage counts the prompt ids
  EXPECT_EQ(m.num_output_from_chunks, 0);
  EXPECT_EQ(server.posts_seen(), 8 + 1);  // plus the initial test request
  EXPECT_LE(m.max_concurrent_requests, 4);
  EXPECT_GE(m.max_concurrent_requests, 1);
  EXPECT_LE(r->connections_opened, 8);
  ASSERT_EQ(r->records.size(), 8u);
  for (const RequestRecord& rec : r->records) {
    ASSERT_TRUE(rec.success) << rec.error;
    EXPECT_GE(rec.ttft_s, kFirst);
    EXPECT_GE(rec.latency_s, kFirst + (kChunks - 1) * kGap);
    ASSERT_EQ(rec.itl_s.size(), static_cast<size_t>(kChunks - 1));
    const double itl_sum = std::accumulate(rec.itl_s.begin(), rec.itl_s.end(), 0.0);
    EXPECT_NEAR(itl_sum, rec.latency_s - rec.ttft_s, 1e-9);
    EXPECT_EQ(rec.usage_completion_tokens, kChunks);
    EXPECT_EQ(rec.generated_text, " t0 t1 t2 t3 t4");
    EXPECT_GE(rec.start_s, 0.0);
  }
  EXPECT_GE(m.ttft.mean_ms, kFirst * 1000);
  EXPECT_GE(m.ttft.median_ms, kFirst * 1000);
  EXPECT_GE(m.e2el.percentiles_ms.back().second, m.e2el.median_ms);
  EXPECT_EQ(m.tpot.count, 8);
  EXPECT_EQ(m.itl.count, 8 * (kChunks - 1));
  // TPOT is (E2E - TTFT) / (K - 1) per request, so its mean equals the mean ITL here.
  EXPECT_NEAR(m.tpot.mean_ms, m.itl.mean_ms, 1e-6);
  EXPECT_GT(m.request_throughput, 0.0);
  EXPECT_NEAR(m.output_throughput, m.request_throughput * kChunks, 1e-9 * m.output_throughput);
}

TEST(BenchServeE2eTest, DisconnectProbabilityHangsUpAndCountsCancelled) {
  // Hang-ups come after at most output_len - 1 = 5 chunks, far from the stream's end (12 chunks,
  // 2 ms apart): a planned hang-up always happens.
  FakeOpenAiServer server({.num_chunks = 12, .chunk_delay_ms = 2});
  BenchServeConfig c = small_config(server, 40);
  c.workload.output_len = 6;
  c.disconnect_prob = 0.5;
  c.load.max_concurrency = 8;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const BenchmarkMetrics& m = r->metrics;
  EXPECT_EQ(m.failed, 0);
  EXPECT_GT(m.cancelled, 0);
  EXPECT_GT(m.completed, 0);
  EXPECT_EQ(m.completed + m.cancelled, 40);
  for (const RequestRecord& rec : r->records) {
    if (rec.cancelled) {
      EXPECT_LT(rec.num_content_chunks, 12);  // hung up before the end
    } else {
      EXPECT_TRUE(rec.success) << rec.error;
    }
  }
  // The same seed hangs up on the same requests.
  auto again = run_bench_serve(c);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < r->records.size(); ++i) {
    EXPECT_EQ(again->records[i].cancelled, r->records[i].cancelled) << i;
  }
  c.disconnect_prob = 1.0;
  auto all = run_bench_serve(c);
  ASSERT_TRUE(all.ok()) << all.error().to_string();  // the test request is never cancelled
  EXPECT_EQ(all->metrics.cancelled, 40);
  EXPECT_EQ(all->metrics.completed, 0);
  EXPECT_EQ(all->metrics.failed, 0);
}

TEST(BenchServeE2eTest, RequestBodiesAndIdsAreWhatVllmSends) {
  FakeOpenAiServer server({.num_chunks = 2});
  BenchServeConfig c = small_config(server, 3);
  c.model = "given-model";
  c.initial_test = false;
  c.extra_body = {{"top_k", 1}};
  std::vector<std::string> notes;
  auto r = run_bench_serve(c, [&](const std::string& s) { notes.push_back(s); });
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_FALSE(notes.empty());
  EXPECT_TRUE(contains(notes.back(), "3/3 requests done (0 failed)")) << notes.back();
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  for (const std::string& b : bodies) {
    auto j = nlohmann::json::parse(b);
    EXPECT_EQ(j["model"], "given-model");
    EXPECT_EQ(j["prompt"].size(), 16u);
    EXPECT_EQ(j["max_tokens"], 5);
    EXPECT_EQ(j["ignore_eos"], true);
    EXPECT_EQ(j["temperature"], 0.0);
    EXPECT_EQ(j["stream"], true);
    EXPECT_EQ(j["stream_options"]["include_usage"], true);
    EXPECT_EQ(j["top_k"], 1);
  }
  const auto ids = server.request_ids();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 3u);
  for (const std::string& id : ids) EXPECT_TRUE(id.starts_with("keel-bench-")) << id;
}

TEST(BenchServeE2eTest, ChatEndpointWithTextPrompts) {
  FakeOpenAiServer server({.num_chunks = 3, .split_events = false, .ping = false});
  BenchServeConfig c = small_config(server, 4);
  c.endpoint = "/v1/chat/completions";
  c.workload.format = PromptFormat::kText;
  c.workload.dataset = DatasetKind::kSharedPrefix;
  c.workload.num_groups = 2;
  c.workload.prefix_len = 8;
  c.workload.suffix_len = 4;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->metrics.completed, 4);
  EXPECT_EQ(r->metrics.total_output_tokens, 12);
  EXPECT_EQ(r->metrics.total_input_tokens, 4 * 12);
  for (const std::string& b : server.bodies()) {
    auto j = nlohmann::json::parse(b);
    EXPECT_EQ(j["messages"][0]["role"], "user");
    EXPECT_EQ(j["max_completion_tokens"], 5);
  }
}

TEST(BenchServeE2eTest, WithoutUsageTokensAreCountedFromChunks) {
  FakeOpenAiServer server({.num_chunks = 4, .send_usage = false});
  BenchServeConfig c = small_config(server, 3);
  c.initial_test = false;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->metrics.completed, 3);
  EXPECT_EQ(r->metrics.total_output_tokens, 12);
  EXPECT_EQ(r->metrics.num_output_from_chunks, 3);
}

TEST(BenchServeE2eTest, Http500IsCountedAsFailedWithTheServersMessage) {
  FakeOpenAiServer server({.num_chunks = 3, .fault = FakeFault::kHttp500, .fault_every = 2});
  BenchServeConfig c = small_config(server, 6);
  c.initial_test = false;
  c.load.max_concurrency = 2;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->metrics.completed, 3);
  EXPECT_EQ(r->metrics.failed, 3);
  EXPECT_EQ(r->metrics.total_output_tokens, 9);
  ASSERT_EQ(r->metrics.first_errors.size(), 3u);
  for (const std::string& e : r->metrics.first_errors) {
    EXPECT_TRUE(contains(e, "HTTP 500")) << e;
    EXPECT_TRUE(contains(e, "injected failure")) << e;
  }
}

// Runs n requests against a server injecting `fault` into all of them; returns the records.
std::vector<RequestRecord> run_all_faulty(FakeFault fault, int n) {
  FakeOpenAiServer server({.num_chunks = 4, .fault = fault});
  BenchServeConfig c = small_config(server, n);
  c.initial_test = false;
  c.model = "m";
  auto r = run_bench_serve(c);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  if (!r.ok()) return {};
  EXPECT_EQ(r->metrics.failed, n);
  EXPECT_EQ(r->metrics.completed, 0);
  EXPECT_EQ(r->metrics.total_output_tokens, 0);
  return r->records;
}

TEST(BenchServeE2eTest, ConnectionClosedMidStreamFails) {
  for (const RequestRecord& rec : run_all_faulty(FakeFault::kCloseMidStream, 4)) {
    EXPECT_FALSE(rec.success);
    EXPECT_TRUE(contains(rec.error, "before [DONE]")) << rec.error;
    EXPECT_EQ(rec.num_content_chunks, 2);
  }
}

TEST(BenchServeE2eTest, ErrorPayloadFails) {
  for (const RequestRecord& rec : run_all_faulty(FakeFault::kErrorPayload, 3)) {
    EXPECT_TRUE(contains(rec.error, "injected mid-stream failure")) << rec.error;
  }
}

TEST(BenchServeE2eTest, MalformedPayloadFails) {
  for (const RequestRecord& rec : run_all_faulty(FakeFault::kMalformed, 3)) {
    EXPECT_TRUE(contains(rec.error, "malformed SSE data")) << rec.error;
  }
}

TEST(BenchServeE2eTest, MissingDoneFails) {
  for (const RequestRecord& rec : run_all_faulty(FakeFault::kNoDone, 3)) {
    EXPECT_TRUE(contains(rec.error, "before [DONE] after 4 content chunks")) << rec.error;
  }
}

uint16_t closed_port() {
  // A server that is started and destroyed leaves a port nobody listens on.
  FakeOpenAiServer s({});
  return s.port();
}

TEST(BenchServeE2eTest, ConnectionRefusedCountsEveryRequestAsFailed) {
  RunnerConfig rc;
  rc.client.target = {.host = "127.0.0.1", .port = std::to_string(closed_port())};
  rc.client.request_timeout_s = 10.0;
  std::vector<PlannedRequest> reqs(5, PlannedRequest{.body = "{}", .prompt_len = 1});
  auto out = run_load(rc, reqs);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->records.size(), 5u);
  for (const RequestRecord& rec : out->records) {
    EXPECT_FALSE(rec.success);
    EXPECT_TRUE(contains(rec.error, "refused")) << rec.error;
  }
  auto m = compute_metrics(out->records, out->duration_s, {99}, {});
  EXPECT_EQ(m.failed, 5);
}

TEST(BenchServeE2eTest, UnreachableServerFailsModelDiscoveryWithOneMessage) {
  BenchServeConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(closed_port());
  c.workload.num_prompts = 2;
  auto r = run_bench_serve(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(), "cannot find a model")) << r.error().message();
  EXPECT_TRUE(contains(r.error().message(), "refused")) << r.error().message();
}

TEST(BenchServeE2eTest, FailingInitialTestAbortsTheRun) {
  FakeOpenAiServer server({.fault = FakeFault::kHttp500});
  BenchServeConfig c = small_config(server, 5);
  auto r = run_bench_serve(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message(), "initial test request failed: HTTP 500"))
      << r.error().message();
  EXPECT_EQ(server.posts_seen(), 1);
}

TEST(BenchServeE2eTest, ApiKeyIsSentAsBearerToken) {
  FakeOpenAiServer server({.num_chunks = 2, .required_api_key = "sekrit"});
  BenchServeConfig c = small_config(server, 2);
  auto denied = run_bench_serve(c);
  ASSERT_FALSE(denied.ok());
  EXPECT_TRUE(contains(denied.error().message(), "HTTP 401")) << denied.error().message();
  c.api_key = "sekrit";
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->metrics.completed, 2);
}

TEST(BenchServeE2eTest, StalledStreamTimesOut) {
  FakeOpenAiServer server({.num_chunks = 2, .first_delay_ms = 5000});
  BenchServeConfig c = small_config(server, 2);
  c.initial_test = false;
  c.model = "m";
  c.request_timeout_s = 0.3;
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->metrics.failed, 2);
  for (const std::string& e : r->metrics.first_errors) {
    EXPECT_TRUE(contains(e, "timed out")) << e;
  }
}

TEST(BenchServeE2eTest, PoissonArrivalsAtAFiniteRateComplete) {
  FakeOpenAiServer server({.num_chunks = 2});
  BenchServeConfig c = small_config(server, 10);
  c.initial_test = false;
  c.load.request_rate = 200.0;  // ~50 ms of arrivals
  auto r = run_bench_serve(c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->metrics.completed, 10);
  for (const RequestRecord& rec : r->records) {
    EXPECT_GE(rec.start_s + 1e-6, rec.scheduled_s);  // never sent before its arrival time
  }
  EXPECT_GE(r->metrics.duration_s, 10.0 / 200.0);
}

}  // namespace
}  // namespace keel::loadgen
