// Issue 33's "nothing lost on restart" through the binary: a 200-line batch through `keel cluster
// up --state-dir DIR`, the gateway process (`cluster up` itself, whose TEs and JEs get SIGTERM
// when it dies) killed with SIGKILL halfway, a new `cluster up` on the same directory: the batch
// completes, every line answered exactly once, and the new fleet ran exactly the lines missing
// from the batch's progress log (read between the two runs); while it runs, a `keel serve` on the
// same directory is refused with a one-line error. Every process is stopped by PID: the tree's
// children (read from /proc before the kill) are waited for, and killed if they outlive the bound.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli_runner.h"
#include "core/file_system.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "state/state_store.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kLines = 200;

// `keel cluster up` on `state_dir` as a child of `sup`: one colocated TE, one JE, two batch
// lines at a time; its gateway port (0 when it did not start).
int start_cluster(proc::ProcessSupervisor& sup, const std::string& name,
                  const std::string& state_dir, pid_t* pid) {
  proc::ChildSpec spec;
  spec.name = name;
  spec.argv = {KEEL_BINARY,
               "cluster",
               "up",
               "-m",
               shared_path("models/stories260K/stories260K.gguf"),
               "--served-model-name",
               "stories",
               "--colocated",
               "1",
               "--jes",
               "1",
               "--threads-per-te",
               "1",
               "--port",
               "0",
               "--drain-timeout",
               "2",
               "--batch-concurrency",
               "2",
               "--state-dir",
               state_dir};
  spec.ready_timeout = 60s;
  Result<proc::Child> child = sup.spawn(spec);
  EXPECT_TRUE(child.ok()) << child.status().message();
  if (!child.ok()) return 0;
  *pid = child->pid;
  Result<int> port = proc::ready_port(child->ready);
  return port.ok() ? *port : 0;
}

// The direct children of `pid` (every thread's).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(task_dir)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child = 0; in >> child;) out.push_back(child);
  }
  return out;
}

json get_json(int port, const std::string& path) {
  return json::parse(http_request(port, "GET", path).body, nullptr, false);
}

// Finished requests the fleet behind the gateway reports (TEs report every 50 ms).
double fleet_requests(int port) {
  const std::string m = http_request(port, "GET", "/metrics").body;
  double total = 0;
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    total += std::max(0.0, metric_value(m, "keel:request_success_total",
                                        std::string("finished_reason=\"") + reason + "\""));
  }
  return total;
}

std::string upload_form(const std::string& boundary) {
  std::string input;
  for (int i = 0; i < kLines; ++i) {
    input += json{{"custom_id", "line-" + std::to_string(i)},
                  {"method", "POST"},
                  {"url", "/v1/completions"},
                  {"body",
                   {{"model", "stories"},
                    {"prompt", "Once upon a time " + std::to_string(i)},
                    {"max_tokens", 8},
                    {"temperature", 0}}}}
                 .dump() +
             "\n";
  }
  return "--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"file\"; "
         "filename=\"in.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
         input + "\r\n--" + boundary + "--\r\n";
}

