// Health from progress through `keel cluster up` (fault tests): a task executor (TE) SIGSTOPped
// mid-stream is found hung, killed and replaced, and a TE killed with SIGKILL is replaced, while
// streamed and non-streamed clients see no error and the greedy text of an undisturbed run; a KV
// link stalled by the transfer fault hook on a 1P1D pair is found blocked and the request
// completes on the prefill TE with keel serve's text; a TE running 2K-token chunked prefills under
// a CPU hog (a busy-loop child started and stopped here by PID) is never declared hung.
// Detection and replacement times are printed (not asserted: timing stays out of tests).
// Children are stopped by PID; each wait is bounded.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

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

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// `keel cluster up` as a child: one JE, TEs of one thread, a 1.5 s hang timeout, a 200 ms kill
// grace, an event log.
class Cluster {
 public:
  Cluster(const std::string& model, const std::vector<std::string>& flags) {
    log_ = make_temp_dir("cluster-health") + "/events.jsonl";
    proc::ChildSpec spec;
    spec.name = "cluster";
    spec.argv = {KEEL_BINARY, "cluster", "up", "-m", model, "--served-model-name", "stories"};
    for (const char* flag :
         {"--jes", "1", "--port", "0", "--threads-per-te", "1", "--stall-timeout-ms", "1500",
          "--max-num-seqs", "16", "--drain-timeout", "20"}) {
      spec.argv.push_back(flag);
    }
    spec.argv.insert(spec.argv.end(), {"--event-log", log_});
    spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
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
  // The event log's lines of kind `event`.
  [[nodiscard]] std::vector<json> events(const std::string& event) const {
    return read_event_log(log_, event);
  }

 private:
  proc::ProcessSupervisor sup_;
  int port_ = 0;
  std::string log_;
  std::string error_;
};

json status(int port) {
  const HttpResponse r = http_request(port, "GET", "/v1/cluster/status");
  return r.status == 200 ? json::parse(r.body, nullptr, false) : json::object();
}

// Polls `pred` every `every` (a status call each) for up to `timeout`.
template <typename Pred>
bool poll(Pred pred, std::chrono::milliseconds timeout,
          std::chrono::milliseconds every = std::chrono::milliseconds(100)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

json greedy_body(const json& prompt, int max_tokens) {
  return {{"model", "stories"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

// One request's outcome: HTTP status (200 from the stream's status line), text, error events.
struct Outcome {
  int code = 0;
  std::string text;
  bool error = false;
};

Outcome complete(int port, const json& prompt, int max_tokens, bool stream) {
  json body = greedy_body(prompt, max_tokens);
  Outcome out;
  if (stream) {
    body["stream"] = true;
    HttpConnection conn(port);
    conn.send_post("/v1/completions", body.dump());
    const std::string raw = conn.read_until(
        [](const std::string& s) { return s.find("[DONE]") != std::string::npos; }, 90000);
    out.code = raw.find("200 OK") != std::string::npos ? 200 : 0;
    out.text = completion_stream_text(raw, &out.error);
    return out;
  }
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  out.code = r.status;
  const json j = json::parse(r.body, nullptr, false);
  // An error body (no choices) leaves the text empty: the caller's checks fail, not a throw.
  const json choices = j.is_object() ? j.value("choices", json::array()) : json::array();
  out.text = !choices.empty() && choices[0].is_object() ? choices[0].value("text", "") : "";
  return out;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog",
                                           "Lily went to the park", "One day, Tom"};
constexpr int kTokens = 160;

// Runs 8 requests (half streamed) while `fault` hits the busiest original TE once some run; checks
// every one against `want`. Returns the victim's id and the fault's time (steady ns).
std::pair<std::string, int64_t> run_with_fault(int port, int fault,
                                               const std::vector<std::string>& want,
                                               const std::set<std::string>& candidates) {
  std::vector<Outcome> got(8);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] { got[i] = complete(port, kPrompts[i % 4], kTokens, i % 2 == 1); });
  }
  std::string victim;
  pid_t pid = 0;
  const bool busy = poll(
      [&] {
        int64_t most = 0;
        for (const json& te : status(port).value("task_executors", json::array())) {
          if (candidates.count(te.value("id", "")) == 0 || te.value("running", 0) <= most) continue;
          most = te.value("running", 0);
          victim = te.value("id", "");
          pid = static_cast<pid_t>(te.value("pid", 0));
        }
        return most >= 1;
      },
      // Every 5 ms: in a release build the 8 requests may all finish within ~100 ms.
      std::chrono::milliseconds(30000), std::chrono::milliseconds(5));
  int64_t fault_ns = 0;
  if (busy && pid > 0) {
    fault_ns = now_ns();
    EXPECT_EQ(kill(pid, fault), 0);
  }
  for (auto& t : clients) t.join();
  EXPECT_TRUE(busy && pid > 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i].code, 200) << "request " << i;
    EXPECT_FALSE(got[i].error) << "request " << i;
    EXPECT_EQ(got[i].text, want[i % 4]) << "request " << i;
  }
  return {victim, fault_ns};
}

