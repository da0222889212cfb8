// End-to-end tests of `keel cluster up` on loopback: the gateway answers the OpenAI API with the
// same greedy text as `keel serve`; the fleet shows in /v1/cluster/status, `keel cluster status`
// and /metrics (router decisions through the real processes); a task executor killed (SIGKILL) or
// hung (SIGSTOP) during 16 concurrent requests costs no request — the JE re-drives them and the
// text equals an uninterrupted run; 1P1D with a Q8_0 KV cache; the streamed KV handoff of a chunked
// prefill delivers every block, and a frame dropped mid-stream means a recompute with equal text;
// SIGTERM drains the tree and every child exits; a semi-PD TE serves greedy text equal to keel
// serve's, and with --semi-pd-dynamic re-splits from its SLOs; a pipelined TE whose stage 1 is
// killed exits, costs no request, and is replaced. Each fixture bounds its time;
// children are stopped by PID (the supervisor's rule).
#include <sched.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
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

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// `keel cluster up` as a child: TEs with 1 thread each, 2 JEs, a short stall timeout.
class Cluster {
 public:
  // `tes`: the task executors' flags (default: 2 colocated).
  explicit Cluster(const std::vector<std::string>& tes = {"--colocated", "2"}) {
    proc::ChildSpec spec;
    spec.name = "cluster";
    spec.argv = {KEEL_BINARY, "cluster", "up", "-m", stories(), "--served-model-name", "stories"};
    for (const char* flag :
         {"--jes", "2", "--port", "0", "--threads-per-te", "1", "--stall-timeout-ms", "1500",
          "--max-num-seqs", "16", "--drain-timeout", "20"}) {
      spec.argv.push_back(flag);
    }
    spec.argv.insert(spec.argv.end(), tes.begin(), tes.end());
    spec.ready_timeout = std::chrono::milliseconds(60000);
    Result<proc::Child> child = sup_.spawn(spec);
    if (!child.ok()) {
      error_ = child.status().message();
      return;
    }
    pid_ = child->pid;
    Result<int> port = proc::ready_port(child->ready);
    port_ = port.ok() ? *port : 0;
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  proc::ProcessSupervisor& supervisor() { return sup_; }

 private:
  proc::ProcessSupervisor sup_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_;
};

json post(int port, const std::string& path, const json& body) {
  const HttpResponse r = http_request(port, "POST", path, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

json status(int port) {
  const HttpResponse r = http_request(port, "GET", "/v1/cluster/status");
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog",
                                           "Lily went to the park", "One day, Tom"};

json greedy_body(const std::string& prompt, int max_tokens) {
  return {{"model", "stories"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

class ClusterE2e : public ::testing::Test {
 protected:
  void SetUp() override { KEEL_REQUIRE_SHARED(); }
};

TEST_F(ClusterE2e, GreedyTextEqualsKeelServe) {
  ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  Cluster c;
  ASSERT_GT(c.port(), 0) << c.error();
  for (const std::string& prompt : kPrompts) {
    const json want = post(serve.port(), "/v1/completions", greedy_body(prompt, 40));
    const json got = post(c.port(), "/v1/completions", greedy_body(prompt, 40));
    EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]) << prompt;
    EXPECT_EQ(got["usage"], want["usage"]) << prompt;
  }
  const json chat = post(c.port(), "/v1/chat/completions",
                         {{"model", "stories"},
                          {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                          {"max_tokens", 8}});
  EXPECT_EQ(chat["object"], "chat.completion");
}

// A semi-PD TE (`cluster up --semi-pd 1 --semi-pd-split 1,1`: `keel te --role colocated --mode
// semi-pd`): the router sends it whole requests; greedy text equals keel serve's; the fleet shows
// it as a colocated TE whose engine is semi-PD, its load and KV pool reported.
TEST_F(ClusterE2e, SemiPdTeGreedyTextEqualsKeelServe) {
  ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  Cluster c({"--semi-pd", "1", "--semi-pd-split", "1,1"});
  ASSERT_GT(c.port(), 0) << c.error();
  for (const std::string& prompt : kPrompts) {
    const json want = post(serve.port(), "/v1/completions", greedy_body(prompt, 40));
    const json got = post(c.port(), "/v1/completions", greedy_body(prompt, 40));
    EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]) << prompt;
    EXPECT_EQ(got["usage"]["completion_tokens"], want["usage"]["completion_tokens"]) << prompt;
    EXPECT_EQ(got["usage"]["prompt_tokens"], want["usage"]["prompt_tokens"]) << prompt;
  }
  // The fleet view follows the TEs' periodic load reports: wait for one sent after the requests.
  json s;
  EXPECT_TRUE(eventually([&] {
    s = status(c.port());
    return s["task_executors"].size() == 1 &&
           s["task_executors"][0]["generation_tokens_total"].get<int64_t>() > 0;
  }));
  ASSERT_EQ(s["task_executors"].size(), 1u) << s.dump();
  const json& te = s["task_executors"][0];
  EXPECT_EQ(te["role"], "colocated") << te.dump();
  EXPECT_EQ(te["engine"], "semi-pd") << te.dump();
  EXPECT_GT(te["kv_blocks_total"].get<int64_t>(), 0) << te.dump();
  EXPECT_GT(te["generation_tokens_total"].get<int64_t>(), 0) << te.dump();
  EXPECT_GE(s["router"]["pd_colocated"].get<int>(), 1) << s.dump();
}

// Pipelined TEs (`cluster up --pp 2`: each TE is `keel te --pp 2`, which starts its own `keel
// pp-stage`): greedy text equals keel serve's, the fleet shows two stages per TE; a pipelined TE
// with PD disaggregation is refused at start with an error naming --pp.
TEST_F(ClusterE2e, PipelinedTesGreedyTextEqualsKeelServe) {
  ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  Cluster c({"--colocated", "1", "--pp", "2"});
  ASSERT_GT(c.port(), 0) << c.error();
  for (const std::string& prompt : kPrompts) {
    const json want = post(serve.port(), "/v1/completions", greedy_body(prompt, 40));
    const json got = post(c.port(), "/v1/completions", greedy_body(prompt, 40));
    EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]) << prompt;
  }
  const json s = status(c.port());
  ASSERT_EQ(s["task_executors"].size(), 1u) << s.dump();
  EXPECT_EQ(s["task_executors"][0]["pipeline_stages"], 2) << s.dump();
  const CliResult table =
      run_keel({"cluster", "status", "--url", "http://127.0.0.1:" + std::to_string(c.port())});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(" pp2 "), std::string::npos) << table.out;

