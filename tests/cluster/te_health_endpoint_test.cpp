// A TE's own health from progress (cluster/health/progress_watch.h,
// cluster/health/te_health_endpoint.h): ProgressWatch as a pure rule over synthetic times (idle
// healthy, stepping busy, stuck with work hung, the clock restarting when work arrives);
// te_health_reply's statuses; and the endpoint over real HTTP on loopback with scripted engine
// stats — warm, healthy, busy, hung once the steps stop under work, draining — plus 404/405 answers
// and a silent client dropped without holding up other probes. Every wait is bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cluster/health/te_health_endpoint.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;
using health::TeState;

TEST(ProgressWatchTest, IdleIsHealthyWorkThatStepsIsBusyAndWorkThatStopsIsHung) {
  ProgressWatch w(health::HealthConfig{.hang_timeout = 1000ms});
  const auto t0 = ProgressWatch::Clock::time_point{} + 100s;
  EXPECT_EQ(w.observe(10, false, t0), TeState::kHealthy);
  EXPECT_EQ(w.observe(10, false, t0 + 5s), TeState::kHealthy) << "an idle TE owes no steps";
  // Work arrives: its clock starts now, not at the last step.
  EXPECT_EQ(w.observe(10, true, t0 + 5s + 100ms), TeState::kBusy);
  EXPECT_EQ(w.observe(11, true, t0 + 5s + 900ms), TeState::kBusy);
  EXPECT_EQ(w.observe(11, true, t0 + 6s + 800ms), TeState::kBusy);  // 900 ms since the step
  EXPECT_EQ(w.since_progress(), 900ms);
  EXPECT_EQ(w.observe(11, true, t0 + 7s), TeState::kHung);  // 1.1 s with work and no step
  EXPECT_EQ(w.observe(12, true, t0 + 7s + 10ms), TeState::kBusy) << "a step ends the hang";
  EXPECT_EQ(w.observe(12, false, t0 + 20s), TeState::kHealthy);
}

TEST(ProgressWatchTest, RepliesCarryTheVerdictAndTheCounters) {
  engine::EngineStats s;
  s.steps_total = 7;
  s.num_running = 2;
  s.num_waiting = 1;
  HealthReply r = te_health_reply(TePhase::kServing, TeState::kBusy, s, 40ms);
  EXPECT_EQ(r.status, 200);
  const nlohmann::json j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["status"], "busy");
  EXPECT_EQ(j["steps"], 7);
  EXPECT_EQ(j["running"], 2);
  EXPECT_EQ(j["waiting"], 1);
  EXPECT_EQ(j["since_progress_ms"], 40);
  EXPECT_EQ(te_health_reply(TePhase::kServing, TeState::kHung, s, 9s).status, 503);
  r = te_health_reply(TePhase::kDraining, TeState::kBusy, s, 0ms);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(nlohmann::json::parse(r.body)["status"], "draining");
  r = te_health_reply(TePhase::kWarm, TeState::kHealthy, {}, 0ms);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(r.body)["status"], "warm");
}

// One raw HTTP exchange on loopback: the status code (0 when the connection failed or closed
// without a status line) and the body.
std::pair<int, std::string> http(uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return {0, ""};
  }
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (got.rfind("HTTP/1.1 ", 0) != 0) return {0, got};
  const size_t body = got.find("\r\n\r\n");
  return {std::stoi(got.substr(9, 3)), body == std::string::npos ? "" : got.substr(body + 4)};
}

std::pair<int, std::string> get(uint16_t port, const std::string& path) {
  return http(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

std::string status_of(uint16_t port) {
  const auto [code, body] = get(port, "/health");
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return std::to_string(code) + " " + (j.is_object() ? j.value("status", "?") : body);
}

bool eventually_status(uint16_t port, const std::string& want, std::chrono::milliseconds limit) {
  const auto by = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < by) {
    if (status_of(port) == want) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(TeHealthEndpointTest, AnswersFromTheEngineProgressOverHttp) {
  auto e = TeHealthEndpoint::start("127.0.0.1", 0, 300ms);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const uint16_t port = (*e)->port();
  EXPECT_EQ(status_of(port), "200 warm");

  std::atomic<int64_t> steps{0}, running{0};
  std::atomic<bool> stepping{false};
  (*e)->serve([&] {
    engine::EngineStats s;
    if (stepping) ++steps;  // the engine moves between two samples
    s.steps_total = steps;
    s.num_running = static_cast<int32_t>(running);
    return s;
  });
  EXPECT_TRUE(eventually_status(port, "200 healthy", 2s)) << status_of(port);
  running = 1;
  stepping = true;
  EXPECT_TRUE(eventually_status(port, "200 busy", 2s)) << status_of(port);
  std::this_thread::sleep_for(500ms);  // longer than the hang timeout, stepping all along
  EXPECT_EQ(status_of(port), "200 busy");
  stepping = false;  // stuck with work: hung once 300 ms pass without a step
  EXPECT_TRUE(eventually_status(port, "503 hung", 2s)) << status_of(port);
  stepping = true;
  EXPECT_TRUE(eventually_status(port, "200 busy", 2s)) << status_of(port);

  EXPECT_EQ(get(port, "/nope").first, 404);
  EXPECT_EQ(http(port, "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").first, 405);
  // A client that connects and says nothing does not hold up the next probe, and is dropped.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(status_of(port), "200 busy");
  timeval tv{5, 0};
  ::setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c = 0;
  EXPECT_EQ(::recv(silent, &c, 1, 0), 0) << "closed by the endpoint after its read timeout";
  ::close(silent);

  (*e)->draining();
  EXPECT_EQ(status_of(port), "503 draining");
  const int64_t frozen = steps;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(steps.load(), frozen) << "a draining endpoint no longer reads the engine";
}

TEST(TeHealthEndpointTest, RefusesABadPortOrTimeout) {
  EXPECT_FALSE(TeHealthEndpoint::start("127.0.0.1", 70000, 300ms).ok());
  EXPECT_FALSE(TeHealthEndpoint::start("127.0.0.1", 0, 0ms).ok());
  EXPECT_FALSE(TeHealthEndpoint::start("not-an-address", 0, 300ms).ok());
}

}  // namespace
}  // namespace keel::cluster
