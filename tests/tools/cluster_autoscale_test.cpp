// The autoscaler through the keel binary, on loopback with bounded waits: `keel cluster up --min 0
// --max 3 --warm-pool 2` starts with no TE; the first request is held at the gateway while the
// autoscaler binds one (activation), and is served; a `keel bench-serve` ramp drives it to >= 2
// TEs and, once idle past the grace period, it drains back to 0 — from its signals alone (nothing
// here asks for a scale-out); the event log and /metrics show it. With nothing to bind, a request
// held past --activation-timeout gets a 503 with Retry-After and an OpenAI-style error object.
// A PD fleet (--prefill 1 --decode 1) scales its roles apart on their own signals: decode on its
// running requests, prefill on its TTFT objective, each back to its --min-* once idle.
// Pipelined TEs (--pp 2) scale from zero too: a warm TE's bind starts its stage 1, both stages
// map the store's sealed memfd, the greedy text equals keel serve's, and the drain to zero stops
// the stage with its TE.
// Children are stopped by PID.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "cluster_observe.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

std::vector<std::string> cluster_argv(const std::vector<std::string>& extra, bool pd = false) {
  std::vector<std::string> argv = {KEEL_BINARY, "cluster",
                                   "up",        "-m",
                                   stories(),   "--served-model-name",
                                   "stories",   "--port",
                                   "0",         "--threads-per-te",
                                   "1",         "-c",
                                   "256",       "--kv-cache-bytes",
                                   "8388608"};
  if (pd) {
    argv.insert(argv.end(), {"--prefill", "1", "--decode", "1"});
  } else {
    argv.insert(argv.end(), {"--min", "0"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Runs `keel bench-serve` against the gateway; its failed-request count.
int bench(int port, const std::string& result, const std::string& prompts,
          const std::string& concurrency, const std::string& output_len) {
  const CliResult r = run_keel({"bench-serve",
                                "--base-url",
                                "http://127.0.0.1:" + std::to_string(port),
                                "--model",
                                "stories",
                                "--num-prompts",
                                prompts,
                                "--max-concurrency",
                                concurrency,
                                "--input-len",
                                "16",
                                "--output-len",
                                output_len,
                                "--vocab-size",
                                "500",
                                "--min-token-id",
                                "3",
                                "--skip-test-request",
                                "--save-result",
                                result});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(read_file(result), nullptr, false);
  return j.is_object() ? j.value("failed", -1) : -1;
}

// The text of `pid`'s /proc file `name` ("" when it is gone).
std::string proc_file(int64_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pid of the `keel pp-stage` child of `parent` (0 when there is none).
int64_t stage_child(int64_t parent) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = proc_file(std::stoll(name), "stat");
    const size_t close = stat.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    int64_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent &&
        proc_file(std::stoll(name), "cmdline").find("pp-stage") != std::string::npos) {
      return std::stoll(name);
    }
  }
  return 0;
}

json completion(int max_tokens) {
  return json{{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens}};
}

class AutoscaleE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    dir_ = make_temp_dir("autoscale");
  }
  std::string dir_;
};

