// The platform's rough edges a hostile probe of `keel cluster up` found, each shown through the
// binary. One 1P1D fleet (--jes 1) takes three faults during 32 seeded streams each — kill -9 of
// its only decode TE (the prefill TE runs the re-driven jobs whole until the replacement is up),
// SIGSTOP of the decode TE (logged te_hung, not te_dead) and kill -9 of its only JE (restarted at
// its address; the gateway submits the JE's jobs again, resumed) — and every stream must finish
// with the undisturbed run's text; its idle decode TE must not spin (CPU time over 2 s). A
// two-JE mixed fleet without a heatmap must route to its pair, count both JEs' decisions, list a
// dead JE as down and keep serving. A TE added by a scale-out under a shared-prefix load takes
// requests at once. A gateway port in use fails before any TE starts, and `keel cluster scale` at
// the HTTP port says so instead of reporting a 1.2 GB frame.
// Children are stopped by PID; each wait is bounded.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include <boost/asio/ip/tcp.hpp>

#include "cli_runner.h"
#include "cluster_observe.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// `keel cluster up` as a child, TEs of one thread, a 1.5 s stall timeout, an event log.
class Cluster {
 public:
  explicit Cluster(const std::vector<std::string>& flags) {
    log_ = make_temp_dir("cluster-failover") + "/events.jsonl";
    proc::ChildSpec spec;
    spec.name = "cluster";
    spec.argv = {KEEL_BINARY, "cluster",
                 "up",        "-m",
                 stories(),   "--served-model-name",
                 "stories",   "--port",
                 "0",         "--threads-per-te",
                 "1",         "--stall-timeout-ms",
                 "1500",      "--max-num-seqs",
                 "40",        "--event-log",
                 log_};
    spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
    spec.ready_timeout = 60s;
    Result<proc::Child> child = sup_.spawn(spec);
    if (!child.ok()) {
      error_ = child.status().message();
      return;
    }
    pid_ = child->pid;
    Result<int> port = proc::ready_port(child->ready);
    port_ = port.ok() ? *port : 0;
    control_port_ = child->ready.value("control_port", 0);
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int control_port() const { return control_port_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] std::vector<json> events(const std::string& kind) const {
    return read_event_log(log_, kind);
  }
  // The pid of the cluster's child whose command line has `id_arg` after "--id" (0 if none).
  [[nodiscard]] pid_t child_with_id(const std::string& id) const {
    for (const auto& dir : std::filesystem::directory_iterator("/proc")) {
      const std::string name = dir.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(dir.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      std::string state;
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (ppid != pid_) continue;
      std::ifstream cmd(dir.path() / "cmdline");
      std::string arg, prev;
      while (std::getline(cmd, arg, '\0')) {
        if (prev == "--id" && arg == id) return static_cast<pid_t>(std::stoi(name));
        prev = arg;
      }
    }
    return 0;
  }

 private:
  proc::ProcessSupervisor sup_;
  pid_t pid_ = 0;
  int port_ = 0;
  int control_port_ = 0;
  std::string log_;
  std::string error_;
};

// The fleet status; right after a JE restart it may be briefly unavailable: asked again for up to
// 5 s, then an empty object (printed with the last answer).
json status(int port) {
  HttpResponse r;
  const auto deadline = Clock::now() + 5s;
  do {
    r = http_request(port, "GET", "/v1/cluster/status");
    json j = r.status == 200 ? json::parse(r.body, nullptr, false) : json();
    if (j.is_object()) return j;
    std::printf("cluster status %d: %s\n", r.status, r.body.c_str());
    std::this_thread::sleep_for(50ms);
  } while (Clock::now() < deadline);
  return json::object();
}

template <typename Pred>
bool poll(Pred pred, std::chrono::milliseconds timeout, std::chrono::milliseconds every = 50ms) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

struct Outcome {
  int code = 0;
  std::string text;
  bool error = false;
};

// A sampled completion with seed `seed`, streamed.
Outcome stream(int port, const std::string& prompt, int max_tokens, int seed) {
  const json body = {{"model", "stories"}, {"prompt", prompt}, {"max_tokens", max_tokens},
                     {"temperature", 0.9}, {"seed", seed},     {"ignore_eos", true},
                     {"stream", true}};
  Outcome out;
  HttpConnection conn(port);
  conn.send_post("/v1/completions", body.dump());
  const std::string raw = conn.read_until(
      [](const std::string& s) { return s.find("[DONE]") != std::string::npos; }, 90000);
  out.code = raw.find("200 OK") != std::string::npos ? 200 : 0;
  out.text = completion_stream_text(raw, &out.error);
  return out;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog",
                                           "Lily went to the park", "One day, Tom"};
constexpr int kStreams = 32;
constexpr int kTokens = 96;

// 32 seeded streams; `fault` (when set) runs once `ready()` holds, while they stream.
std::vector<Outcome> run_streams(int port, const std::function<bool()>& ready = nullptr,
                                 const std::function<void()>& fault = nullptr) {
  std::vector<Outcome> got(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] { got[i] = stream(port, kPrompts[i % 4], kTokens, 1000 + i); });
  }
  if (fault) {
    EXPECT_TRUE(poll(ready, 30s, 2ms)) << "the fault's moment never came";
    fault();
  }
  for (auto& t : clients) t.join();
  return got;
}