  const CliResult bad = run_keel({"cluster", "up", "-m", stories(), "--pp", "2", "--prefill", "1",
                                  "--decode", "1", "--port", "0"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--pp 2 does not go with --prefill/--decode"), std::string::npos)
      << bad.err;
}

// Dynamic semi-PD inside a TE (`cluster up --semi-pd 1 --semi-pd-dynamic ...`, passed on to
// `keel te`): a 1 µs TTFT SLO is missed by every window with a first token, so the TE's
// controller grows its prefill side from 1 to 2 cores (x + y ≤ 4: the sets overlap); the split
// shows in the fleet status, and greedy text stays equal to the first answers across the re-split.
TEST_F(ClusterE2e, SemiPdTeDynamicResplitsFromItsSlo) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < 2) {
    GTEST_SKIP() << "needs 2 cores for a prefill side of 2";
  }
  Cluster c({"--semi-pd", "1", "--semi-pd-split", "1,1", "--semi-pd-dynamic",
             "--semi-pd-ttft-slo-ms", "0.001", "--semi-pd-tpot-slo-ms", "60000",
             "--semi-pd-window-ms", "50", "--semi-pd-max-cores", "4"});
  ASSERT_GT(c.port(), 0) << c.error();
  std::vector<json> first;
  for (const std::string& prompt : kPrompts) {
    first.push_back(
        post(c.port(), "/v1/completions", greedy_body(prompt, 16))["choices"][0]["text"]);
  }
  const auto split = [&]() -> json {
    const json s = status(c.port());
    if (s["task_executors"].size() != 1) return json();
    return s["task_executors"][0].value("semi_pd", json::object()).value("split", json());
  };
  size_t i = 0;
  ASSERT_TRUE(eventually(
      [&] {
        const size_t k = i++ % kPrompts.size();
        const json got = post(c.port(), "/v1/completions", greedy_body(kPrompts[k], 16));
        EXPECT_EQ(got["choices"][0]["text"], first[k]) << kPrompts[k];
        return split() == json::array({2, 1});
      },
      std::chrono::seconds(20)))
      << status(c.port()).dump();
  const json te = status(c.port())["task_executors"][0];
  EXPECT_GE(te["semi_pd"]["switches"].get<int64_t>(), 1) << te.dump();
  EXPECT_GE(te["semi_pd"]["decisions"].value("probe_prefill", 0), 1) << te.dump();
  for (size_t k = 0; k < kPrompts.size(); ++k) {  // after the re-split
    const json got = post(c.port(), "/v1/completions", greedy_body(kPrompts[k], 16));
    EXPECT_EQ(got["choices"][0]["text"], first[k]) << kPrompts[k];
  }
}

