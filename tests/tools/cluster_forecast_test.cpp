// The preload forecast across two models, through the binary: two `keel cluster up` (models A and
// B, random tiny GGUFs) share one model store whose budget holds one entry. A starts first and
// preloads its entry; B finds no room without evicting A and leaves the choice to its forecast.
// Both post their rates on the store's demand board. Requests to B raise B's rate above A's: B's
// manager preloads B and A's entry goes (evicted for B, or by A's own manager, which lets its
// sealed memfd go either way). Requests to A then move the store back once A's rate passes B's
// decaying one.
// Every line read here is from the managers' event logs and the store directory; no test step
// preloads or evicts by hand. Children are stopped by PID.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// The store's entry names, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("keel-store-", 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The forecast lines of an event log with action `action`.
std::vector<json> forecasts(const std::string& log, const std::string& action) {
  std::vector<json> out;
  for (const json& e : read_event_log(log, "forecast")) {
    if (e.value("action", "") == action) out.push_back(e);
  }
  return out;
}

// Whether process `pid` holds a descriptor of the memfd named `entry`.
bool holds_memfd(int64_t pid, const std::string& entry) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    char target[512];
    const ssize_t n = ::readlink(e.path().c_str(), target, sizeof(target) - 1);
    if (n > 0 && std::string(target, static_cast<size_t>(n)).find("/memfd:" + entry) == 0) {
      return true;
    }
  }
  return false;
}

std::string base_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

class ForecastE2e : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("forecast"); }
  std::string dir_;
};

TEST_F(ForecastE2e, DemandMovesTheStoreFromOneModelToTheOtherWithinItsBudget) {
  const std::string a = dir_ + "/a.gguf", b = dir_ + "/b.gguf";
  for (const auto& [path, seed] : {std::pair{a, "1"}, std::pair{b, "2"}}) {
    const CliResult made =
        run_keel({"make-model", "--shape", "tiny", "--type", "q8_0", "--seed", seed, "-o", path});
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  const std::string store = dir_ + "/store";
  std::filesystem::create_directories(store);
  const auto budget = std::filesystem::file_size(a) * 3 / 2;  // one entry, not two
  proc::ProcessSupervisor sup({.sink = [](std::string_view, std::string_view) {}});
  const auto start = [&](const std::string& model, const std::string& name) {
    proc::ChildSpec spec;
    spec.name = name;
    spec.argv = {KEEL_BINARY,
                 "cluster",
                 "up",
                 "-m",
                 model,
                 "--served-model-name",
                 name,
                 "--port",
                 "0",
                 "--colocated",
                 "1",
                 "--threads-per-te",
                 "1",
                 "-c",
                 "128",
                 "--store-dir",
                 store,
                 "--store-budget",
                 std::to_string(budget),
                 "--forecast-half-life",
                 "1",
                 "--forecast-min-rate",
                 "2",
                 "--event-log",
                 dir_ + "/" + name + ".jsonl"};
    spec.ready_timeout = std::chrono::seconds(60);
    return sup.spawn(spec);
  };
  Result<proc::Child> ca = start(a, "a");
  ASSERT_TRUE(ca.ok()) << ca.status().to_string();
  const std::vector<json> a_start = forecasts(dir_ + "/a.jsonl", "preload");
  ASSERT_EQ(a_start.size(), 1u) << "A preloads at start: the store is empty";
  const std::string entry_a = base_name(a_start[0]["entry"]);
  EXPECT_EQ(entries(store), std::vector<std::string>{entry_a});
  EXPECT_TRUE(holds_memfd(ca->pid, entry_a)) << "A's manager holds its sealed entry";

  Result<proc::Child> cb = start(b, "b");
  ASSERT_TRUE(cb.ok()) << cb.status().to_string();
  const std::vector<json> skipped = forecasts(dir_ + "/b.jsonl", "skip");
  ASSERT_EQ(skipped.size(), 1u) << "B does not evict A at start-up";
  EXPECT_NE(skipped[0]["entry"].get<std::string>().find("only by evicting " + entry_a),
            std::string::npos)
      << skipped[0].dump();
  EXPECT_EQ(entries(store), std::vector<std::string>{entry_a});

  // Demand for `port`'s model until `done` holds (10 s at most); every request must succeed.
  const auto drive = [&](int port, const std::string& model, const auto& done) {
    const json body = {{"model", model}, {"prompt", "hello"}, {"max_tokens", 2}};
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
    int failed = 0;
    while (!done() && Clock::now() < deadline) {
      failed += http_request(port, "POST", "/v1/completions", body.dump()).status != 200;
    }
    EXPECT_EQ(failed, 0) << model;
    return done();
  };
  const int port_a = *proc::ready_port(ca->ready);
  const int port_b = *proc::ready_port(cb->ready);

  // The plan is the same on both managers, so the entry that makes room goes either way: in the
  // preloading manager's eviction (its line's `evicted`) or by its own manager's `evict`, or, when
  // the preload came first, that manager finds it gone and lets its memfd go (`released`). Either
  // way the store ends with the wanted entry only and the other manager holds no memfd of its own.
  const auto moved = [&](const std::string& to_log, const std::string& from_log,
                         const std::string& from_entry, int64_t from_pid, const json& preload) {
    const bool by_preload = preload.value("evicted", json::array()) == json::array({from_entry});
    const bool by_owner = !forecasts(from_log, "evict").empty();
    EXPECT_TRUE(by_preload || by_owner) << preload.dump() << " in " << to_log;
    EXPECT_TRUE(
        eventually([&] { return !holds_memfd(from_pid, from_entry); }, std::chrono::seconds(5)))
        << "the evicted entry's manager still holds its memfd";
  };

  // B in demand: the forecast wants B, not A (A has no requests): B's manager preloads B.
  ASSERT_TRUE(drive(port_b, "b", [&] { return !forecasts(dir_ + "/b.jsonl", "preload").empty(); }))
      << "B's forecast never preloaded B";
  const json b_preload = forecasts(dir_ + "/b.jsonl", "preload")[0];
  const std::string entry_b = base_name(b_preload["entry"]);
  EXPECT_GE(b_preload["rate"].get<double>(), 2.0) << b_preload.dump();
  EXPECT_EQ(entries(store), std::vector<std::string>{entry_b});
  moved(dir_ + "/b.jsonl", dir_ + "/a.jsonl", entry_a, ca->pid, b_preload);

  // A in demand again (B idle): the store moves back once A's rate passes B's decaying one.
  ASSERT_TRUE(drive(port_a, "a", [&] {
    return forecasts(dir_ + "/a.jsonl", "preload").size() >= 2;
  })) << "A's forecast never preloaded A again";
  const json a_again = forecasts(dir_ + "/a.jsonl", "preload")[1];
  EXPECT_EQ(entries(store), std::vector<std::string>{entry_a});
  moved(dir_ + "/a.jsonl", dir_ + "/b.jsonl", entry_b, cb->pid, a_again);

  ASSERT_TRUE(sup.stop(cb->pid, std::chrono::seconds(20)).ok());
  ASSERT_TRUE(sup.stop(ca->pid, std::chrono::seconds(20)).ok());
}

}  // namespace
}  // namespace keel::testing