// Every job the JEs held has ended (none leaks in a JE's table after a fault).
bool no_active_jobs(int port) {
  return poll([&] { return status(port)["jobs"].value("active", -1) == 0; }, 10s);
}

void expect_all_equal(const std::vector<Outcome>& got, const std::vector<Outcome>& want,
                      const std::string& what) {
  int failed = 0;
  for (int i = 0; i < kStreams; ++i) {
    const bool ok = got[i].code == 200 && !got[i].error && got[i].text == want[i].text;
    failed += ok ? 0 : 1;
    EXPECT_EQ(got[i].code, 200) << what << ": stream " << i;
    EXPECT_FALSE(got[i].error) << what << ": stream " << i;
    EXPECT_EQ(got[i].text, want[i].text) << what << ": stream " << i;
  }
  std::printf("%s: %d of %d streams failed or differed\n", what.c_str(), failed, kStreams);
}

// The decode TE listed now (id, pid), and whether it is running something.
struct TeSeen {
  std::string id;
  pid_t pid = 0;
  int running = 0;
};
TeSeen decode_te(int port) {
  for (const json& te : status(port).value("task_executors", json::array())) {
    if (te.value("role", "") != "decode" || te.value("state", "") == "dead") continue;
    return {te.value("id", ""), static_cast<pid_t>(te.value("pid", 0)), te.value("running", 0)};
  }
  return {};
}

// CPU seconds (user + system) a process has used.
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

class ClusterFailover : public ::testing::Test {
 protected:
  void SetUp() override { KEEL_REQUIRE_SHARED(); }
};

TEST_F(ClusterFailover, PdFleetLosesItsDecodeTeAndItsJeWithNoFailedStream) {
  Cluster c({"--colocated", "0", "--prefill", "1", "--decode", "1", "--jes", "1"});
  ASSERT_GT(c.port(), 0) << c.error();
  const std::vector<Outcome> want = run_streams(c.port());
  for (const Outcome& o : want) ASSERT_EQ(o.code, 200);

  // An idle decode TE (its KV receiver has had work) does not spin.
  const TeSeen idle = decode_te(c.port());
  ASSERT_GT(idle.pid, 0) << status(c.port()).dump();
  std::this_thread::sleep_for(300ms);
  const double cpu0 = cpu_seconds(idle.pid);
  std::this_thread::sleep_for(2s);
  const double idle_share = (cpu_seconds(idle.pid) - cpu0) / 2.0;
  std::printf("idle decode TE: %.1f %% of a core over 2 s\n", idle_share * 100);
  EXPECT_LT(idle_share, 0.06) << "an idle decode TE spins";

  // kill -9 of the only decode TE mid-stream: its jobs run whole on the prefill TE until the
  // replacement is up; no stream fails.
  TeSeen victim;
  const std::vector<Outcome> killed = run_streams(
      c.port(),
      [&] {
        victim = decode_te(c.port());
        return victim.running >= 4;
      },
      [&] { EXPECT_EQ(kill(victim.pid, SIGKILL), 0); });
  expect_all_equal(killed, want, "decode TE kill -9");
  EXPECT_TRUE(no_active_jobs(c.port())) << status(c.port()).dump();
  ASSERT_TRUE(poll([&] { return !c.events("te_replaced").empty(); }, 30s));
  EXPECT_EQ(c.events("te_dead").size(), 1u);
  json s = status(c.port());
  std::printf("after the decode kill: router %s, jobs %s\n", s["router"].dump().c_str(),
              s["jobs"].dump().c_str());
  EXPECT_GT(s["jobs"].value("redriven", 0), 0);
  EXPECT_EQ(s["jobs"].value("failed", -1), 0);

  // SIGSTOP of the (new) decode TE: found hung — logged te_hung, not te_dead — and replaced.
  ASSERT_TRUE(poll([&] { return decode_te(c.port()).pid > 0; }, 30s));
  const std::vector<Outcome> stopped = run_streams(
      c.port(),
      [&] {
        victim = decode_te(c.port());
        return victim.running >= 4 && victim.id != idle.id;
      },
      [&] { EXPECT_EQ(kill(victim.pid, SIGSTOP), 0); });
  expect_all_equal(stopped, want, "decode TE SIGSTOP");
  EXPECT_TRUE(no_active_jobs(c.port())) << status(c.port()).dump();
  ASSERT_TRUE(poll([&] { return c.events("te_replaced").size() >= 2; }, 30s));
  ASSERT_EQ(c.events("te_hung").size(), 1u) << "a stopped TE is hung, not dead";
  EXPECT_EQ(c.events("te_hung")[0].value("te", ""), victim.id);
  EXPECT_EQ(c.events("te_dead").size(), 1u);

  // kill -9 of the only JE mid-stream: restarted at its address; the gateway submits its jobs
  // again, resumed; no stream fails.
  ASSERT_TRUE(poll([&] { return decode_te(c.port()).pid > 0; }, 30s));
  const pid_t je = c.child_with_id("je-0");
  ASSERT_GT(je, 0);
  const std::vector<Outcome> je_killed = run_streams(
      c.port(), [&] { return decode_te(c.port()).running >= 4; },
      [&] { EXPECT_EQ(kill(je, SIGKILL), 0); });
  expect_all_equal(je_killed, want, "JE kill -9");
  EXPECT_TRUE(no_active_jobs(c.port())) << status(c.port()).dump();
  ASSERT_EQ(c.events("je_dead").size(), 1u);
  ASSERT_EQ(c.events("je_replaced").size(), 1u);
  std::printf("JE restarted %.3f s after its exit was seen\n",
              c.events("je_replaced")[0].value("detect_to_ready_s", -1.0));
  const std::string metrics = http_request(c.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "keel:cluster_je_replaced_total"), 1) << metrics;
  std::printf("jobs submitted again after the JE died: %g\n",
              metric_value(metrics, "keel:cluster_jobs_resubmitted_total"));
  EXPECT_EQ(http_request(c.port(), "GET", "/health").status, 200);
  // The restarted JE knows the decode TE replaced just before (not only the TEs of its last
  // snapshot): new requests go disaggregated again.
  EXPECT_GT(decode_te(c.port()).pid, 0) << status(c.port()).dump();
  const int64_t disaggregated = status(c.port())["router"].value("pd_disaggregated", 0);
  EXPECT_EQ(stream(c.port(), kPrompts[1], kTokens, 1001).text, want[1].text);
  EXPECT_GT(status(c.port())["router"].value("pd_disaggregated", 0), disaggregated);
}

