// `keel cluster profile-pd` end to end on stories260K: a 1 × 2 grid with one request per cell
// writes a heatmap file that PdHeatmap::load parses (bins as asked, provenance keys alongside),
// and `keel cluster up --pd-heatmap FILE` on a mixed fleet (1 colocated + 1 prefill + 1 decode)
// starts with it and serves a request. A grid cell longer than the model's context is refused
// before any process starts, naming the cell. Children are stopped by PID (the supervisor's rule).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "cluster/job/pd_heatmap.h"
#include "core/file_system.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

class ClusterProfilePd : public ::testing::Test {
 protected:
  void SetUp() override { KEEL_REQUIRE_SHARED(); }
};

TEST_F(ClusterProfilePd, WritesAHeatmapThatClusterUpAccepts) {
  const std::string path = make_temp_dir("profile_pd") + "/heatmap.json";
  const CliResult r =
      run_keel({"cluster", "profile-pd", "-m", stories(), "-o", path, "--prefill-lengths", "16",
                "--ratios", "0.5,1", "--requests-per-cell", "1", "--concurrency", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + path), std::string::npos) << r.err;

  PosixFileSystem fs;
  Result<cluster::PdHeatmap> map = cluster::PdHeatmap::load(fs, path);
  ASSERT_TRUE(map.ok()) << map.error().to_string();
  EXPECT_EQ(map->prefill_bins(), (std::vector<double>{16}));
  EXPECT_EQ(map->ratio_bins(), (std::vector<double>{0.5, 1}));
  ASSERT_EQ(map->values().size(), 1u);
  ASSERT_EQ(map->values()[0].size(), 2u);
  const json doc = json::parse(read_file(path));
  EXPECT_EQ(doc["model"], std::filesystem::absolute(stories()).string());
  EXPECT_EQ(doc["requests_per_cell"], 1);
  EXPECT_EQ(doc["threads_per_te"], 1);
  // The values are the measured JCTs' ratio, not placeholders.
  for (size_t c = 0; c < 2; ++c) {
    const double col = doc["jct_colocated_ms"][0][c].get<double>();
    const double dis = doc["jct_disaggregated_ms"][0][c].get<double>();
    ASSERT_GT(col, 0.0);
    ASSERT_GT(dis, 0.0);
    EXPECT_NEAR(map->values()[0][c], col / dis - 1.0, 1e-9);
  }

  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {
      KEEL_BINARY, "cluster",          "up", "-m",           stories(), "--port",
      "0",         "--colocated",      "1",  "--prefill",    "1",       "--decode",
      "1",         "--threads-per-te", "1",  "--pd-heatmap", path,      "--served-model-name",
      "stories"};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.error().to_string();
  Result<int> port = proc::ready_port(child->ready);
  ASSERT_TRUE(port.ok());
  const HttpResponse resp = http_request(
      *port, "POST", "/v1/completions",
      json{{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 8}}.dump());
  EXPECT_EQ(resp.status, 200) << resp.body;
  EXPECT_TRUE(sup.stop(child->pid, std::chrono::milliseconds(20000)).ok());
}

TEST_F(ClusterProfilePd, CellBeyondTheContextIsRefusedUpFront) {
  const std::string path = make_temp_dir("profile_pd_bad") + "/heatmap.json";
  const CliResult r = run_keel({"cluster", "profile-pd", "-m", stories(), "-o", path,
                                "--prefill-lengths", "300", "--ratios", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cell (prefill 300, ratio 1) needs 600 tokens of context"),
            std::string::npos)
      << r.err;
  const CliResult bad = run_keel({"cluster", "profile-pd", "-m", stories(), "-o", path,
                                  "--prefill-lengths", "16,x", "--ratios", "1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--prefill-lengths: 'x' is not a number"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace keel::testing
