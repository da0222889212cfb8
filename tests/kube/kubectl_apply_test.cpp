// The deploy/ manifests through `kubectl apply --validate=false -f deploy/` against the fake API
// server (tests/support/fake_kube_api.h): kubectl must succeed, and the objects it created must be
// the expected kinds and names; the probes must point at the health endpoints, the TE pods must
// have a preStop drain hook, the PodDisruptionBudget must select every TE pool's pods (and not the
// warm pool), the autoscaler's Role must allow get/patch on deployments/scale, and the gateway must
// run `cluster up --scaler k8s` against a TE Deployment that exists.
// kubectl missing: skipped with the reason printed, failed under CI=true.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/etcd_server.h"
#include "support/fake_kube_api.h"
#include "support/test_support.h"

namespace keel::kube {
namespace {

using Json = nlohmann::json;
using testing::FakeKubeApi;

// The kubectl binary on PATH ("" when none).
std::string find_kubectl() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/kubectl";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

struct RunResult {
  int exit_code = -1;  // -1: killed at the timeout
  std::string output;
};

// Runs argv with stdout+stderr to a file; killed by PID (SIGKILL) past `timeout`.
RunResult run(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  const std::string out = testing::make_temp_dir("kubectl") + "/out.txt";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  RunResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.output = testing::read_file(out);
  return r;
}

const Json& find(const std::map<std::string, Json>& objects, const std::string& path) {
  static const Json kNull;
  auto it = objects.find(path);
  EXPECT_NE(it, objects.end()) << "kubectl did not create " << path;
  return it == objects.end() ? kNull : it->second;
}

// The only container of a Deployment's pod template.
const Json& container_of(const Json& deployment) {
  return deployment["spec"]["template"]["spec"]["containers"][0];
}

bool selects(const Json& selector, const Json& labels) {
  for (const auto& [k, v] : selector["matchLabels"].items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

// The value after `flag` in a container's command ("" when absent).
std::string flag_value(const Json& container, const std::string& flag) {
  const Json& cmd = container["command"];
  for (size_t i = 0; i + 1 < cmd.size(); ++i) {
    if (cmd[i] == flag) return cmd[i + 1].get<std::string>();
  }
  return "";
}

constexpr const char* kNs = "/namespaces/keel";
const std::string kApps = std::string("/apis/apps/v1") + kNs;
const std::string kCore = std::string("/api/v1") + kNs;
const std::vector<std::string> kTePools = {"colocated", "prefill", "decode"};

class KubectlApply : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = find_kubectl();
    if (kubectl_.empty()) {
      if (testing::under_ci()) {
        GTEST_FAIL() << "kubectl not found on PATH (scripts/install-deps.sh installs "
                        "kubernetes-client); required under CI=true";
      }
      GTEST_SKIP() << "kubectl not found on PATH (scripts/install-deps.sh installs "
                      "kubernetes-client); skipping the manifest test";
    }
    std::string error;
    api_ = FakeKubeApi::start(&error);
    ASSERT_TRUE(api_) << error;
    const std::string dir = testing::make_temp_dir("kubectl-home");
    const std::string kubeconfig = dir + "/config";
    { std::ofstream(kubeconfig) << ""; }  // an empty config: nothing but --server
    const RunResult r = run({kubectl_, "--kubeconfig", kubeconfig, "--cache-dir", dir + "/cache",
                             "--server", api_->url(), "--request-timeout", "10s", "apply",
                             "--validate=false", "-f", KEEL_DEPLOY_DIR},
                            std::chrono::seconds(30));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    output_ = r.output;
    objects_ = api_->objects();
  }
  std::string kubectl_;
  std::unique_ptr<FakeKubeApi> api_;
  std::string output_;
  std::map<std::string, Json> objects_;
};

TEST_F(KubectlApply, CreatesTheExpectedObjects) {
  const std::set<std::string> expected = {
      "/api/v1/namespaces/keel",
      kCore + "/serviceaccounts/keel-autoscaler",
      "/apis/rbac.authorization.k8s.io/v1" + std::string(kNs) + "/roles/keel-scale-tes",
      "/apis/rbac.authorization.k8s.io/v1" + std::string(kNs) +
          "/rolebindings/keel-autoscaler-scale-tes",
      kApps + "/deployments/keel-etcd",
      kCore + "/services/keel-etcd",
      kApps + "/deployments/keel-gateway",
      kCore + "/services/keel-gateway",
      kApps + "/deployments/keel-te-stories260k-colocated",
      kApps + "/deployments/keel-te-stories260k-prefill",
      kApps + "/deployments/keel-te-stories260k-decode",
      kApps + "/deployments/keel-te-warm",
      "/apis/policy/v1" + std::string(kNs) + "/poddisruptionbudgets/keel-te",
  };
  std::set<std::string> created;
  for (const auto& [path, obj] : objects_) created.insert(path);
  EXPECT_EQ(created, expected) << output_;
  // Each was POSTed by kubectl with the kind its path says.
  EXPECT_EQ(find(objects_, "/api/v1/namespaces/keel")["kind"], "Namespace");
  EXPECT_EQ(find(objects_, kApps + "/deployments/keel-gateway")["kind"], "Deployment");
  EXPECT_EQ(find(objects_, "/apis/policy/v1/namespaces/keel/poddisruptionbudgets/keel-te")["kind"],
            "PodDisruptionBudget");
  EXPECT_EQ(find(objects_, kCore + "/services/keel-gateway")["kind"], "Service");
  EXPECT_NE(output_.find("deployment.apps/keel-gateway created"), std::string::npos) << output_;
}

TEST_F(KubectlApply, ProbesPointAtTheHealthEndpoints) {
  const Json& gw = container_of(find(objects_, kApps + "/deployments/keel-gateway"));
  EXPECT_EQ(gw["readinessProbe"]["httpGet"]["path"], "/health");
  EXPECT_EQ(gw["readinessProbe"]["httpGet"]["port"], "http");
  EXPECT_EQ(gw["ports"][0]["containerPort"], std::stoi(flag_value(gw, "--port")));
  EXPECT_TRUE(gw["livenessProbe"].contains("httpGet"));
  for (const std::string& role : kTePools) {
    const Json& te =
        container_of(find(objects_, kApps + "/deployments/keel-te-stories260k-" + role));
    // The probes ask the TE's progress-based /health (keel te --health-port), on its own port.
    EXPECT_EQ(te["ports"][0]["name"], "control");
    EXPECT_EQ(te["ports"][0]["containerPort"], std::stoi(flag_value(te, "--port")));
    EXPECT_EQ(te["ports"][1]["name"], "health");
    EXPECT_EQ(te["ports"][1]["containerPort"], std::stoi(flag_value(te, "--health-port")));
    for (const char* probe : {"readinessProbe", "livenessProbe"}) {
      EXPECT_EQ(te[probe]["httpGet"]["path"], "/health") << role << " " << probe;
      EXPECT_EQ(te[probe]["httpGet"]["port"], "health") << role << " " << probe;
    }
    EXPECT_EQ(flag_value(te, "--role"), role);
    EXPECT_EQ(flag_value(te, "--membership"), "etcd");
    EXPECT_EQ(flag_value(te, "--etcd-endpoints"), "http://keel-etcd:2379");
    EXPECT_TRUE(te["resources"]["requests"].contains("cpu"));
    EXPECT_TRUE(te["resources"]["limits"].contains("memory"));
  }
  const Json& warm = container_of(find(objects_, kApps + "/deployments/keel-te-warm"));
  EXPECT_EQ(warm["livenessProbe"]["httpGet"]["path"], "/health") << "a warm TE answers \"warm\"";
  EXPECT_EQ(warm["ports"][1]["containerPort"], std::stoi(flag_value(warm, "--health-port")));
  const Json& etcd = container_of(find(objects_, kApps + "/deployments/keel-etcd"));
  EXPECT_EQ(etcd["readinessProbe"]["httpGet"]["path"], "/health");
}

TEST_F(KubectlApply, TePodsDrainOnPreStop) {
  for (const char* name : {"keel-te-stories260k-colocated", "keel-te-stories260k-prefill",
                           "keel-te-stories260k-decode", "keel-te-warm"}) {
    const Json& te = container_of(find(objects_, kApps + "/deployments/" + name));
    const Json& cmd = te["lifecycle"]["preStop"]["exec"]["command"];
    ASSERT_TRUE(cmd.is_array()) << name;
    const std::string script = cmd.back().get<std::string>();
    EXPECT_NE(script.find("kill -TERM 1"), std::string::npos) << name;  // the drain
    EXPECT_NE(script.find("kill -0 1"), std::string::npos) << name;     // waits for it
    EXPECT_GT(find(objects_, kApps + "/deployments/" +
                                 name)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                  .get<int>(),
              0);
  }
}

TEST_F(KubectlApply, DisruptionBudgetSelectsEveryTePoolButNotTheWarmPool) {
  const Json& pdb = find(objects_, "/apis/policy/v1/namespaces/keel/poddisruptionbudgets/keel-te");
  const Json& selector = pdb["spec"]["selector"];
  for (const std::string& role : kTePools) {
    const Json& d = find(objects_, kApps + "/deployments/keel-te-stories260k-" + role);
    EXPECT_TRUE(selects(selector, d["spec"]["template"]["metadata"]["labels"])) << role;
    // The Deployment's own selector matches its pods too.
    EXPECT_TRUE(selects(d["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"]));
  }
  const Json& warm = find(objects_, kApps + "/deployments/keel-te-warm");
  EXPECT_FALSE(selects(selector, warm["spec"]["template"]["metadata"]["labels"]));
  const Json& gw = find(objects_, kApps + "/deployments/keel-gateway");
  EXPECT_FALSE(selects(selector, gw["spec"]["template"]["metadata"]["labels"]));
  EXPECT_EQ(pdb["spec"]["maxUnavailable"], 1);
}

TEST_F(KubectlApply, AutoscalerMayScaleTheTeDeploymentItNames) {
  const Json& gw_dep = find(objects_, kApps + "/deployments/keel-gateway");
  EXPECT_EQ(gw_dep["spec"]["template"]["spec"]["serviceAccountName"], "keel-autoscaler");
  const Json& gw = container_of(gw_dep);
  EXPECT_EQ(flag_value(gw, "--scaler"), "k8s");
  const std::string target = flag_value(gw, "--k8s-deployment");
  EXPECT_TRUE(objects_.count(kApps + "/deployments/" + target)) << target;
  EXPECT_EQ(flag_value(gw, "--membership"), "etcd");

  const Json& role = find(objects_,
                          "/apis/rbac.authorization.k8s.io/v1/namespaces/keel/roles/"
                          "keel-scale-tes");
  bool scale_rule = false;
  for (const Json& rule : role["rules"]) {
    if (rule["resources"] == Json::array({"deployments/scale"})) {
      const std::set<std::string> verbs(rule["verbs"].begin(), rule["verbs"].end());
      scale_rule = verbs.count("get") && verbs.count("patch");
    }
  }
  EXPECT_TRUE(scale_rule) << role.dump();
  const Json& binding = find(objects_,
                             "/apis/rbac.authorization.k8s.io/v1/namespaces/keel/"
                             "rolebindings/keel-autoscaler-scale-tes");
  EXPECT_EQ(binding["subjects"][0]["name"], "keel-autoscaler");
  EXPECT_EQ(binding["roleRef"]["name"], "keel-scale-tes");
  // The gateway and etcd Services select their pods.
  for (const char* name : {"keel-gateway", "keel-etcd"}) {
    const Json& svc = find(objects_, kCore + "/services/" + name);
    const Json& d = find(objects_, kApps + "/deployments/" + name);
    EXPECT_TRUE(selects(Json{{"matchLabels", svc["spec"]["selector"]}},
                        d["spec"]["template"]["metadata"]["labels"]))
        << name;
  }
}

}  // namespace
}  // namespace keel::kube
