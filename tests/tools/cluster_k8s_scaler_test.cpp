// `keel cluster up --scaler k8s` against the fake Kubernetes API server (tests/support/
// fake_kube_api.h), on loopback with bounded waits: the cluster starts with no TE (--min 0), a
// request is held, the autoscaler activates — a GET of the Deployment's scale at start, then a
// merge patch of spec.replicas to 1 with the service-account token from --k8s-token-file — and,
// with no pod ever becoming a TE here, the request gets the 503 past --activation-timeout. The
// event log and /metrics show the write. A 403 from RBAC and a dead API server are one-line
// errors at start (exit 1). The same gateway at zero TEs (the shipped manifest's shape): /health
// says ready (200: the activator holds requests and wakes the fleet), /health and /v1/models stay
// fast while many requests are held (their latencies printed), and the HTTP front's flags
// (--max-body-bytes and the rest) reach it: a 9 MiB file uploads with a 16 MiB limit. Children
// are stopped by PID.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/fake_kube_api.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
constexpr const char* kScalePath = "/apis/apps/v1/namespaces/keel/deployments/te-pool/scale";

std::vector<std::string> cluster_argv(const FakeKubeApi& api, const std::string& token_file,
                                      const std::string& event_log,
                                      const std::string& activation_timeout = "0.5") {
  return {KEEL_BINARY,
          "cluster",
          "up",
          "-m",
          KEEL_REPO_STORIES,
          "--served-model-name",
          "stories",
          "--port",
          "0",
          "--jes",
          "1",
          "--min",
          "0",
          "--max",
          "2",
          "--activation-timeout",
          activation_timeout,
          "--drain-timeout",
          "1",
          "--scaler",
          "k8s",
          "--k8s-deployment",
          "te-pool",
          "--k8s-api",
          api.url(),
          "--k8s-token-file",
          token_file,
          "--k8s-namespace",
          "keel",
          "--event-log",
          event_log};
}

class ClusterK8sScaler : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("k8s-scaler");
    token_file_ = dir_ + "/token";
    std::ofstream(token_file_) << "sa-token-42\n";
    std::string error;
    api_ = FakeKubeApi::start(&error);
    ASSERT_TRUE(api_) << error;
    api_->put_deployment("keel", "te-pool", 0);
    api_->require_token("sa-token-42");
  }
  std::string dir_, token_file_;
  std::unique_ptr<FakeKubeApi> api_;
};

TEST_F(ClusterK8sScaler, ActivationPatchesTheDeploymentsReplicas) {
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  const std::string log = dir_ + "/events.jsonl";
  spec.argv = cluster_argv(*api_, token_file_, log);
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  // The start-up read: the Deployment's current count.
  std::vector<RecordedRequest> reqs = api_->requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].path, kScalePath);

  const json req = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", req.dump());
  EXPECT_EQ(r.status, 503) << r.body;  // no pod becomes a TE here

  ASSERT_TRUE(eventually(
      [&] {
        for (const RecordedRequest& q : api_->requests())
          if (q.method == "PATCH") return true;
        return false;
      },
      std::chrono::seconds(10)));
  reqs = api_->requests();
  const RecordedRequest* patch = nullptr;
  for (const RecordedRequest& q : reqs) {
    EXPECT_EQ(q.authorization, "Bearer sa-token-42");
    EXPECT_EQ(q.path, kScalePath);
    if (q.method == "PATCH" && patch == nullptr) patch = &q;
  }
  ASSERT_NE(patch, nullptr);
  EXPECT_EQ(patch->content_type, "application/merge-patch+json");
  EXPECT_EQ(json::parse(patch->body), (json{{"spec", {{"replicas", 1}}}}));
  EXPECT_EQ(
      api_->objects().at("/apis/apps/v1/namespaces/keel/deployments/te-pool")["spec"]["replicas"],
      1);

  const HttpResponse metrics = http_request(port, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("keel:autoscaler_k8s_replica_writes_total{model_name=\"stories\","
                              "role=\"colocated\",outcome=\"ok\"}"),
            std::string::npos)
      << metrics.body;
  bool logged = false;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("event", "") == "k8s_scale") {
      EXPECT_EQ(e["deployment"], "te-pool");
      EXPECT_EQ(e["previous"], 0);
      EXPECT_EQ(e["replicas"], 1);
      EXPECT_EQ(e["reason"], "activate");
      EXPECT_EQ(e["outcome"], "ok");
      logged = true;
      break;
    }
  }
  EXPECT_TRUE(logged) << "no k8s_scale event in " << log;
  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
}

// Milliseconds one GET of `path` takes (-1 when it does not answer 200).
double timed_get(int port, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const HttpResponse r = http_request(port, "GET", path);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r.status == 200 ? ms : -1;
}

double percentile(std::vector<double> ms, double p) {
  std::sort(ms.begin(), ms.end());
  return ms[static_cast<size_t>(p / 100.0 * static_cast<double>(ms.size() - 1) + 0.5)];
}