TEST_F(AutoscaleE2e, ScalesFromZeroUnderARampAndBackToZero) {
  const std::string log = dir_ + "/events.jsonl";
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv =
      cluster_argv({"--max", "3", "--warm-pool", "2", "--store-dir", dir_, "--event-log", log,
                    "--target-concurrency", "2", "--stable-window", "3", "--panic-window", "0.6",
                    "--scale-to-zero-grace", "3", "--activation-timeout", "30"});
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  EXPECT_EQ(healthy_tes(port), 0) << "--min 0 starts with no bound TE";

  // The first request after idle is held, not refused, while the autoscaler binds a TE.
  const Clock::time_point t0 = Clock::now();
  const HttpResponse first = http_request(port, "POST", "/v1/completions", completion(4).dump());
  const double first_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(first.status, 200) << first.body;
  std::printf("[ first request from zero TEs served in %.3f s ]\n", first_s);
  ASSERT_FALSE(read_event_log(log, "scale_out").empty());
  const std::vector<json> activations = read_event_log(log, "autoscale");
  ASSERT_FALSE(activations.empty());
  EXPECT_EQ(activations[0]["reason"], "activate") << activations[0].dump();
  EXPECT_EQ(activations[0]["current"], 0);
  EXPECT_GE(activations[0]["signals"]["held"].get<int>(), 1) << activations[0].dump();

  // A ramp: 2 requests in flight, then 8 (target 2 per TE).
  for (const auto& [prompts, concurrency] : {std::pair{"8", "2"}, std::pair{"48", "8"}}) {
    EXPECT_EQ(bench(port, dir_ + "/bench.json", prompts, concurrency, "48"), 0)
        << "no request lost while TEs come and go";
  }
  int peak = 0;
  for (const json& e : read_event_log(log, "autoscale"))
    peak = std::max(peak, e["desired"].get<int>());
  EXPECT_GE(peak, 2) << "the ramp scaled out";
  // The second TE's scale_out line is written once its bind completes, which may be after a
  // fast ramp has already ended.
  EXPECT_TRUE(eventually([&] { return read_event_log(log, "scale_out").size() >= 2; },
                         std::chrono::seconds(10)))
      << read_event_log(log, "scale_out").size() << " scale-outs";

  // Idle: drains back to zero after the stable window and the grace period.
  EXPECT_TRUE(eventually([&] { return healthy_tes(port) == 0; }, std::chrono::seconds(30)))
      << "back to zero TEs";
  bool zero = false;
  for (const json& e : read_event_log(log, "autoscale")) {
    zero = zero || (e["desired"] == 0 && e["reason"] == "scale_to_zero");
  }
  EXPECT_TRUE(zero) << "the event log shows the scale to zero";
  // A draining TE leaves the fleet before its process has exited and its "stopped" line is in.
  const auto stopped = [&] {
    size_t n = 0;
    for (const json& e : read_event_log(log, "drain")) n += e["phase"] == "stopped";
    return n;
  };
  EXPECT_TRUE(eventually([&] { return stopped() >= 2; }, std::chrono::seconds(30)))
      << stopped() << " TEs drained, then stopped";
  const std::string metrics = http_request(port, "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "keel:autoscaler_desired_replicas"), 0) << metrics.substr(0, 800);
  EXPECT_GE(metric_value(metrics, "keel:autoscaler_decisions_total", "reason=\"activate\""), 1);
  EXPECT_GE(metric_value(metrics, "keel:autoscaler_decisions_total", "reason=\"scale_to_zero\""),
            1);

  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
}

TEST_F(AutoscaleE2e, PrefillAndDecodeTesScaleApartOnTheirOwnSignals) {
  const std::string log = dir_ + "/events.jsonl";
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  // Decode: 2 running requests per TE. Prefill: a target no load here reaches (8 per TE with 8
  // in flight in all), and a TTFT objective no request meets; a TPOT objective every gap meets.
  spec.argv = cluster_argv({"--max-prefill",
                            "2",
                            "--max-decode",
                            "3",
                            "--target-concurrency",
                            "2",
                            "--prefill-target-concurrency",
                            "8",
                            "--ttft-slo-ms",
                            "0.001",
                            "--tpot-slo-ms",
                            "100000",
                            "--warm-pool",
                            "2",
                            "--event-log",
                            log,
                            "--stable-window",
                            "3",
                            "--panic-window",
                            "0.6"},
                           /*pd=*/true);
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  EXPECT_EQ(healthy_tes(port), 2);

  // 8 requests in flight, each decoding 96 tokens.
  EXPECT_EQ(bench(port, dir_ + "/bench.json", "200", "8", "96"), 0) << "no request lost";
  const auto events = [&](const std::string& role) {
    std::vector<json> out;
    for (const json& e : read_event_log(log, "autoscale")) {
      if (e["role"] == role) out.push_back(e);
    }
    return out;
  };
  int decode_peak = 0;
  for (const json& e : events("decode")) {
    decode_peak = std::max(decode_peak, e["desired"].get<int>());
    EXPECT_NE(e["reason"], "slo_miss") << "TTFT is not the decode TEs' signal: " << e.dump();
    EXPECT_EQ(e["signals"]["ttft_attainment"], -1.0) << e.dump();
  }
  EXPECT_GE(decode_peak, 2) << "decode scaled out on its running requests";
  bool prefill_slo = false;
  for (const json& e : events("prefill")) {
    prefill_slo = prefill_slo || (e["reason"] == "slo_miss" && e["desired"] == 2);
    if (e["desired"] > e["current"]) {
      EXPECT_EQ(e["reason"], "slo_miss") << "only the TTFT misses scale prefill out: " << e.dump();
    }
  }
  EXPECT_TRUE(prefill_slo) << "prefill scaled out on its TTFT misses";
  const auto scale_outs = [&](const std::string& role) {
    int n = 0;
    for (const json& e : read_event_log(log, "scale_out")) n += e["role"] == role;
    return n;
  };
  EXPECT_TRUE(eventually([&] { return scale_outs("decode") >= 1 && scale_outs("prefill") >= 1; },
                         std::chrono::seconds(10)))
      << scale_outs("decode") << " decode and " << scale_outs("prefill") << " prefill binds";

  // Idle: each role drains back to its minimum of 1, and the fleet still serves.
  const auto desired = [&](const std::string& role) {
    return metric_value(http_request(port, "GET", "/metrics").body,
                        "keel:autoscaler_desired_replicas", "role=\"" + role + "\"");
  };
  EXPECT_TRUE(eventually([&] { return desired("decode") == 1 && desired("prefill") == 1; },
                         std::chrono::seconds(30)))
      << desired("decode") << " decode, " << desired("prefill") << " prefill";
  // A drain counts once its TE has stopped.
  const auto drained = [&](const std::string& role) {
    return metric_value(http_request(port, "GET", "/metrics").body, "keel:autoscaler_drains_total",
                        "role=\"" + role + "\"");
  };
  EXPECT_TRUE(eventually([&] { return drained("decode") >= 1 && drained("prefill") >= 1; },
                         std::chrono::seconds(30)))
      << drained("decode") << " decode and " << drained("prefill") << " prefill TEs drained";
  EXPECT_EQ(healthy_tes(port), 2);
  const HttpResponse after = http_request(port, "POST", "/v1/completions", completion(8).dump());
  EXPECT_EQ(after.status, 200) << after.body;
  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
}

TEST_F(AutoscaleE2e, PipelinedTesScaleFromZeroWithBothStagesOnTheStoresEntry) {
  const json greedy = {{"model", "stories"},
                       {"prompt", "Lily went to the park"},
                       {"max_tokens", 32},
                       {"temperature", 0},
                       {"ignore_eos", true}};
  std::string want;
  {
    ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
    ASSERT_TRUE(serve.ok()) << serve.error();
    const HttpResponse r = http_request(serve.port(), "POST", "/v1/completions", greedy.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    want = json::parse(r.body)["choices"][0]["text"].get<std::string>();
  }
  const std::string log = dir_ + "/events.jsonl";
  const std::string store = dir_ + "/store";
  std::filesystem::create_directories(store);
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv =
      cluster_argv({"--pp", "2", "--max", "2", "--warm-pool", "1", "--store-dir", store,
                    "--event-log", log, "--stable-window", "2", "--scale-to-zero-grace", "1"});
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  EXPECT_EQ(healthy_tes(port), 0);

  // Held while the autoscaler binds the warm TE, which then starts its stage 1.
  const HttpResponse r = http_request(port, "POST", "/v1/completions", greedy.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], want) << "greedy text as keel serve's";
  const HttpResponse st = http_request(port, "GET", "/v1/cluster/status");
  const json s = json::parse(st.body, nullptr, false);
  ASSERT_EQ(s["task_executors"].size(), 1u) << st.body;
  const json& te = s["task_executors"][0];
  EXPECT_EQ(te["pipeline_stages"], 2) << te.dump();
  const int64_t te_pid = te["pid"].get<int64_t>();
  const int64_t stage_pid = stage_child(te_pid);
  ASSERT_GT(stage_pid, 0) << "the bound TE started its stage 1";
  // Both stages run from the store's sealed memfd entry (one copy of the weights on the host).
  EXPECT_NE(proc_file(te_pid, "maps").find("/memfd:keel-store-"), std::string::npos);
  EXPECT_NE(proc_file(stage_pid, "maps").find("/memfd:keel-store-"), std::string::npos)
      << proc_file(stage_pid, "cmdline");

  // Idle: drained to zero, and the stage goes with its TE.
  EXPECT_TRUE(eventually([&] { return healthy_tes(port) == 0; }, std::chrono::seconds(30)));
  EXPECT_TRUE(eventually([&] { return ::kill(static_cast<pid_t>(stage_pid), 0) != 0; },
                         std::chrono::seconds(15)))
      << "stage 1 (pid " << stage_pid << ") outlived its TE";
  bool zero = false;
  for (const json& e : read_event_log(log, "autoscale")) zero = zero || e["desired"] == 0;
  EXPECT_TRUE(zero);
  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
}

TEST_F(AutoscaleE2e, RoleFlagsOutsideAPdFleetAreRefusedWithAOneLineError) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-decode", "2"}, "give --prefill and --decode"},
      {{"--prefill", "1", "--decode", "3", "--max-decode", "2"},
       "--min-decode 1 and --decode 3 must not exceed --max-decode 2"},
      {{"--prefill", "1", "--decode", "1", "--min-prefill", "3", "--max-prefill", "2"},
       "--min-prefill 3 and --prefill 1 must not exceed --max-prefill 2"},
      {{"--prefill", "1", "--decode", "1", "--max-prefill", "2", "--scaler", "k8s"},
       "--scaler k8s scales one Deployment"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {"cluster", "up", "-m", stories(), "--port", "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const CliResult r = run_keel(argv);
    EXPECT_NE(r.exit_code, 0) << flags[0];
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

TEST_F(AutoscaleE2e, AHeldRequestPastTheActivationTimeoutGets503WithRetryAfter) {
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  proc::ChildSpec spec;
  spec.name = "cluster";
  // No warm pool: the autoscaler cold-starts a TE (a new process that loads the model), which
  // takes far longer than this activation timeout.
  spec.argv = cluster_argv({"--max", "1", "--activation-timeout", "0.05"});
  spec.ready_timeout = std::chrono::seconds(60);
  auto child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const int port = *proc::ready_port(child->ready);
  const Clock::time_point t0 = Clock::now();
  const HttpResponse r = http_request(port, "POST", "/v1/completions", completion(4).dump());
  const double held_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_GE(held_s, 0.05) << "held for the activation timeout first";
  EXPECT_EQ(r.headers.count("retry-after"), 1u);
  const json body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.contains("error")) << r.body;
  EXPECT_EQ(body["error"]["type"], "service_unavailable_error") << r.body;
  EXPECT_NE(body["error"]["message"].get<std::string>().find("activation timeout"),
            std::string::npos)
      << r.body;
  ASSERT_TRUE(sup.stop(child->pid, std::chrono::seconds(20)).ok());
}

}  // namespace
}  // namespace keel::testing
