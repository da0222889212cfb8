// The gateway's fleet dashboard (GET /dashboard) in headless Chromium: a cluster of two TEs
// serves the page; Chromium loads it, lets its JS poll /v1/cluster/status and /metrics for a few
// seconds of virtual time, and the dumped DOM must hold a row per TE ("te-te-0", "te-te-1") with
// its state (idle: the test's requests are over), the router's counters, the autoscaler's row for
// its group (`--min 2 --max 3`: colocated) with each value in a column aligned as its header, the
// latency and error captions with the test's requests in them, and the scale-out section; a
// screenshot of the page must not be
// blank (its PNG at least 3× the size of about:blank's at the same window size). Without Chromium
// the browser part is skipped with the reason printed (and fails under CI=true).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// The first of Debian's chromium binary names on PATH; "" when none.
std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

// Runs `cmd` (bounded by timeout(1)) and returns its stdout.
std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(("timeout 90 " + cmd + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Whether each cell of `html` (a run of <th> or <td> tags) is numeric (class "num"), in order.
std::vector<bool> numeric_cells(const std::string& html, const std::string& tag) {
  std::vector<bool> out;
  const std::regex cell("<" + tag + "( class=\"([^\"]*)\")?>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cell); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[2].str().find("num") != std::string::npos);
  }
  return out;
}

TEST(ClusterDashboardTest, ChromiumRendersTheFleet) {
  KEEL_REQUIRE_SHARED();
  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY, "cluster",         "up", "-m",     stories(), "--served-model-name",
               "stories",   "--colocated",     "2",  "--jes",  "1",       "--threads-per-te",
               "1",         "--drain-timeout", "5",  "--port", "0",       "--min",
               "2",         "--max",           "3"};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  Result<int> port = proc::ready_port(child->ready);
  ASSERT_TRUE(port.ok()) << port.status().to_string();

  const HttpResponse page = http_request(*port, "GET", "/dashboard");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.body.find("<script>"), std::string::npos);
  EXPECT_EQ(page.body.find("src=\"http"), std::string::npos);  // self-contained
  EXPECT_EQ(page.body.find("href=\"http"), std::string::npos);
  for (int i = 0; i < 3; ++i) {  // some router decisions to show
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}};
    EXPECT_EQ(http_request(*port, "POST", "/v1/completions", body.dump()).status, 200);
  }

  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") {
      FAIL() << "chromium not found (scripts/install-deps.sh installs it); required under CI=true";
    }
    GTEST_SKIP() << "chromium not found (scripts/install-deps.sh installs it): the page was "
                    "served, the browser checks did not run";
  }
  const std::string dir = make_temp_dir("dashboard");
  const std::string url = "http://127.0.0.1:" + std::to_string(*port) + "/dashboard";
  const std::string flags = chromium + " --headless --disable-gpu --no-sandbox --hide-scrollbars " +
                            "--user-data-dir=" + dir + "/profile --window-size=1100,900 " +
                            "--virtual-time-budget=4000 ";
  const std::string dom = run(flags + "--dump-dom " + url);
  for (const char* want :
       {"id=\"te-te-0\"", "id=\"te-te-1\"", "healthy", "colocated", "locality",
        "decision → first token", "TEs over the last", "id=\"autoscaler-colocated\"",
        "class=\"state idle\"", "id=\"chart-ttft\"", "id=\"chart-tpot\"", "id=\"chart-errors\""}) {
    EXPECT_NE(dom.find(want), std::string::npos) << want << "\n" << dom.substr(0, 4000);
  }
  EXPECT_EQ(dom.find("class=\"state busy\""), std::string::npos) << "no TE works now";
  // Latency and errors from /metrics: the three completions above, none failed.
  EXPECT_TRUE(std::regex_search(dom, std::regex("TTFT p50 [0-9.]+ ms, p99 [0-9.]+ ms")))
      << dom.substr(0, 4000);
  EXPECT_TRUE(std::regex_search(dom, std::regex("TPOT p50 [0-9.]+ ms, p99 [0-9.]+ ms")));
  EXPECT_NE(dom.find("errors 0.0%, aborted 0.0% of 3 finished requests"), std::string::npos)
      << dom.substr(0, 4000);
  // The autoscaler's values sit under their headers: numeric columns right-aligned in both.
  const size_t table = dom.find("<h2>Autoscaler</h2>");
  ASSERT_NE(table, std::string::npos);
  const std::string head = dom.substr(table, dom.find("</thead>", table) - table);
  const size_t row = dom.find("id=\"autoscaler-colocated\"");
  ASSERT_NE(row, std::string::npos);
  const std::string cells = dom.substr(row, dom.find("</tr>", row) - row);
  const std::vector<bool> headers = numeric_cells(head, "th"), values = numeric_cells(cells, "td");
  EXPECT_EQ(headers.size(), 7u) << head;
  EXPECT_EQ(headers, values) << head << "\n" << cells;
  // The status line says the last poll succeeded (the script's own text holds "error:" too).
  EXPECT_EQ(dom.find("id=\"status\">error"), std::string::npos) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("2 TEs; updated"), std::string::npos) << dom.substr(0, 4000);

  run(flags + "--screenshot=" + dir + "/page.png " + url);
  run(flags + "--screenshot=" + dir + "/blank.png about:blank");
  ASSERT_TRUE(std::filesystem::exists(dir + "/page.png"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/blank.png"));
  const auto page_bytes = std::filesystem::file_size(dir + "/page.png");
  const auto blank_bytes = std::filesystem::file_size(dir + "/blank.png");
  EXPECT_EQ(read_file(dir + "/page.png").substr(1, 3), "PNG");
  EXPECT_GT(page_bytes, 3 * blank_bytes) << "page " << page_bytes << " B, blank " << blank_bytes;
}

}  // namespace
}  // namespace keel::testing