// 1P1D: the prefill TE computes the prompt and the first token, pushes the prompt's KV blocks to
// the decode TE (KV transfer service), which fetches them from its host tier instead of
// recomputing; greedy text equals keel serve's, token for token.
TEST_F(ClusterE2e, DisaggregatedGreedyTextEqualsKeelServe) {
  ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  Cluster c({"--prefill", "1", "--decode", "1"});
  ASSERT_GT(c.port(), 0) << c.error();
  const std::string long_prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends.";
  std::vector<std::string> prompts = kPrompts;
  prompts.push_back(long_prompt);
  for (const std::string& prompt : prompts) {
    const json want = post(serve.port(), "/v1/completions", greedy_body(prompt, 40));
    const json got = post(c.port(), "/v1/completions", greedy_body(prompt, 40));
    EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]) << prompt;
  }
  // The long prompt's two full blocks came over the wire: the decode TE served them from its
  // host tier (its usage reports them as cached).
  const json r = post(c.port(), "/v1/completions", greedy_body(long_prompt + " The end", 8));
  EXPECT_GE(r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 32) << r.dump();
  const json s = status(c.port());
  EXPECT_GE(s["router"]["pd_disaggregated"].get<int>(), 1) << s.dump();
}

// 1P1D with a Q8_0 KV cache (`cluster up --kv-type q8_0` hands the type to every TE): the prompt's
// Q8_0 blocks cross the wire, the decode TE serves them from its host tier, and the greedy text
// equals `keel serve --kv-type q8_0`'s (Q8_0 rows depend only on their own values, so where they
// were computed does not matter).
const std::string kQ8Prompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
    "with her friends and her dog.";