TEST(ClusterBatchRestart, GatewayKilledHalfwayResumesAndAnswersEveryLineOnce) {
  KEEL_REQUIRE_SHARED();
  const std::string state_dir = make_temp_dir("cluster_state");
  proc::ProcessSupervisor sup;
  pid_t first_pid = 0;
  const int first = start_cluster(sup, "cluster-1", state_dir, &first_pid);
  ASSERT_GT(first, 0);
  const std::string boundary = "keelrestartbatch";
  const HttpResponse up =
      http_request(first, "POST", "/v1/files", upload_form(boundary),
                   {{"content-type", "multipart/form-data; boundary=" + boundary}});
  ASSERT_EQ(up.status, 200) << up.body;
  const HttpResponse created = http_request(first, "POST", "/v1/batches",
                                            json{{"input_file_id", json::parse(up.body)["id"]},
                                                 {"endpoint", "/v1/completions"},
                                                 {"completion_window", "24h"}}
                                                .dump());
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = json::parse(created.body)["id"];

  // Halfway: SIGKILL to the gateway's process.
  int64_t done_before_kill = 0;
  ASSERT_TRUE(eventually(
      [&] {
        const json b = get_json(first, "/v1/batches/" + id);
        done_before_kill = b["request_counts"].value("completed", int64_t{0});
        return done_before_kill >= kLines / 2;
      },
      30s));
  ASSERT_LT(done_before_kill, kLines) << "the batch finished before the kill";
  const std::vector<pid_t> tree = children_of(first_pid);
  EXPECT_EQ(tree.size(), 2u);  // the TE and the JE
  ASSERT_TRUE(sup.signal(first_pid, SIGKILL).ok());
  ASSERT_TRUE(eventually([&] { return !sup.poll_exits().empty(); }, 10s));
  // Its children got SIGTERM (their parent-death signal) and drain for at most 2 s.
  for (pid_t child : tree) {
    if (!eventually([&] { return kill(child, 0) != 0; }, 10s)) {
      ADD_FAILURE() << "child " << child << " outlived the killed cluster";
      kill(child, SIGKILL);
    }
  }

  // The lines the killed gateway had recorded as finished: its batch's progress log.
  size_t logged = 0;
  {
    PosixFileSystem fs;
    Result<std::unique_ptr<state::StateStore>> store = state::StateStore::open(&fs, state_dir);
    ASSERT_TRUE(store.ok()) << store.status().message();  // the lock died with the process
    Result<std::vector<std::string>> log = (*store)->read_log("batches", id);
    ASSERT_TRUE(log.ok()) << log.status().message();
    logged = log->size();
  }
  EXPECT_GE(logged, static_cast<size_t>(done_before_kill));  // recorded before counted
  EXPECT_LT(logged, static_cast<size_t>(kLines));

  pid_t second_pid = 0;
  const int second = start_cluster(sup, "cluster-2", state_dir, &second_pid);
  ASSERT_GT(second, 0);
  // The directory is the new gateway's now: another server on it is refused in one line.
  const CliResult refused =
      run_keel({"serve", "-m", shared_path("models/stories260K/stories260K.gguf"), "--port", "0",
                "--state-dir", state_dir});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("keel: server: --state-dir " + state_dir + ": state directory " +
                             state_dir + " is in use by another process"),
            std::string::npos)
      << refused.err;
  json batch;
  ASSERT_TRUE(eventually(
      [&] {
        batch = get_json(second, "/v1/batches/" + id);
        return batch.value("status", "") == "completed" || batch.value("status", "") == "failed";
      },
      30s))
      << batch.dump();
  ASSERT_EQ(batch["status"], "completed") << batch.dump();
  EXPECT_EQ(batch["request_counts"],
            json({{"total", kLines}, {"completed", kLines}, {"failed", 0}}));
  EXPECT_TRUE(batch["error_file_id"].is_null()) << batch.dump();
  const std::string out =
      http_request(second, "GET",
                   "/v1/files/" + batch["output_file_id"].get<std::string>() + "/content")
          .body;
  std::multiset<std::string> answered;
  for (size_t pos = 0; pos < out.size();) {
    const size_t end = out.find('\n', pos);
    const json line = json::parse(out.substr(pos, end - pos), nullptr, false);
    pos = end == std::string::npos ? out.size() : end + 1;
    ASSERT_FALSE(line.is_discarded());
    EXPECT_EQ(line["response"]["status_code"], 200) << line.dump();
    answered.insert(line["custom_id"].get<std::string>());
  }
  EXPECT_EQ(answered.size(), static_cast<size_t>(kLines));
  for (int i = 0; i < kLines; ++i) {
    EXPECT_EQ(answered.count("line-" + std::to_string(i)), 1u) << "line-" << i;
  }
  // The new fleet ran exactly the lines that were not in the log (its TEs report every 50 ms).
  const double rest = static_cast<double>(kLines - static_cast<int>(logged));
  EXPECT_TRUE(eventually([&] { return fleet_requests(second) >= rest; }, 10s));
  std::this_thread::sleep_for(300ms);
  const double ran = fleet_requests(second);
  EXPECT_EQ(ran, rest) << "lines ran again, or not at all";
  std::printf(
      "cluster batch restart: %lld of %d lines counted at the kill, %zu recorded; %.0f "
      "run after it\n",
      static_cast<long long>(done_before_kill), kLines, logged, ran);
  EXPECT_TRUE(sup.stop(second_pid, 20s).ok());
}

}  // namespace
}  // namespace keel::testing
