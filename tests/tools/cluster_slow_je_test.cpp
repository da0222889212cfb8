// The gateway never waits on a slow job executor on its io threads (`keel cluster up` on loopback):
// every JE holds each submitted job 5 s (the --je-submit-delay-ms fault hook) while 512 streamed
// requests are in flight; meanwhile the gateway's /health and /v1/models answer within 50 ms at
// the 99th percentile, its thread count does not grow, and every request then completes. Bounded
// in time; the cluster is stopped by PID (the supervisor's rule).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kDelayMs = 5000;
constexpr int kInFlight = 512;

int thread_count(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// GET `path` on a fresh connection, bounded by 2 s each way; the status, or 0 when none came in
// time (a gateway whose io threads wait on the JE: the test then fails instead of hanging).
int timed_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  const timeval bound{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string raw;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n = 0;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) raw.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return raw.size() > 12 && raw.rfind("HTTP/1.", 0) == 0 ? std::atoi(raw.c_str() + 9) : 0;
}

// The 99th percentile of `ms` (sorted in place).
double p99(std::vector<double>& ms) {
  std::sort(ms.begin(), ms.end());
  return ms[std::min(ms.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(ms.size())))];
}

std::string stream_body(int i) {
  return json{{"model", "stories"},
              {"prompt", "Once upon a time " + std::to_string(i)},
              {"max_tokens", 4},
              {"stream", true}}
      .dump();
}

TEST(ClusterSlowJe, GatewayAnswersHealthAndModelsWhileEverySubmitWaits) {
  KEEL_REQUIRE_SHARED();
  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY,
               "cluster",
               "up",
               "-m",
               shared_path("models/stories260K/stories260K.gguf"),
               "--served-model-name",
               "stories",
               "--jes",
               "1",
               "--colocated",
               "1",
               "--port",
               "0",
               "--threads-per-te",
               "1",
               "--max-num-seqs",
               "64",
               "--max-waiting",
               "4096",
               "--max-connections-per-client",
               "4096",
               "--je-submit-delay-ms",
               std::to_string(kDelayMs)};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  Result<int> ready = proc::ready_port(child->ready);
  ASSERT_TRUE(ready.ok()) << ready.status().message();
  const int port = *ready;
  // One request first: the TE's event link to the gateway is made on first use.
  const HttpResponse first =
      http_request(port, "POST", "/v1/completions",
                   json{{"model", "stories"}, {"prompt", "Hello"}, {"max_tokens", 2}}.dump());
  ASSERT_EQ(first.status, 200) << first.body;
  const int threads_before = thread_count(child->pid);
  ASSERT_GT(threads_before, 0);

  std::vector<std::unique_ptr<HttpConnection>> streams;
  for (int i = 0; i < kInFlight; ++i) {
    streams.push_back(std::make_unique<HttpConnection>(port));
    ASSERT_TRUE(streams.back()->connected()) << i;
    ASSERT_TRUE(streams.back()->send_post("/v1/completions", stream_body(i))) << i;
  }
  // While the JE holds every submission: probe until 1 s before the first could be answered.
  const Clock::time_point probe_end = Clock::now() + std::chrono::milliseconds(kDelayMs - 1000);
  std::vector<double> health_ms, models_ms;
  int threads_max = threads_before;
  int health_errors = 0;
  while (Clock::now() < probe_end) {
    for (const char* path : {"/health", "/v1/models"}) {
      const Clock::time_point t0 = Clock::now();
      const int status = timed_get(port, path);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      (std::string(path) == "/health" ? health_ms : models_ms).push_back(ms);
      if (status != 200) ++health_errors;
    }
    threads_max = std::max(threads_max, thread_count(child->pid));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double health_p99 = p99(health_ms), models_p99 = p99(models_ms);
  std::printf(
      "slow JE: %zu /health, %zu /v1/models probes: p99 %.2f ms, %.2f ms; threads %d → %d\n",
      health_ms.size(), models_ms.size(), health_p99, models_p99, threads_before, threads_max);
  // Asserted: a gateway that fails them would keep the 512 streams for minutes.
  ASSERT_LE(health_p99, 50.0);
  ASSERT_LE(models_p99, 50.0);
  EXPECT_GE(health_ms.size(), 50u);
  EXPECT_EQ(health_errors, 0);
  EXPECT_LE(threads_max, threads_before);

  // Then every request completes.
  int completed = 0;
  for (auto& s : streams) {
    const std::string raw = s->read_until(
        [](const std::string& got) { return got.find("data: [DONE]") != std::string::npos; },
        60000);
    if (raw.find("200 OK") != std::string::npos && raw.find("data: [DONE]") != std::string::npos) {
      ++completed;
    }
  }
  EXPECT_EQ(completed, kInFlight);
  EXPECT_LE(thread_count(child->pid), threads_before);
}  // the supervisor stops the cluster by PID

}  // namespace
}  // namespace keel::testing
