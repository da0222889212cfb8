// Tier T3 end to end through `keel cluster up` (one JE, two colocated TEs, round-robin routing so
// that a repeated prompt lands on the TE that does not hold it): the JE hints the peer holding
// the prefix, the TE fetches its blocks over the KV transfer service into its host tier, the
// engine serves them as cached tokens, and the greedy text equals the run that computed them.
// With the link throttled (the fetch service's fault hook), the measured link cost makes the
// cost model choose recompute — same text, no peer blocks. Each cluster is stopped by PID.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

// `keel cluster up`: 1 JE, 2 colocated TEs (1 thread each), round-robin, peer tier on.
class PeerCluster {
 public:
  explicit PeerCluster(const std::vector<std::string>& extra) {
    proc::ChildSpec spec;
    spec.name = "cluster";
    spec.argv = {KEEL_BINARY,
                 "cluster",
                 "up",
                 "-m",
                 shared_path("models/stories260K/stories260K.gguf"),
                 "--served-model-name",
                 "stories",
                 "--jes",
                 "1",
                 "--colocated",
                 "2",
                 "--router",
                 "round_robin",
                 "--port",
                 "0",
                 "--threads-per-te",
                 "1",
                 "--kv-peer-tier"};
    spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
    spec.ready_timeout = std::chrono::milliseconds(60000);
    Result<proc::Child> child = sup_.spawn(spec);
    if (!child.ok()) {
      error_ = child.status().message();
      return;
    }
    Result<int> port = proc::ready_port(child->ready);
    port_ = port.ok() ? *port : 0;
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  proc::ProcessSupervisor sup_;  // stops the tree by PID when the fixture ends
  int port_ = 0;
  std::string error_;
};

struct Completion {
  std::string text;
  int64_t cached_tokens = -1;
};

Completion complete(int port, const std::string& prompt) {
  const json body = {{"model", "stories"},
                     {"prompt", prompt},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices")) return {};
  return {j["choices"][0].value("text", ""),
          j["usage"].value("prompt_tokens_details", json::object()).value("cached_tokens", -1)};
}

// A prompt of several 16-token blocks.
std::string long_prompt(const std::string& opening) {
  std::string p = opening;
  for (int i = 0; i < 4; ++i) p += " and they played with the ball in the big green park all day";
  return p;
}

double fleet_metric(int port, const std::string& name, const std::string& label = "") {
  return metric_value(http_request(port, "GET", "/metrics").body, name, label);
}

class ClusterPeerTier : public ::testing::Test {
 protected:
  void SetUp() override { KEEL_REQUIRE_SHARED(); }
};

TEST_F(ClusterPeerTier, RepeatedPrefixOnTheOtherTeIsFetchedFromItsPeer) {
  PeerCluster c({});
  ASSERT_GT(c.port(), 0) << c.error();
  const std::string prompt = long_prompt("Once upon a time, Lily and Tom went out");
  const Completion first = complete(c.port(), prompt);  // computed on one TE
  ASSERT_FALSE(first.text.empty());
  EXPECT_EQ(first.cached_tokens, 0);
  // Let the first TE's cache events reach the JE's prefix index (ZeroMQ, asynchronous).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Completion second = complete(c.port(), prompt);  // round robin: the other TE
  EXPECT_EQ(second.text, first.text);
  EXPECT_GE(second.cached_tokens, 16) << "the peer's blocks served as cached tokens";
  // The fleet's /metrics sums the TEs' peer-tier counters (reported every 50 ms; a report may
  // carry the fetch decision before the fetched blocks): wait for both.
  EXPECT_TRUE(eventually([&] {
    return fleet_metric(c.port(), "keel:kv_peer_decisions_total", "decision=\"fetch\"") >= 1 &&
           fleet_metric(c.port(), "keel:kv_peer_blocks_fetched_total") >= 1;
  }));
  EXPECT_EQ(fleet_metric(c.port(), "keel:kv_peer_decisions_total", "decision=\"recompute\""), 0);
  const double blocks = fleet_metric(c.port(), "keel:kv_peer_blocks_fetched_total");
  EXPECT_GE(blocks, 1);
  EXPECT_EQ(fleet_metric(c.port(), "keel:kv_peer_hit_tokens_total"), blocks * 16);
  const CliResult cli =
      run_keel({"cluster", "status", "--url", "http://127.0.0.1:" + std::to_string(c.port())});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("peer tier (T3)"), std::string::npos) << cli.out;
}

TEST_F(ClusterPeerTier, ThrottledLinkMakesTheCostModelRecompute) {
  // 50 kB/s: a block of this model's KV (10-20 kB) takes 0.2-0.4 s to
  // fetch; recomputing its 16 tokens takes about a millisecond.
  PeerCluster c({"--kv-transfer-throttle", "50000"});
  ASSERT_GT(c.port(), 0) << c.error();
  // One unrelated prompt per TE first, so both have measured their prefill speed (until then
  // the cost model fetches whatever a peer has).
  ASSERT_FALSE(complete(c.port(), long_prompt("The little dog ran to the red barn")).text.empty());
  ASSERT_FALSE(complete(c.port(), long_prompt("A big fish swam in the blue sea")).text.empty());
  const std::string prompt = long_prompt("Once upon a time, Lily and Tom went out");
  const Completion first = complete(c.port(), prompt);
  ASSERT_FALSE(first.text.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Completion second = complete(c.port(), prompt);  // the other TE: hinted, recomputes
  EXPECT_EQ(second.text, first.text);
  EXPECT_EQ(second.cached_tokens, 0);
  EXPECT_TRUE(eventually([&] {
    return fleet_metric(c.port(), "keel:kv_peer_decisions_total", "decision=\"recompute\"") >= 1;
  }));
  EXPECT_EQ(fleet_metric(c.port(), "keel:kv_peer_decisions_total", "decision=\"fetch\""), 0);
  EXPECT_EQ(fleet_metric(c.port(), "keel:kv_peer_blocks_fetched_total"), 0);
}

}  // namespace
}  // namespace keel::testing