TEST_F(ClusterFailover, TwoJesAreBothCountedAndAMixedFleetWithoutHeatmapUsesItsPair) {
  Cluster c({"--colocated", "1", "--prefill", "1", "--decode", "1", "--jes", "2", "--no-replace"});
  ASSERT_GT(c.port(), 0) << c.error();
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) {
    const json body = {{"model", "stories"}, {"prompt", kPrompts[i % 4]}, {"max_tokens", 8}};
    ASSERT_EQ(http_request(c.port(), "POST", "/v1/completions", body.dump()).status, 200);
  }
  json s = status(c.port());
  EXPECT_EQ(s["jobs"].value("total", 0), kRequests) << s.dump();  // both JEs' jobs
  ASSERT_EQ(s["job_executors"].size(), 2u) << s.dump();
  for (const json& je : s["job_executors"]) {
    EXPECT_EQ(je.value("state", ""), "up");
    EXPECT_GT(je["jobs"].value("total", 0), 0) << "round robin gives each JE some";
  }
  // No heatmap: the pair is a replica beside the colocated TE, so both arrangements are used.
  EXPECT_GT(s["router"].value("pd_disaggregated", 0), 0) << s["router"].dump();
  EXPECT_GT(s["router"].value("pd_colocated", 0), 0) << s["router"].dump();
  const std::string metrics = http_request(c.port(), "GET", "/metrics").body;
  double decisions = 0;
  for (const char* branch : {"locality", "least_load", "round_robin"}) {
    decisions += std::max(0.0, metric_value(metrics, "keel:cluster_router_decisions_total",
                                            std::string("branch=\"") + branch + "\""));
  }
  EXPECT_EQ(decisions, kRequests) << metrics;
  const CliResult table =
      run_keel({"cluster", "status", "--url", "http://127.0.0.1:" + std::to_string(c.port())});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("JE je-0"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("JE je-1"), std::string::npos) << table.out;

  // `keel cluster scale` pointed at the gateway's HTTP port: a clear error, at once.
  const CliResult scale =
      run_keel({"cluster", "scale", "--control", "127.0.0.1:" + std::to_string(c.port())});
  EXPECT_NE(scale.exit_code, 0);
  EXPECT_NE(scale.err.find("not a keel cluster endpoint"), std::string::npos) << scale.err;
  EXPECT_NE(scale.err.find("HTTP"), std::string::npos) << scale.err;
  EXPECT_EQ(scale.err.find("1213486160"), std::string::npos) << scale.err;

  // One JE dies (--no-replace): listed down with why; the other serves; /health stays up.
  const pid_t je1 = c.child_with_id("je-1");
  ASSERT_GT(je1, 0);
  ASSERT_EQ(kill(je1, SIGKILL), 0);
  ASSERT_TRUE(poll(
      [&] {
        for (const json& je : status(c.port()).value("job_executors", json::array())) {
          if (je.value("id", "") == "je-1") return je.value("state", "") == "down";
        }
        return false;
      },
      10s));
  for (int i = 0; i < 4; ++i) {
    const json body = {{"model", "stories"}, {"prompt", kPrompts[i]}, {"max_tokens", 8}};
    EXPECT_EQ(http_request(c.port(), "POST", "/v1/completions", body.dump()).status, 200);
  }
  const HttpResponse health = http_request(c.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_NE(health.body.find("\"job_executors_down\":\"je-1 (127.0.0.1:"), std::string::npos)
      << health.body;
  const std::string after = http_request(c.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(after, "keel:cluster_job_executors", "state=\"down\""), 1) << after;
  const CliResult down =
      run_keel({"cluster", "status", "--url", "http://127.0.0.1:" + std::to_string(c.port())});
  EXPECT_NE(down.out.find("JE je-1"), std::string::npos);
  EXPECT_NE(down.out.find("down"), std::string::npos) << down.out;
  // Both down: /health is 503 and names the JEs, not the TEs.
  const pid_t je0 = c.child_with_id("je-0");
  ASSERT_GT(je0, 0);
  ASSERT_EQ(kill(je0, SIGKILL), 0);
  HttpResponse none;
  EXPECT_TRUE(poll(
      [&] {
        none = http_request(c.port(), "GET", "/health");
        return none.status == 503;
      },
      10s));
  EXPECT_NE(none.body.find("No job executor of the cluster answers"), std::string::npos)
      << none.body;
  EXPECT_NE(none.body.find("je-0 (127.0.0.1:"), std::string::npos) << none.body;
  EXPECT_NE(none.body.find("je-1 (127.0.0.1:"), std::string::npos) << none.body;
  EXPECT_EQ(none.body.find("task executor"), std::string::npos) << none.body;
}

