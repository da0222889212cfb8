// Hostile clients against a real Server (fake engine): connections that trickle a request header
// a byte at a time from one client address cannot lock another client out (the per-client cap
// refuses them past their share, the header deadline closes the admitted ones although bytes
// keep coming), and an oversize body sent fast gets its 413 — read by the client after it has
// sent everything — rather than a connection reset, every time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "server_harness.h"
#include "support/test_support.h"

namespace keel::server::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Sends one more byte of a never-ending request header on each of `clients` every 50 ms until
// `stop`.
std::thread trickle(std::vector<std::unique_ptr<TestHttpClient>>* clients,
                    std::atomic<bool>* stop) {
  return std::thread([clients, stop] {
    const std::string header = "ET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (size_t k = 0; !stop->load(); ++k) {
      const std::string byte(1, k < header.size() ? header[k] : 'a');
      for (auto& c : *clients) c->send_raw(byte);  // refused and closed ones fail: ignored
      std::this_thread::sleep_for(50ms);
    }
  });
}

TEST(HostileClientsTest, TricklingConnectionsFromOneClientDoNotLockOthersOut) {
  ServerConfig config = test_config();
  config.max_connections = 24;
  config.max_connections_per_client = 8;
  config.header_timeout_ms = 1000;
  ServerHarness h(config);
  // 30 connections from 127.0.0.2 (more than the whole server's cap), each trickling a header:
  // the first 8 are in a request (not idle) before the others come.
  std::vector<std::unique_ptr<TestHttpClient>> slow;
  for (int i = 0; i < 30; ++i) {
    if (i == 8) {
      ASSERT_TRUE(keel::testing::eventually([&] {
        return h.server().num_connections() == 8 && h.server().num_idle_connections() == 0;
      }));
    }
    slow.push_back(std::make_unique<TestHttpClient>(h.port(), 5000, "127.0.0.2"));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->send_raw("G"));
  }
  const Clock::time_point start = Clock::now();
  std::atomic<bool> stop{false};
  std::thread trickler = trickle(&slow, &stop);
  // The server holds at most the client's share of them ...
  std::this_thread::sleep_for(200ms);
  EXPECT_LE(h.server().num_connections(), 8u);
  // ... and the last one was refused with a 429 naming the cap.
  std::optional<HttpResult> refused = slow.back()->read_response();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 429) << refused->body;
  EXPECT_EQ(refused->json()["error"]["code"], "too_many_connections");
  // Another client (127.0.0.1) is served at once, several times over.
  double worst_ms = 0;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point t0 = Clock::now();
    EXPECT_EQ(http_request(h.port(), "GET", "/health").status, 200);
    worst_ms = std::max(worst_ms, ms_since(t0));
  }
  EXPECT_LT(worst_ms, 1000.0);
  // The header deadline (1 s from a request's first byte) closes every admitted trickler although
  // its bytes keep coming (the idle timeout, 60 s, would not).
  EXPECT_TRUE(keel::testing::eventually([&] { return h.server().num_connections() == 0; }, 5s))
      << h.server().num_connections() << " still open";
  const double closed_ms = ms_since(start);
  stop = true;
  trickler.join();
  std::printf("another client served in <= %.1f ms; tricklers all closed after %.0f ms\n", worst_ms,
              closed_ms);
  EXPECT_GE(closed_ms, 800.0);  // not before the deadline
}

TEST(HostileClientsTest, OversizeBodiesSentFastGetThe413NotAReset) {
  ServerConfig config = test_config();
  config.max_body_bytes = size_t{1} << 20;
  ServerHarness h(config);
  const std::string body(size_t{16} << 20, 'a');  // far more than the socket buffers hold
  int failures = 0;
  for (int round = 0; round < 6; ++round) {
    TestHttpClient c(h.port());
    std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
    if (round % 2 == 0) {  // refused on Content-Length, before the body is read
      request +=
          "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n" + body;
    } else {  // chunked: refused when the body parser crosses the limit
      request += "Transfer-Encoding: chunked\r\n\r\n";
      for (size_t i = 0; i < 16; ++i) request += "100000\r\n" + body.substr(0, 0x100000) + "\r\n";
      request += "0\r\n\r\n";
    }
    // As most clients do: send the whole request, then read the answer.
    const bool sent = c.send_raw(request);
    std::optional<HttpResult> r = c.read_response();
    if (!sent || !r.has_value() || r->status != 413) {
      ++failures;
      ADD_FAILURE() << "round " << round << ": sent " << sent << ", status " << (r ? r->status : 0);
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(http_request(h.port(), "GET", "/health").status, 200);
}

}  // namespace
}  // namespace keel::server::testing