// Waits until `victim` has left the fleet list (replaced: the JEs forget it) and a TE outside
// `known` is healthy or busy; returns that TE's id ("" on timeout).
std::string await_replacement(int port, const std::string& victim,
                              const std::set<std::string>& known) {
  std::string fresh;
  poll(
      [&] {
        bool victim_listed = false;
        fresh.clear();
        for (const json& te : status(port).value("task_executors", json::array())) {
          const std::string id = te.value("id", "");
          if (id == victim) victim_listed = true;
          const std::string s = te.value("state", "");
          if (known.count(id) == 0 && (s == "healthy" || s == "busy")) fresh = id;
        }
        return !victim_listed && !fresh.empty();
      },
      std::chrono::milliseconds(30000));
  return fresh;
}

class ClusterHealth : public ::testing::Test {
 protected:
  void SetUp() override { KEEL_REQUIRE_SHARED(); }
};

TEST_F(ClusterHealth, HungAndKilledTesAreReplacedWithNoClientError) {
  Cluster c(stories(), {"--colocated", "2"});
  ASSERT_GT(c.port(), 0) << c.error();
  std::vector<std::string> want;
  for (const std::string& p : kPrompts) want.push_back(complete(c.port(), p, kTokens, false).text);
  EXPECT_EQ(http_request(c.port(), "GET", "/health").status, 200);

  // SIGSTOP: silent with work → hung → killed, replaced; its jobs re-driven.
  std::set<std::string> known = {"te-0", "te-1"};
  const auto [hung, stop_ns] = run_with_fault(c.port(), SIGSTOP, want, known);
  const std::string first = await_replacement(c.port(), hung, known);
  ASSERT_FALSE(first.empty()) << status(c.port()).dump();
  known.insert(first);
  poll([&] { return !c.events("te_replaced").empty(); }, std::chrono::milliseconds(10000));
  const std::vector<json> hung_events = c.events("te_hung");
  const std::vector<json> replaced = c.events("te_replaced");
  ASSERT_EQ(hung_events.size(), 1u);
  ASSERT_GE(replaced.size(), 1u);
  const double detect_s =
      static_cast<double>(hung_events[0]["t_ns"].get<int64_t>() - stop_ns) * 1e-9;
  const double replace_s = replaced[0]["detect_to_ready_s"].get<double>();
  std::printf("SIGSTOP: detected hung after %.3f s, replaced %.3f s later (total %.3f s)\n",
              detect_s, replace_s, detect_s + replace_s);
  RecordProperty("sigstop_detect_ms", static_cast<int>(detect_s * 1e3));
  RecordProperty("sigstop_replace_ms", static_cast<int>(replace_s * 1e3));

  // SIGKILL on the other original TE: dead → replaced (the new TE takes work meanwhile).
  const std::set<std::string> originals = {hung == "te-0" ? "te-1" : "te-0"};
  const auto [dead, kill_ns] = run_with_fault(c.port(), SIGKILL, want, originals);
  const std::string second = await_replacement(c.port(), dead, known);
  ASSERT_FALSE(second.empty()) << status(c.port()).dump();
  const std::vector<json> dead_events = c.events("te_dead");
  ASSERT_EQ(dead_events.size(), 1u);
  // The JEs may list the new TE a few ms before the manager logs te_replaced.
  poll([&] { return c.events("te_replaced").size() >= 2; }, std::chrono::milliseconds(10000));
  ASSERT_EQ(c.events("te_replaced").size(), 2u);
  const double kill_detect_s =
      static_cast<double>(dead_events[0]["t_ns"].get<int64_t>() - kill_ns) * 1e-9;
  std::printf("SIGKILL: detected dead after %.3f s, replaced %.3f s later\n", kill_detect_s,
              c.events("te_replaced")[1]["detect_to_ready_s"].get<double>());

  const std::string metrics = http_request(c.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_hung_total"), 1) << metrics;
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_dead_total"), 1);
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_replaced_total"), 2);
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_replacement_seconds_count"), 2);
  // The replaced TEs left the JEs' fleet lists: only the two replacements are listed (a new TE's
  // id is its address until its first report, so the originals' ids are what is checked).
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_state", "state=\"hung\""), 0);
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_state", "state=\"dead\""), 0);
  std::set<std::string> listed;
  for (const json& te : status(c.port()).value("task_executors", json::array())) {
    listed.insert(te.value("id", ""));
  }
  EXPECT_EQ(listed.size(), 2u) << status(c.port()).dump();
  EXPECT_EQ(listed.count(hung), 0u) << "the hung TE was replaced: " << status(c.port()).dump();
  EXPECT_EQ(listed.count(dead), 0u) << "the killed TE was replaced: " << status(c.port()).dump();
  // The replacements serve: the undisturbed text again, and /health is up.
  EXPECT_EQ(complete(c.port(), kPrompts[0], kTokens, true).text, want[0]);
  EXPECT_EQ(http_request(c.port(), "GET", "/health").status, 200);
}