// A TE added by `keel cluster scale` under a shared-prefix load takes requests at once, though
// the first TE holds the prefix and its load stays within balance_abs_tokens (before, locality
// kept every request on it while the new TE sat idle).
TEST_F(ClusterFailover, AScaledOutTeTakesRequestsAtOnceUnderASharedPrefixLoad) {
  Cluster c({"--colocated", "1", "--warm-pool", "1"});
  ASSERT_GT(c.port(), 0) << c.error();
  ASSERT_GT(c.control_port(), 0);
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends. One day, she saw a big red ball under a tree and ran to get it.";
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      const json body = {{"model", "stories"},
                         {"prompt", prompt},
                         {"max_tokens", 24},
                         {"temperature", 0},
                         {"ignore_eos", true}};
      while (!stop.load()) {
        if (http_request(c.port(), "POST", "/v1/completions", body.dump()).status != 200) {
          failed.fetch_add(1);
        }
      }
    });
  }
  const auto generated_elsewhere = [&] {
    for (const json& te : status(c.port()).value("task_executors", json::array())) {
      if (te.value("id", "") != "te-0" && te.value("generation_tokens_total", 0) > 1) return true;
    }
    return false;
  };
  EXPECT_TRUE(poll([&] { return status(c.port())["jobs"].value("total", 0) >= 16; }, 10s));
  const CliResult scale =
      run_keel({"cluster", "scale", "--control", "127.0.0.1:" + std::to_string(c.control_port())});
  const auto added = Clock::now();
  EXPECT_EQ(scale.exit_code, 0) << scale.err;
  const bool served = poll(generated_elsewhere, 5s, 10ms);
  const double seconds = std::chrono::duration<double>(Clock::now() - added).count();
  stop.store(true);
  for (auto& t : clients) t.join();
  EXPECT_TRUE(served) << "the new TE got no request within 5 s: " << status(c.port()).dump();
  EXPECT_EQ(failed.load(), 0);
  std::printf("scale-out: the new TE generated within %.3f s of being added\n", seconds);
}

TEST_F(ClusterFailover, AGatewayPortInUseFailsBeforeAnyTeStarts) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const std::string port = std::to_string(taken.local_endpoint().port());
  const auto start = Clock::now();
  const CliResult r = run_keel({"cluster", "up", "-m", stories(), "--colocated", "2", "--port",
                                port, "--threads-per-te", "1"});
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + port), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[te-0]"), std::string::npos) << "a TE started: " << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  std::printf("port in use: refused in %.3f s\n", seconds);
}

}  // namespace
}  // namespace keel::testing