TEST_F(ClusterK8sScaler, AtZeroTesTheGatewayStaysReadyAndResponsiveWhileHolding) {
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = cluster_argv(*api_, token_file_, dir_ + "/events.jsonl", "3");
  for (const char* flag : {"--io-threads", "2", "--max-body-bytes", "16777216", "--max-connections",
                           "256", "--max-connections-per-client", "128", "--header-timeout", "5",
                           "--batch-concurrency", "2"}) {
    spec.argv.push_back(flag);
  }
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);

  // Ready with no TE: a load balancer keeps the gateway that wakes the fleet.
  const HttpResponse health = http_request(port, "GET", "/health");
  ASSERT_EQ(health.status, 200) << health.body;
  const json h = json::parse(health.body, nullptr, false);
  EXPECT_EQ(h.value("ready_task_executors", -1), 0) << health.body;
  EXPECT_NE(h.value("activator", "").find("held"), std::string::npos) << health.body;

  // Many held requests (8x the io threads): /health and /v1/models answer meanwhile.
  constexpr int kHeld = 16;
  const json req = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}};
  std::vector<int> statuses(kHeld, 0);
  std::vector<std::thread> held;
  for (int i = 0; i < kHeld; ++i) {
    held.emplace_back(
        [&, i] { statuses[i] = http_request(port, "POST", "/v1/completions", req.dump()).status; });
  }
  ASSERT_TRUE(eventually(
      [&] {
        const json s = json::parse(http_request(port, "GET", "/health").body, nullptr, false);
        return s.value("held_requests", 0) == kHeld;
      },
      std::chrono::seconds(2)))
      << "the requests were not all held";
  std::vector<double> health_ms, models_ms;
  for (int i = 0; i < 20; ++i) {
    health_ms.push_back(timed_get(port, "/health"));
    models_ms.push_back(timed_get(port, "/v1/models"));
  }
  for (int i = 0; i < kHeld; ++i) held[i].join();
  EXPECT_GE(*std::min_element(health_ms.begin(), health_ms.end()), 0.0) << "a /health failed";
  EXPECT_GE(*std::min_element(models_ms.begin(), models_ms.end()), 0.0) << "a /v1/models failed";
  std::printf(
      "%d held at the gateway: /health p50 %.2f ms p99 %.2f ms; /v1/models p50 %.2f ms "
      "p99 %.2f ms\n",
      kHeld, percentile(health_ms, 50), percentile(health_ms, 99), percentile(models_ms, 50),
      percentile(models_ms, 99));
  // Generous bounds (a loaded CI machine); a held request holding an io thread took seconds.
  EXPECT_LT(percentile(health_ms, 99), 500.0);
  EXPECT_LT(percentile(models_ms, 99), 500.0);
  for (int s : statuses) EXPECT_EQ(s, 503);  // no pod becomes a TE here

  // --max-body-bytes reached the gateway: a 9 MiB batch file uploads (8 MiB is the default cap).
  std::string lines;
  const std::string pad(900, 'a');
  for (int i = 0; lines.size() < (size_t{9} << 20); ++i) {
    lines += json{{"custom_id", "r" + std::to_string(i)},
                  {"method", "POST"},
                  {"url", "/v1/completions"},
                  {"body", {{"model", "stories"}, {"prompt", pad}, {"max_tokens", 1}}}}
                 .dump() +
             "\n";
  }
  const std::string boundary = "keelboundary42";
  const std::string body =
      "--" + boundary + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--" +
      boundary +
      "\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"big.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
      lines + "\r\n--" + boundary + "--\r\n";
  const HttpResponse upload =
      http_request(port, "POST", "/v1/files", body,
                   {{"Content-Type", "multipart/form-data; boundary=" + boundary}});
  EXPECT_EQ(upload.status, 200) << upload.body.substr(0, 400);
  EXPECT_EQ(json::parse(upload.body, nullptr, false).value("bytes", int64_t{0}),
            static_cast<int64_t>(lines.size()));
  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
}

TEST_F(ClusterK8sScaler, ForbiddenAndDeadApiServerAreOneLineErrors) {
  api_->force_scale_status(403);
  CliResult r = run_keel({"cluster",
                          "up",
                          "-m",
                          KEEL_REPO_STORIES,
                          "--port",
                          "0",
                          "--min",
                          "0",
                          "--max",
                          "1",
                          "--scaler",
                          "k8s",
                          "--k8s-deployment",
                          "te-pool",
                          "--k8s-api",
                          api_->url(),
                          "--k8s-token-file",
                          token_file_,
                          "--k8s-namespace",
                          "keel"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("deployment keel/te-pool: 403 Forbidden"), std::string::npos) << r.err;

  const std::string dead = api_->url();
  api_.reset();  // nothing listens there now
  const auto t0 = std::chrono::steady_clock::now();
  r = run_keel({"cluster",
                "up",
                "-m",
                KEEL_REPO_STORIES,
                "--port",
                "0",
                "--min",
                "0",
                "--max",
                "1",
                "--scaler",
                "k8s",
                "--k8s-deployment",
                "te-pool",
                "--k8s-api",
                dead,
                "--k8s-token-file",
                token_file_,
                "--k8s-namespace",
                "keel"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kubernetes: 4 tries"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("connecting"), std::string::npos) << r.err;

  r = run_keel({"cluster", "up", "-m", KEEL_REPO_STORIES, "--port", "0", "--scaler", "k8s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--scaler k8s needs the autoscaler"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace keel::testing
