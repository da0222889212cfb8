// `keel serve --ep 2` on a mixture-of-experts model (qwen3moe-tiny, Q8_0): this process holds
// attention, the routers and half the experts, a `keel ep-expert` child the other half. Greedy
// completions of 256 tokens equal the single process's, with the overlap on and off, alone and
// concurrent; killing the member (SIGKILL by pid) mid-stream ends that stream with an error and
// later requests fail fast, naming the member; a dense model with --ep is refused at start. Under
// `keel cluster up` a TE with --ep 2 serves the same text, and a killed member takes its TE down
// with it: the manager replaces the gang. Hot experts replicated from a /metrics scrape keep the
// text too.
#include <signal.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <dirent.h>

#include <fstream>
#include <regex>
#include <thread>

#include "cli_runner.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string make_ep_model(const std::string& dir) {
  const std::string path = dir + "/qwen3moe-tiny.gguf";
  const CliResult r = run_keel(
      {"make-model", "--shape", "qwen3moe-tiny", "--type", "q8_0", "--ctx", "512", "-o", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

std::string ep_complete(int port, const std::string& prompt, int max_tokens) {
  const json body = {
      {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return "<" + r.body + ">";
  const json j = json::parse(r.body);
  EXPECT_EQ(j["usage"]["completion_tokens"], max_tokens);
  return j["choices"][0]["text"].get<std::string>();
}

pid_t ep_member_pid(const std::string& log) {
  std::smatch m;
  static const std::regex re("expert member 1 \\(pid ([0-9]+)\\) ready");
  return std::regex_search(log, m, re) ? static_cast<pid_t>(std::stoi(m[1])) : 0;
}

bool ep_healthy(const ServeProcess& s) {
  return eventually([&] { return http_request(s.port(), "GET", "/health").status == 200; },
                    std::chrono::seconds(60));
}

const std::vector<std::string> kEpPrompts = {"Once upon a time", "the quick brown fox",
                                             "hello world, this is"};

std::vector<std::string> ep_one_process_texts(const std::string& model) {
  ServeProcess one({"-m", model, "-t", "1", "--max-batched-tokens", "64"});
  EXPECT_TRUE(one.ok()) << one.error();
  EXPECT_TRUE(ep_healthy(one));
  std::vector<std::string> want;
  for (const auto& p : kEpPrompts) want.push_back(ep_complete(one.port(), p, 256));
  return want;
}

TEST(ExpertParallelServeTest, GreedyTextEqualsOneProcessFor256TokensOverlapOnAndOff) {
  const std::string model = make_ep_model(make_temp_dir("moe-ep"));
  const std::vector<std::string> want = ep_one_process_texts(model);
  for (const char* overlap : {"true", "false"}) {
    ServeProcess two({"-m", model, "-t", "1", "--max-batched-tokens", "64", "--ep", "2",
                      "--ep-overlap", overlap, "--ep-ping-pong", "true"});
    ASSERT_TRUE(two.ok()) << two.error();
    ASSERT_TRUE(ep_healthy(two)) << two.log();
    ASSERT_GT(ep_member_pid(two.log()), 0) << two.log();
    for (size_t i = 0; i < kEpPrompts.size(); ++i) {
      EXPECT_EQ(ep_complete(two.port(), kEpPrompts[i], 256), want[i]) << "overlap " << overlap;
    }
    std::vector<std::string> got(kEpPrompts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < kEpPrompts.size(); ++i) {
      threads.emplace_back([&, i] { got[i] = ep_complete(two.port(), kEpPrompts[i], 256); });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(got, want) << "concurrent requests, overlap " << overlap;
    EXPECT_EQ(two.terminate_and_wait(30000), 0) << two.log();
    // The member did the work: the leader's exit line counts its remote calls.
    std::smatch m;
    const std::string log = two.log();
    ASSERT_TRUE(std::regex_search(log, m, std::regex("([0-9]+) remote calls"))) << log;
    EXPECT_GT(std::stoll(m[1]), 1000) << log;  // 2 layers × ~1,500 steps, nearly all remote
    // With the overlap, prompts and the concurrent decode steps ran as two micro-batches.
    ASSERT_TRUE(std::regex_search(log, m, std::regex("([0-9]+) forward passes as two ping-pong")))
        << log;
    if (std::string(overlap) == "true") {
      EXPECT_GT(std::stoll(m[1]), 3) << log;
    } else {
      EXPECT_EQ(std::stoll(m[1]), 0) << log;
    }
  }
}

TEST(ExpertParallelServeTest, AKilledMemberEndsTheStreamWithAnErrorAndLaterRequestsFailFast) {
  const std::string model = make_ep_model(make_temp_dir("moe-ep-kill"));
  ServeProcess two({"-m", model, "-t", "1", "--ep", "2"});
  ASSERT_TRUE(two.ok()) << two.error();
  ASSERT_TRUE(ep_healthy(two)) << two.log();
  const pid_t pid = ep_member_pid(two.log());
  ASSERT_GT(pid, 0) << two.log();
  HttpConnection stream(two.port());
  ASSERT_TRUE(stream.send_post(
      "/v1/completions",
      json{{"prompt", "hello"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}}
          .dump()));
  const std::string first = stream.read_until(
      [](const std::string& r) { return r.find("\"text\"") != std::string::npos; }, 20000);
  ASSERT_NE(first.find("\"text\""), std::string::npos) << first;
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string rest = stream.read_until(
      [](const std::string& r) { return r.find("[DONE]") != std::string::npos; }, 30000);
  EXPECT_NE(rest.find("error"), std::string::npos)
      << rest.substr(rest.size() > 600 ? rest.size() - 600 : 0);
  const HttpResponse after =
      http_request(two.port(), "POST", "/v1/completions",
                   json{{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}}.dump());
  EXPECT_NE(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("expert member 1"), std::string::npos) << after.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_EQ(two.terminate_and_wait(30000), 0) << two.log();
}

// Hot experts replicated (--ep-replicas, --ep-counts) from a scrape of an earlier run's /metrics,
// to which a second model's series are added that make expert 0 of each layer hot (the file's
// series of several models are summed): the plan copies it onto the member, which loads the copy
// at the hello; the greedy text is still the single process's, and both processes compute slots.
TEST(ExpertParallelServeTest, HotExpertsReplicatedFromAMetricsScrapeKeepTheText) {
  const std::string dir = make_temp_dir("moe-eplb");
  const std::string model = make_ep_model(dir);
  std::vector<std::string> want;
  std::string scrape;
  {
    ServeProcess one({"-m", model, "-t", "1", "--max-batched-tokens", "64"});
    ASSERT_TRUE(one.ok()) << one.error();
    ASSERT_TRUE(ep_healthy(one));
    for (const auto& p : kEpPrompts) want.push_back(ep_complete(one.port(), p, 96));
    scrape = http_request(one.port(), "GET", "/metrics").body;
  }
  ASSERT_NE(scrape.find("keel:moe_expert_tokens_total{"), std::string::npos) << scrape;
  const std::string counts = dir + "/counts.prom";
  {
    std::ofstream out(counts);
    out << scrape;
    for (int layer = 0; layer < 2; ++layer) {
      out << "keel:moe_expert_tokens_total{model_name=\"skew\",layer=\"" << layer
          << "\",expert=\"0\"} 100000\n";
    }
  }
  ServeProcess two({"-m", model, "-t", "1", "--max-batched-tokens", "64", "--ep", "2",
                    "--ep-replicas", "2", "--ep-counts", counts});
  ASSERT_TRUE(two.ok()) << two.error();
  ASSERT_TRUE(ep_healthy(two)) << two.log();
  for (size_t i = 0; i < kEpPrompts.size(); ++i) {
    EXPECT_EQ(ep_complete(two.port(), kEpPrompts[i], 96), want[i]);
  }
  EXPECT_EQ(two.terminate_and_wait(30000), 0) << two.log();
  const std::string log = two.log();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("([0-9]+) hot-expert copies planned"))) << log;
  EXPECT_GE(std::stoll(m[1]), 2) << log;  // expert 0 of each layer at least
  ASSERT_TRUE(std::regex_search(log, m, std::regex("loading shard 1/2 with ([0-9]+) replicated")))
      << log;
  EXPECT_GE(std::stoll(m[1]), 2) << log;
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex("slots computed by the leader / each member: ([0-9]+) / ([0-9]+)")))
      << log;
  EXPECT_GT(std::stoll(m[1]), 0) << log;
  EXPECT_GT(std::stoll(m[2]), 0) << log;

  // Replicas without counts, and counts that cannot be read, are refused at start in one line.
  CliResult r = run_keel({"serve", "-m", model, "--ep", "2", "--ep-replicas", "1", "--port", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("go together"), std::string::npos) << r.err;
  r = run_keel({"serve", "-m", model, "--ep", "2", "--ep-replicas", "1", "--ep-counts",
                dir + "/missing.prom", "--port", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing.prom"), std::string::npos) << r.err;
}

// The parent pid of `pid` (0 when it is gone), from /proc.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The `keel ep-expert` processes descending from `root`, by pid.
std::vector<pid_t> ep_members_under(pid_t root) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
    std::string argv((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (argv.find(std::string("ep-expert\0", 10)) == std::string::npos) continue;
    for (pid_t p = pid; p > 1; p = parent_of(p)) {
      if (p == root) {
        out.push_back(pid);
        break;
      }
    }
  }
  closedir(d);
  return out;
}

// A cluster TE with --ep 2 is one gang: the same greedy text as `keel serve`; its member killed,
// the TE exits, the manager replaces the whole gang (new members) and requests succeed again.
TEST(ExpertParallelServeTest, AClusterTeLeadsAGangThatIsReplacedWhole) {
  const std::string model = make_ep_model(make_temp_dir("moe-ep-cluster"));
  const std::vector<std::string> want = ep_one_process_texts(model);
  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY, "cluster",
               "up",        "-m",
               model,       "--jes",
               "1",         "--colocated",
               "1",         "--port",
               "0",         "--threads-per-te",
               "1",         "--max-batched-tokens",
               "64",        "--ep",
               "2"};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  Result<int> port = proc::ready_port(child->ready);
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_EQ(ep_complete(*port, kEpPrompts[0], 256), want[0]);
  const std::vector<pid_t> before = ep_members_under(child->pid);
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(::kill(before[0], SIGKILL), 0);
  // The TE exits and is replaced; a request meanwhile waits for the new gang or is re-driven.
  std::string again;
  EXPECT_TRUE(eventually(
      [&] {
        const json body = {{"prompt", kEpPrompts[1]},
                           {"max_tokens", 256},
                           {"temperature", 0},
                           {"ignore_eos", true}};
        const HttpResponse r = http_request(*port, "POST", "/v1/completions", body.dump());
        if (r.status != 200) return false;
        again = json::parse(r.body)["choices"][0]["text"].get<std::string>();
        return true;
      },
      std::chrono::seconds(90)));
  EXPECT_EQ(again, want[1]);
  const std::vector<pid_t> after = ep_members_under(child->pid);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], before[0]);
  EXPECT_TRUE(sup.stop_all(std::chrono::milliseconds(20000)).ok());
}

TEST(ExpertParallelServeTest, ADenseModelIsRefusedAtStart) {
  CliResult r = run_keel({"serve", "-t", "1", "--ep", "2", "--port", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs a mixture-of-experts model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace keel::testing
