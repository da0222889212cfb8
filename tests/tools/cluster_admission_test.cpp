// The JE's admission layer end to end (`keel cluster up --max-jobs-per-te 1` on loopback): while
// one long request runs on the only TE, two more wait at the JE; the one with the lower
// `priority` is let in first, so it finishes before the other even starts, though it was sent
// second. Bounded in time; the cluster is stopped by PID (the supervisor's rule).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string body(int max_tokens, bool stream, int priority) {
  return json{{"model", "stories"},       {"prompt", "Once upon a time"},
              {"max_tokens", max_tokens}, {"ignore_eos", true},
              {"stream", stream},         {"priority", priority}}
      .dump();
}

// Reads one non-streamed response on `c`; the time it was complete (or the epoch on failure).
void finish_time(HttpConnection* c, Clock::time_point* done, std::string* raw) {
  *raw = c->read_until(
      [](const std::string& got) { return got.find("\"usage\"") != std::string::npos; }, 60000);
  if (raw->find("200 OK") != std::string::npos) *done = Clock::now();
}

TEST(ClusterAdmission, TheLowerPriorityNumberIsLetInFirst) {
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
               "--colocated",
               "1",
               "--port",
               "0",
               "--threads-per-te",
               "1",
               "--max-jobs-per-te",
               "1"};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  Result<int> ready = proc::ready_port(child->ready);
  ASSERT_TRUE(ready.ok()) << ready.status().message();
  const int port = *ready;
  const HttpResponse warm = http_request(port, "POST", "/v1/completions", body(2, false, 0));
  ASSERT_EQ(warm.status, 200) << warm.body;

  // A: long, streamed; once its first token is out it holds the TE's one slot.
  HttpConnection a(port);
  ASSERT_TRUE(a.send_post("/v1/completions", body(400, true, 0)));
  const std::string first = a.read_until(
      [](const std::string& got) { return got.find("data: {") != std::string::npos; }, 30000);
  ASSERT_NE(first.find("data: {"), std::string::npos) << first;
  // B (priority 5) then C (priority -1): both wait at the JE behind A.
  HttpConnection b(port), c(port);
  ASSERT_TRUE(b.send_post("/v1/completions", body(16, false, 5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // B reaches the JE first
  ASSERT_TRUE(c.send_post("/v1/completions", body(16, false, -1)));
  Clock::time_point b_done{}, c_done{};
  std::string b_raw, c_raw;
  std::thread tb(finish_time, &b, &b_done, &b_raw);
  std::thread tc(finish_time, &c, &c_done, &c_raw);
  const std::string rest = a.read_until(
      [](const std::string& got) { return got.find("data: [DONE]") != std::string::npos; }, 60000);
  tb.join();
  tc.join();
  ASSERT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
  ASSERT_NE(b_done, Clock::time_point{}) << b_raw;
  ASSERT_NE(c_done, Clock::time_point{}) << c_raw;
  EXPECT_LT(c_done, b_done) << "C (priority -1) must be let in before B (priority 5)";
}  // the supervisor stops the cluster by PID

}  // namespace
}  // namespace keel::testing