TEST_F(ClusterE2e, DisaggregatedQ8KvTextEqualsKeelServeQ8) {
  ServeProcess serve(
      {"-m", stories(), "-t", "1", "--served-model-name", "stories", "--kv-type", "q8_0"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  Cluster c({"--prefill", "1", "--decode", "1", "--kv-type", "q8_0"});
  ASSERT_GT(c.port(), 0) << c.error();
  const json want = post(serve.port(), "/v1/completions", greedy_body(kQ8Prompt, 24));
  const json got = post(c.port(), "/v1/completions", greedy_body(kQ8Prompt, 24));
  EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]);
  EXPECT_GE(got["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 32) << got.dump();
}

// The streamed handoff (the default) with 16-token prefill chunks: each block is sent as the step
// that computed it publishes it. Every full block of the prompt reaches the decode TE (its usage
// counts them cached: the first request of this prompt, so no other path could have cached them)
// and the text equals keel serve's. With the transfer's second frame dropped mid-stream, the
// decode TE holds only the first block, recomputes the rest, and the text is still equal.
const std::string kHandoffPrompt =
    "Once upon a time, there was a big brown bear who lived in the woods. He liked to eat honey "
    "and play with his friends the birds and the rabbits every day.";

int handoff_cached_tokens(const std::vector<std::string>& fault) {
  ServeProcess serve({"-m", stories(), "-t", "1", "--served-model-name", "stories"});
  EXPECT_TRUE(serve.ok()) << serve.error();
  std::vector<std::string> tes = {"--prefill", "1", "--decode", "1", "--prefill-chunk", "16"};
  tes.insert(tes.end(), fault.begin(), fault.end());
  Cluster c(tes);
  EXPECT_GT(c.port(), 0) << c.error();
  if (!serve.ok() || c.port() == 0) return -1;
  const json want = post(serve.port(), "/v1/completions", greedy_body(kHandoffPrompt, 24));
  const json got = post(c.port(), "/v1/completions", greedy_body(kHandoffPrompt, 24));
  EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]);
  const int prompt_tokens = got["usage"]["prompt_tokens"].get<int>();
  EXPECT_GE(prompt_tokens, 48) << got.dump();  // at least three full blocks
  return got["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

TEST_F(ClusterE2e, StreamedHandoffDeliversEveryBlock) {
  const int cached = handoff_cached_tokens({});
  EXPECT_GE(cached, 48);
}

TEST_F(ClusterE2e, HandoffDroppedMidStreamRecomputesWithEqualText) {
  EXPECT_EQ(handoff_cached_tokens({"--kv-transfer-fault", "drop:1"}), 16);
}

// A prefill TE that dies after handing off its KV does not disturb the decode.
TEST_F(ClusterE2e, PrefillDeathAfterHandoffDoesNotDisturbTheDecode) {
  Cluster c({"--prefill", "1", "--decode", "1"});
  ASSERT_GT(c.port(), 0) << c.error();
  const json want = post(c.port(), "/v1/completions", greedy_body(kPrompts[0], 300));
  pid_t prefill = 0;
  const json fleet = status(c.port());
  for (const json& te : fleet["task_executors"]) {
    if (te["role"] == "prefill") prefill = static_cast<pid_t>(te["pid"]);
  }
  ASSERT_GT(prefill, 0);
  HttpConnection conn(c.port());
  json body = greedy_body(kPrompts[0], 300);
  body["stream"] = true;
  conn.send_post("/v1/completions", body.dump());
  // A few tokens in, the decode TE runs it: kill the prefill TE.
  const std::string head =
      conn.read_until([](const std::string& s) { return sse_events(s).size() >= 8; }, 20000);
  ASSERT_EQ(kill(prefill, SIGKILL), 0);
  ASSERT_NE(head.find("data: "), std::string::npos);
  // read_until returns everything the connection received so far.
  const std::string raw = conn.read_until(
      [](const std::string& s) { return s.find("[DONE]") != std::string::npos; }, 60000);
  bool error = false;
  EXPECT_EQ(completion_stream_text(raw, &error), want["choices"][0]["text"].get<std::string>());
  EXPECT_FALSE(error);
}

TEST_F(ClusterE2e, StatusAndMetricsShowTheFleet) {
  // With the committed decode-length predictor: the JEs run it on every prompt before routing.
  Cluster c({"--colocated", "2", "--predictor",
             std::string(KEEL_SOURCE_DIR) + "/models/predictor/stories260K-length.gguf"});
  ASSERT_GT(c.port(), 0) << c.error();
  for (int i = 0; i < 4; ++i) post(c.port(), "/v1/completions", greedy_body(kPrompts[0], 8));
  const json s = status(c.port());
  ASSERT_EQ(s["task_executors"].size(), 2u) << s.dump();
  for (const json& te : s["task_executors"]) {
    EXPECT_TRUE(te["healthy"].get<bool>());
    EXPECT_EQ(te["role"], "colocated");
    EXPECT_GT(te["pid"].get<int64_t>(), 0);
  }
  const std::string metrics = http_request(c.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("keel:cluster_router_decisions_total"), std::string::npos);
  // The fleet's totals count every request (TEs report every 50 ms).
  EXPECT_TRUE(eventually([&] {
    const std::string m = http_request(c.port(), "GET", "/metrics").body;
    return metric_value(m, "keel:request_success_total", "finished_reason=\"length\"") >= 4.0;
  }));
  const CliResult cli =
      run_keel({"cluster", "status", "--url", "http://127.0.0.1:" + std::to_string(c.port())});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("te-0"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("colocated"), std::string::npos) << cli.out;
}

// The TEs' cache events reach the JEs' prefix index: a prompt sent again is routed to the TE that
// holds its blocks (locality), and that TE serves it from its prefix cache.
TEST_F(ClusterE2e, RouterFollowsCachedPrefixes) {
  Cluster c;
  ASSERT_GT(c.port(), 0) << c.error();
  std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
  for (int i = 0; i < 3; ++i) prompt += " with her friends in the park and run in the sun";
  int64_t cached = 0;
  const bool matched = eventually(
      [&] {
        const json r = post(c.port(), "/v1/completions", greedy_body(prompt, 4));
        cached = r["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
        const json s = status(c.port());
        return s["router"].value("matched_blocks", 0) > 0 && cached > 0;
      },
      std::chrono::milliseconds(15000));
  EXPECT_TRUE(matched) << status(c.port()).dump();
  EXPECT_GE(cached, 16);
}

// 16 concurrent requests (8 plain, 8 streamed) to `c`; once tokens flow, `hit` is given the pid
// of the TE that runs the most; every request must finish with the uninterrupted run's text, and
// that TE must end out of service (listed unhealthy, or replaced by a TE with a new id).
void run_with_fault(Cluster& c, const std::function<void(pid_t)>& hit) {
  ASSERT_GT(c.port(), 0) << c.error();
  constexpr int kTokens = 300;
  std::vector<std::string> want;
  for (int i = 0; i < 16; ++i) {
    want.push_back(post(c.port(), "/v1/completions",
                        greedy_body(kPrompts[i % 4], kTokens))["choices"][0]["text"]);
  }
  std::vector<std::string> got(16);
  std::vector<int> codes(16, 0);
  std::atomic<int> stream_errors{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      json body = greedy_body(kPrompts[i % 4], kTokens);
      if (i % 2 == 1) {
        body["stream"] = true;
        HttpConnection conn(c.port());
        conn.send_post("/v1/completions", body.dump());
        const std::string raw = conn.read_until(
            [](const std::string& s) { return s.find("[DONE]") != std::string::npos; }, 60000);
        bool error = false;
        got[i] = completion_stream_text(raw, &error);
        codes[i] = raw.find("200 OK") != std::string::npos ? 200 : 0;
        if (error) stream_errors.fetch_add(1);
      } else {
        const HttpResponse r = http_request(c.port(), "POST", "/v1/completions", body.dump());
        codes[i] = r.status;
        got[i] = json::parse(r.body, nullptr, false)
                     .value("choices", json::array())[0]
                     .value("text", "");
      }
    });
  }
  // Wait until requests run, then hit the busiest TE.
  pid_t victim = 0;
  const bool busy = eventually(
      [&] {
        const json s = status(c.port());
        int64_t most = 0;
        for (const json& te : s.value("task_executors", json::array())) {
          if (te.value("running", 0) > most) {
            most = te.value("running", 0);
            victim = static_cast<pid_t>(te.value("pid", 0));
          }
        }
        return most >= 2;
      },
      std::chrono::milliseconds(20000));
  EXPECT_TRUE(busy && victim > 0);
  if (busy && victim > 0) hit(victim);
  for (auto& t : clients) t.join();
  ASSERT_TRUE(busy && victim > 0);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(codes[i], 200) << "request " << i;
    EXPECT_EQ(got[i], want[i]) << "request " << i;
  }
  EXPECT_EQ(stream_errors.load(), 0);
  // The victim is out of service: listed as unhealthy, or already forgotten because its
  // replacement (a TE with a new id) took its place. (In a fast build the victim may have finished
  // its requests before the signal landed: then it holds no work, is found dead only when its
  // reports stay away, and this takes that long.)
  json s;
  const bool out = eventually(
      [&] {
        s = status(c.port());
        int dead = 0;
        bool replaced = false;
        bool victim_healthy = false;
        for (const json& te : s["task_executors"]) {
          victim_healthy =
              victim_healthy || (te["pid"].get<int64_t>() == victim && te["healthy"].get<bool>());
          dead += te["healthy"].get<bool>() ? 0 : 1;
          replaced = replaced || (te["id"] != "te-0" && te["id"] != "te-1");
        }
        return !victim_healthy && (dead == 1 || replaced);
      },
      std::chrono::seconds(15));
  EXPECT_TRUE(out) << s.dump();
}