// The transfer fault hook stalls the link after its first frame: the prefill side's probe finds
// it blocked (no block moves) well before the handoff deadline, and the JE runs the rest of the
// job on the prefill TE, which holds the prompt's KV — the text equals keel serve's.
TEST_F(ClusterHealth, BlockedKvLinkRunsTheDecodeOnThePrefillTe) {
  ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  Cluster c(stories(), {"--prefill", "1", "--decode", "1", "--prefill-chunk", "16",
                        "--kv-transfer-fault", "stall:1"});
  ASSERT_GT(c.port(), 0) << c.error();
  const std::string prompt =
      "Once upon a time, there was a big brown bear who lived in the woods. He liked to eat honey "
      "and play with his friends the birds and the rabbits every day.";
  const Outcome want = complete(serve.port(), prompt, 24, false);
  const auto start = Clock::now();
  const Outcome got = complete(c.port(), prompt, 24, true);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(got.code, 200);
  EXPECT_FALSE(got.error);
  EXPECT_EQ(got.text, want.text);
  const json s = status(c.port());
  EXPECT_EQ(s["router"]["kv_link_blocked"].get<int>(), 1) << s.dump();
  std::printf("blocked KV link: request done in %.3f s (handoff deadline 5 s)\n", seconds);
}

// A busy-loop child, started and stopped by PID.
class CpuHog {
 public:
  CpuHog() {
    pid_ = fork();
    if (pid_ == 0) {
      volatile uint64_t n = 0;
      while (true) n = n + 1;
    }
  }
  ~CpuHog() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;

 private:
  pid_t pid_ = -1;
};

// Two 2K-token prompts in 128-token chunks on one TE while a busy loop takes a core: each chunk
// moves the step counter, so the TE is busy throughout and never hung.
TEST_F(ClusterHealth, LongChunkedPrefillsUnderACpuHogAreNotHung) {
  const std::string model = make_temp_dir("cluster-health-model") + "/tiny.gguf";
  const CliResult mk =
      run_keel({"make-model", "--shape", "tiny", "--type", "f32", "--seed", "5", "-o", model});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  Cluster c(model, {"--colocated", "1", "-c", "2048", "--max-batched-tokens", "128"});
  ASSERT_GT(c.port(), 0) << c.error();
  CpuHog hog;
  std::vector<Outcome> got(2);
  std::vector<std::thread> clients;
  std::atomic<int> done{0};
  for (int i = 0; i < 2; ++i) {
    clients.emplace_back([&, i] {
      json ids = json::array();
      for (int t = 0; t < 2000; ++t) ids.push_back(3 + (t * 7 + i) % 200);
      got[i] = complete(c.port(), ids, 4, i == 0);
      done.fetch_add(1);
    });
  }
  int busy_seen = 0;
  std::set<std::string> states;
  while (done.load() < 2) {
    for (const json& te : status(c.port()).value("task_executors", json::array())) {
      states.insert(te.value("state", ""));
      busy_seen += te.value("state", "") == "busy" ? 1 : 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 2; ++i) EXPECT_EQ(got[i].code, 200) << "request " << i;
  EXPECT_EQ(states.count("hung"), 0u);
  EXPECT_EQ(states.count("dead"), 0u);
  EXPECT_GT(busy_seen, 0);  // the TE was observed with work
  const std::string metrics = http_request(c.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "keel:cluster_te_hung_total"), 0) << metrics;
  EXPECT_TRUE(c.events("te_hung").empty());
}

}  // namespace
}  // namespace keel::testing
