// `keel cluster up --scaler k8s` against the fake Kubernetes API server (tests/support/
// fake_kube_api.h), on loopback with bounded waits: the cluster starts with no TE (--min 0), a
// request is held, the autoscaler activates — a GET of the Deployment's scale at start, then a
// merge patch of spec.replicas to 1 with the service-account token from --k8s-token-file — and,
// with no pod ever becoming a TE here, the request gets the 503 past --activation-timeout. The
// event log and /metrics show the write. A 403 from RBAC and a dead API server are one-line
// errors at start (exit 1). Children are stopped by PID.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "cluster/process_supervisor.h"
#include "cluster/ready_line.h"
#include "serve_process.h"
#include "support/fake_kube_api.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
constexpr const char* kScalePath = "/apis/apps/v1/namespaces/keel/deployments/te-pool/scale";

std::vector<std::string> cluster_argv(const FakeKubeApi& api, const std::string& token_file,
                                      const std::string& event_log) {
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
          "0.5",
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
  cluster::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  cluster::ChildSpec spec;
  spec.name = "cluster";
  const std::string log = dir_ + "/events.jsonl";
  spec.argv = cluster_argv(*api_, token_file_, log);
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *cluster::ready_port(child->ready);
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