TEST_F(ClusterE2e, KilledTaskExecutorLosesNoRequest) {
  Cluster c;
  run_with_fault(c, [](pid_t te) { EXPECT_EQ(kill(te, SIGKILL), 0); });
}

TEST_F(ClusterE2e, HungTaskExecutorLosesNoRequest) {
  Cluster c;
  pid_t stopped = 0;
  run_with_fault(c, [&](pid_t te) {
    EXPECT_EQ(kill(te, SIGSTOP), 0);
    stopped = te;
  });
  if (stopped > 0) kill(stopped, SIGKILL);  // its JE counted it dead; do not leave it stopped
}

// The children of `pid` (its main thread's list in /proc).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t child = 0; in >> child;) out.push_back(child);
  return out;
}

// Pipelined TEs (`--pp 2`): stage 1 of the busiest TE is killed (SIGKILL). That TE fails none of
// its requests: it stops and exits, its JEs re-drive its jobs (every request keeps the
// uninterrupted run's text), and the manager replaces it with a new pipelined TE.
TEST_F(ClusterE2e, PipelinedTeWhoseStageDiesLosesNoRequestAndIsReplaced) {
  Cluster c({"--colocated", "2", "--pp", "2"});
  pid_t te_pid = 0;
  run_with_fault(c, [&](pid_t te) {
    te_pid = te;
    const std::vector<pid_t> stage = children_of(te);
    ASSERT_EQ(stage.size(), 1u) << "TE " << te << ": its stage 1 is its one child";
    EXPECT_EQ(kill(stage[0], SIGKILL), 0);
  });
  ASSERT_GT(te_pid, 0);
  EXPECT_TRUE(eventually([&] { return kill(te_pid, 0) != 0; }, std::chrono::seconds(10)))
      << "the TE whose stage died still runs";
  json s;
  const bool replaced = eventually(
      [&] {
        s = status(c.port());
        for (const json& te : s["task_executors"]) {
          if (te["id"] != "te-0" && te["id"] != "te-1" && te["healthy"].get<bool>() &&
              te.value("pipeline_stages", 1) == 2) {
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(replaced) << s.dump();
  const json r = post(c.port(), "/v1/completions", greedy_body(kPrompts[0], 8));
  EXPECT_EQ(r["usage"]["completion_tokens"], 8) << r.dump();
}

TEST_F(ClusterE2e, BatchSurvivesATaskExecutorDying) {
  Cluster c;
  ASSERT_GT(c.port(), 0) << c.error();
  constexpr int kLines = 24;
  std::vector<std::string> want;
  std::string input;
  for (int i = 0; i < kLines; ++i) {
    const json body = greedy_body(kPrompts[i % 4], 200);
    if (i < 4) want.push_back(post(c.port(), "/v1/completions", body)["choices"][0]["text"]);
    input += json{{"custom_id", "line-" + std::to_string(i)},
                  {"method", "POST"},
                  {"url", "/v1/completions"},
                  {"body", body}}
                 .dump() +
             "\n";
  }
  const std::string boundary = "keelclusterbatch";
  const std::string form =
      "--" + boundary + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--" +
      boundary +
      "\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"in.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
      input + "\r\n--" + boundary + "--\r\n";
  const HttpResponse up =
      http_request(c.port(), "POST", "/v1/files", form,
                   {{"content-type", "multipart/form-data; boundary=" + boundary}});
  ASSERT_EQ(up.status, 200) << up.body;
  const json created = post(c.port(), "/v1/batches",
                            {{"input_file_id", json::parse(up.body)["id"]},
                             {"endpoint", "/v1/completions"},
                             {"completion_window", "24h"}});
  const std::string id = created["id"];
  // Once lines run, kill the busiest TE.
  pid_t victim = 0;
  ASSERT_TRUE(eventually(
      [&] {
        const json s = status(c.port());
        for (const json& te : s["task_executors"]) {
          if (te.value("running", 0) >= 1) victim = static_cast<pid_t>(te.value("pid", 0));
        }
        return victim > 0;
      },
      std::chrono::milliseconds(20000)));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  json batch;
  ASSERT_TRUE(eventually(
      [&] {
        batch =
            json::parse(http_request(c.port(), "GET", "/v1/batches/" + id).body, nullptr, false);
        return batch.value("status", "") == "completed" || batch.value("status", "") == "failed";
      },
      std::chrono::milliseconds(60000)))
      << batch.dump();
  EXPECT_EQ(batch["status"], "completed") << batch.dump();
  EXPECT_EQ(batch["request_counts"]["completed"], kLines) << batch.dump();
  EXPECT_EQ(batch["request_counts"]["failed"], 0) << batch.dump();
  const HttpResponse out = http_request(
      c.port(), "GET", "/v1/files/" + batch["output_file_id"].get<std::string>() + "/content");
  int lines = 0;
  size_t pos = 0;
  while (pos < out.body.size()) {
    const size_t end = out.body.find('\n', pos);
    const json line = json::parse(out.body.substr(pos, end - pos), nullptr, false);
    pos = end == std::string::npos ? out.body.size() : end + 1;
    if (line.is_discarded()) continue;
    const int i = std::stoi(line["custom_id"].get<std::string>().substr(5));
    EXPECT_EQ(line["response"]["body"]["choices"][0]["text"], want[i % 4]) << line.dump();
    ++lines;
  }
  EXPECT_EQ(lines, kLines);
}

TEST_F(ClusterE2e, SigtermDrainsTheTree) {
  Cluster c;
  ASSERT_GT(c.port(), 0) << c.error();
  const json s = status(c.port());
  std::vector<pid_t> tes;
  for (const json& te : s["task_executors"]) tes.push_back(static_cast<pid_t>(te["pid"]));
  ASSERT_EQ(tes.size(), 2u);
  // A request in flight when SIGTERM arrives still completes.
  std::thread client([&] {
    const json r = post(c.port(), "/v1/completions", greedy_body(kPrompts[0], 300));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Result<proc::ChildExit> exit = c.supervisor().stop(c.pid(), std::chrono::milliseconds(30000));
  client.join();
  ASSERT_TRUE(exit.ok()) << exit.status().message();
  EXPECT_EQ(exit->exit_code, 0) << exit->describe();
  for (pid_t pid : tes) {
    EXPECT_TRUE(eventually([&] { return kill(pid, 0) != 0; }, std::chrono::milliseconds(5000)))
        << "TE " << pid;
  }
}

}  // namespace
}  // namespace keel::testing
