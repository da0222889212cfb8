// The autoscaler under `--nodes auto`, through real processes on loopback: a private etcd, one
// node agent keeping 2 warm TEs (`keel node-agent --warm 2`), and `keel cluster up --nodes auto
// --min 0 --max 3`. The first request is held at the gateway while the autoscaler places a TE
// through the agent — which binds one of its warm TEs, passing cluster up's engine flags with the
// bind (the TE's KV cache shows it) — and is served; a `keel bench-serve` ramp
// drives it to >= 2 TEs and, once idle past the grace period, it drains back to 0, the TEs stopped
// through the agent — from its signals alone (nothing here asks for a scale-out). The event log
// shows the decisions, the gangs placed and the drains. With `--pp 2`, a scale-out places a
// pipelined TE and its stage 1 as one gang through the agent (a warm TE bound as stage 0), and the
// drain to zero takes the stage with it.
//
// Skipped with the reason printed without etcd (failed under CI=true). Every process is stopped
// by pid (the supervisor's destructor); files live in a per-test temporary directory.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "cluster_observe.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/etcd_server.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A private etcd, the test's directory and event log, and children spawned with the membership
// flags (stopped by pid when the supervisor goes).
class ClusterNodesAutoscaleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_ETCD();
    std::string error;
    etcd_ = EtcdServer::start(&error);
    ASSERT_NE(etcd_, nullptr) << error;
    dir_ = make_temp_dir("nodes-autoscale");
    log_ = dir_ + "/events.jsonl";
  }
  Result<proc::Child> spawn(const std::string& name, std::vector<std::string> argv) {
    argv.insert(argv.end(), {"--membership", "etcd", "--etcd-endpoints", etcd_->endpoint(),
                             "--membership-prefix", "/keel/autoscale", "--membership-ttl", "3"});
    proc::ChildSpec spec;
    spec.name = name;
    spec.argv = std::move(argv);
    spec.ready_timeout = 90s;
    return sup_.spawn(spec);
  }
  // `keel cluster up --nodes auto` on stories260K (1 thread and 100 MiB per TE), with `extra`.
  Result<proc::Child> cluster_up(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {KEEL_BINARY,
                                     "cluster",
                                     "up",
                                     "-m",
                                     KEEL_REPO_STORIES,
                                     "--nodes",
                                     "auto",
                                     "--port",
                                     "0",
                                     "--threads-per-te",
                                     "1",
                                     "--te-memory-bytes",
                                     "104857600"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return spawn("cluster", std::move(argv));
  }
  // One node agent, h1, with 4 cores and `warm` warm TEs of 1 thread.
  Result<proc::Child> agent(int warm) {
    return spawn("agent", {KEEL_BINARY, "node-agent", "--host-id", "h1", "--listen", "127.0.0.1:0",
                           "--cores", "4", "--max-tes", "4", "--warm", std::to_string(warm),
                           "--threads-per-te", "1"});
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::string dir_, log_;
  proc::ProcessSupervisor sup_{{.sink = [](std::string_view, std::string_view) {}}};
};

TEST_F(ClusterNodesAutoscaleTest, ScalesFromZeroThroughTheAgentsWarmPoolAndBackToZero) {
  const std::string& dir = dir_;
  const std::string& log = log_;
  Result<proc::Child> agent_h1 = agent(2);
  ASSERT_TRUE(agent_h1.ok()) << agent_h1.status().to_string();
  Result<proc::Child> up = cluster_up({"--min",
                                       "0",
                                       "--max",
                                       "3",
                                       "--target-concurrency",
                                       "2",
                                       "--stable-window",
                                       "3",
                                       "--panic-window",
                                       "0.6",
                                       "--scale-to-zero-grace",
                                       "3",
                                       "--activation-timeout",
                                       "30",
                                       "--drain-timeout",
                                       "5",
                                       "--kv-cache-bytes",
                                       "1048576",
                                       "--event-log",
                                       log});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  const int port = *proc::ready_port(up->ready);
  EXPECT_EQ(healthy_tes(port), 0) << "--min 0 starts with no TE";

  // Held while the autoscaler places one through the agent, then served.
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}};
  const auto t0 = std::chrono::steady_clock::now();
  const HttpResponse first = http_request(port, "POST", "/v1/completions", body.dump());
  ASSERT_EQ(first.status, 200) << first.body;
  std::printf("[ first request from zero TEs, through the agent's warm pool: %.3f s ]\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const std::vector<json> activations = read_event_log(log, "autoscale");
  ASSERT_FALSE(activations.empty());
  EXPECT_EQ(activations[0]["reason"], "activate") << activations[0].dump();
  const std::vector<json> placed = read_event_log(log, "gang_placed");
  ASSERT_FALSE(placed.empty());
  ASSERT_EQ(placed[0]["processes"].size(), 1u) << placed[0].dump();
  EXPECT_EQ(placed[0]["processes"][0].value("host", ""), "h1");
  EXPECT_EQ(placed[0]["processes"][0].value("id", "").rfind("h1-warm-te", 0), 0u)
      << "the agent bound a warm TE of its pool: " << placed[0].dump();
  // The warm TE applied cluster up's engine flags at the bind: a 1 MiB KV cache, not its default
  // (512 blocks for stories260K).
  const json st = json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
  ASSERT_EQ(st.value("task_executors", json::array()).size(), 1u) << st.dump();
  const int64_t blocks = st["task_executors"][0].value("kv_blocks_total", int64_t{0});
  EXPECT_GT(blocks, 0) << st.dump();
  EXPECT_LT(blocks, 512) << "--kv-cache-bytes did not reach the bound warm TE: " << st.dump();

  // A ramp: 2 requests in flight, then 8 (target 2 per TE), long enough (64 x 128 tokens) that
  // the panic window sees it before it ends.
  const std::string result = dir + "/bench.json";
  for (const auto& [prompts, concurrency] : {std::pair{"8", "2"}, std::pair{"64", "8"}}) {
    const CliResult bench =
        run_keel({"bench-serve", "--base-url", "http://127.0.0.1:" + std::to_string(port),
                  "--model", "stories260K", "--num-prompts", prompts, "--max-concurrency",
                  concurrency, "--input-len", "16", "--output-len", "128", "--vocab-size", "500",
                  "--skip-test-request", "--save-result", result});
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    const json j = json::parse(read_file(result), nullptr, false);
    EXPECT_EQ(j["failed"], 0) << "no request lost while TEs come and go";
  }
  int peak = 0;
  for (const json& e : read_event_log(log, "autoscale"))
    peak = std::max(peak, e["desired"].get<int>());
  EXPECT_GE(peak, 2) << "the ramp scaled out";
  // The second TE's gang_placed line is written once its start returns, which may be after a
  // fast ramp has already ended.
  EXPECT_TRUE(eventually([&] { return read_event_log(log, "gang_placed").size() >= 2; }, 10s))
      << read_event_log(log, "gang_placed").size() << " TEs placed";

  // Idle: back to zero, each TE drained and stopped through the agent.
  EXPECT_TRUE(eventually([&] { return healthy_tes(port) == 0; }, 30s)) << "back to zero TEs";
  const auto stopped = [&] {
    size_t n = 0;
    for (const json& e : read_event_log(log, "drain")) {
      n += e["phase"] == "stopped" && e.value("exit", "") == "stopped by its node agent";
    }
    return n;
  };
  EXPECT_TRUE(eventually([&] { return stopped() >= 2; }, 30s))
      << stopped() << " TEs drained, then stopped through the agent";
  bool zero = false;
  for (const json& e : read_event_log(log, "autoscale")) {
    zero = zero || (e["desired"] == 0 && e["reason"] == "scale_to_zero");
  }
  EXPECT_TRUE(zero) << "the event log shows the scale to zero";
  ASSERT_TRUE(sup_.stop(up->pid, 20s).ok());
}

