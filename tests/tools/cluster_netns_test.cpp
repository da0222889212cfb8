// Many hosts on one machine (netns_hosts.h: three network namespaces on a bridge the fixture
// makes). CrossHostRequestAndHostCutOff: etcd in host 1, a node agent per host (host 1's reports
// one core: no room for a two-thread TE), and `keel cluster up --nodes auto` in host 1 — its
// gateway and JE there, its two TEs placed by the agents on hosts 2 and 3. A request is served
// across hosts; then, under non-streamed load, host 3 is cut off (its veth down): its TE's and
// agent's leases expire within the TTL (3 s), the JE drops the TE from its fleet and re-drives its
// jobs (the JE's stall timeout is set far above the TTL, so the membership is what moves them),
// and no client sees an error; when host 3 comes back its TE registers again (a new lease).
// OpenAiSdkThroughTheGateway: the same three-host cluster passes the
// project's OpenAI SDK end-to-end suite (tests/sdk/openai_sdk_test.cjs, run with node inside
// host 1 against the gateway's address); without node or the openai package it is skipped,
// saying why (failed under CI=true).
//
// Skipped (failed under CI=true) without root, `ip` or etcd; everything made is removed on every
// path (the fixture's TearDown).
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "netns_hosts.h"

namespace keel::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ClusterNetnsTest : public NetnsHostsTest {
 protected:
  // etcd in host 1, an agent per host (host 1: one core), the cluster in host 1: its port.
  int start_three_hosts() {
    start_etcd(0);
    if (HasFatalFailure()) return 0;
    for (size_t h = 0; h < 3; ++h) {
      start_agent(h, h == 0 ? 1 : 2);
      if (HasFatalFailure()) return 0;
    }
    Result<int> port =
        start_cluster("cluster", 0, {"--colocated", "2", "--stall-timeout-ms", "30000"});
    EXPECT_TRUE(port.ok()) << port.status().to_string();
    return port.ok() ? *port : 0;
  }
};

TEST_F(ClusterNetnsTest, CrossHostRequestAndHostCutOff) {
  const auto t0 = Clock::now();
  const int port = start_three_hosts();
  ASSERT_GT(port, 0);
  const double start_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // Both TEs run on the other hosts, and a request is served across them.
  const std::string tes = te_members();
  EXPECT_NE(tes.find(addr(1) + ":"), std::string::npos) << tes;
  EXPECT_NE(tes.find(addr(2) + ":"), std::string::npos) << tes;
  EXPECT_EQ(tes.find(addr(0) + ":"), std::string::npos) << tes;
  const nlohmann::json req = {{"prompt", "Once upon a time"},
                              {"max_tokens", 200},
                              {"ignore_eos", true},
                              {"temperature", 0}};
  auto r = netns_http(ns(0), addr(0), port, "POST", "/v1/completions", req.dump());
  ASSERT_EQ(r.first, 200) << r.second;

  // Non-streamed load from 4 clients; host 3 is cut off while it runs.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, errors{0};
  std::string first_error;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        auto res = netns_http(ns(0), addr(0), port, "POST", "/v1/completions", req.dump());
        if (res.first == 200) {
          ++ok;
        } else {
          ++errors;
          std::lock_guard lock(mu);
          if (first_error.empty()) first_error = std::to_string(res.first) + " " + res.second;
        }
      }
    });
  }
  std::this_thread::sleep_for(1500ms);
  const int ok_before_cut = ok.load();
  const auto cut = Clock::now();
  set_link(2, false);
  double gone_s = -1;
  while (Clock::now() - cut < std::chrono::seconds(kNetnsTtlS + 5)) {
    if (te_members().find(addr(2) + ":") == std::string::npos) {
      gone_s = std::chrono::duration<double>(Clock::now() - cut).count();
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);  // the load goes on on host 2 alone
  stop = true;
  for (std::thread& t : clients) t.join();

  // Host 3 comes back: its TE, alive all along, registers again under a new lease.
  set_link(2, true);
  const auto back = Clock::now();
  double again_s = -1;
  while (Clock::now() - back < 15s) {
    if (te_members().find(addr(2) + ":") != std::string::npos) {
      again_s = std::chrono::duration<double>(Clock::now() - back).count();
      break;
    }
    std::this_thread::sleep_for(100ms);
  }

  const auto metrics = netns_http(ns(0), addr(0), port, "GET", "/metrics");
  const double redriven = metric_value(metrics.second, "keel:cluster_jobs_redriven_total");
  std::printf(
      "netns: cluster up in %.1f s; host 3's TE left etcd %.2f s after its veth went down "
      "(TTL %d s); %d requests ok (%d before the cut), %d errors; %.0f jobs re-driven; "
      "registered again %.2f s after its veth came back\n",
      start_s, gone_s, kNetnsTtlS, ok.load(), ok_before_cut, errors.load(), redriven, again_s);
  EXPECT_GE(gone_s, 0) << "host 3's TE still registered " << kNetnsTtlS + 5 << " s after the cut";
  EXPECT_LE(gone_s, kNetnsTtlS + 1.0);
  EXPECT_EQ(errors.load(), 0) << first_error;
  EXPECT_GT(ok.load(), ok_before_cut);  // served after the cut, by host 2
  EXPECT_GE(redriven, 1) << "no job was re-driven off host 3";
  EXPECT_GE(again_s, 0) << "host 3's TE not registered again 15 s after its veth came back";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60.0);
}

// The npm package's directory as tests/sdk/run_openai_sdk_test.sh finds it ("" when absent).
std::string openai_module() {
  const char* dir = std::getenv("KEEL_NPM_DIR");
  const char* home = std::getenv("HOME");
  const std::string npm =
      dir != nullptr ? dir : std::string(home != nullptr ? home : "/tmp") + "/.cache/keel/npm";
  struct stat st {};
  const std::string module = npm + "/node_modules/openai";
  return ::stat(module.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? module : "";
}

// The OpenAI SDK suite through the gateway of the three-host setup (its prefix-cache check needs
// the TEs' cache events to reach JEs on other hosts: the publisher binds the TE's --host).
TEST_F(ClusterNetnsTest, OpenAiSdkThroughTheGateway) {
  std::string why;
  if (shell_failed(run_shell("command -v node"))) why = "node not found";
  const std::string module = openai_module();
  if (why.empty() && module.empty()) why = "the openai npm package is not installed";
  if (!why.empty()) {
    why += " (scripts/install-deps.sh installs Node.js and the openai package)";
    if (under_ci()) GTEST_FAIL() << why << "; required under CI=true";
    GTEST_SKIP() << why;
  }
  const auto t0 = Clock::now();
  const int port = start_three_hosts();
  ASSERT_GT(port, 0);
  const std::string url = "http://" + addr(0) + ":" + std::to_string(port) + "/v1";
  const std::string out = run_shell("ip netns exec " + ns(0) + " env KEEL_BASE_URL=" + url +
                                    " OPENAI_MODULE=" + module + " node " + KEEL_SDK_SCRIPT);
  std::printf("netns: the OpenAI SDK suite through the gateway at %s: %s (%.1f s in all)\n%s",
              url.c_str(), shell_failed(out) ? "failed" : "passed",
              std::chrono::duration<double>(Clock::now() - t0).count(), out.c_str());
  EXPECT_FALSE(shell_failed(out)) << out;
}

}  // namespace
}  // namespace keel::testing