// Whether something accepts TCP connections at "127.0.0.1:PORT".
bool listening(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

TEST_F(ClusterNodesAutoscaleTest, APipelinedTeScalesFromZeroAsOneGangWithItsStage) {
  const std::string& log = log_;
  Result<proc::Child> agent_h1 = agent(1);
  ASSERT_TRUE(agent_h1.ok()) << agent_h1.status().to_string();
  Result<proc::Child> up =
      cluster_up({"--pp", "2", "--min", "0", "--max", "1", "--stable-window", "2",
                  "--scale-to-zero-grace", "1", "--drain-timeout", "5", "--event-log", log});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  const int port = *proc::ready_port(up->ready);
  EXPECT_EQ(healthy_tes(port), 0);

  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
  const HttpResponse first = http_request(port, "POST", "/v1/completions", body.dump());
  ASSERT_EQ(first.status, 200) << first.body;
  const std::vector<json> placed = read_event_log(log, "gang_placed");
  ASSERT_EQ(placed.size(), 1u);
  const json& processes = placed[0]["processes"];
  ASSERT_EQ(processes.size(), 2u) << placed[0].dump();
  EXPECT_EQ(processes[0]["role"], "pp-stage") << "stage 1 first: " << placed[0].dump();
  EXPECT_EQ(processes[1]["role"], "colocated") << placed[0].dump();
  EXPECT_EQ(processes[1].value("id", "").rfind("h1-warm-te", 0), 0u)
      << "stage 0 is the agent's warm TE, bound with --pp-stage1: " << placed[0].dump();
  const json st = json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
  ASSERT_EQ(st.value("task_executors", json::array()).size(), 1u) << st.dump();
  EXPECT_EQ(st["task_executors"][0]["pipeline_stages"], 2) << st.dump();
  const std::string stage = processes[0].value("address", "");
  EXPECT_TRUE(listening(stage)) << stage;

  // Idle: the TE is drained and stopped through the agent, and its stage exits with it.
  EXPECT_TRUE(eventually([&] { return healthy_tes(port) == 0; }, 30s)) << "back to zero TEs";
  EXPECT_TRUE(eventually([&] { return !listening(stage); }, 20s))
      << "stage 1 at " << stage << " outlived its TE";
  ASSERT_TRUE(sup_.stop(up->pid, 20s).ok());
}

}  // namespace
}  // namespace keel::testing
