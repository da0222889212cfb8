// FleetClient's activator against a fake job executor (a Listener answering submit_job calls):
// while the JE has no ready TE, submit_async returns at once and the request is held (num_held);
// once a TE is ready every held request is placed, oldest first; past the activation timeout a
// held request is refused with Unavailable naming the timeout; submit() waits out a hold. A JE
// that never answers holds no caller: submit_async returns at once and ends at the call timeout.
#include "cluster/gateway/fleet_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "cluster/protocol/messages.h"
#include "net/listener.h"
#include "support/test_support.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Answers submit_job with Unavailable until ready, then with ok.
class FakeJe {
 public:
  FakeJe() {
    Result<std::unique_ptr<net::Listener>> l = net::Listener::start(
        "127.0.0.1", 0, [this](net::Link& link, net::Message m) { on_message(link, std::move(m)); },
        nullptr,
        [this](std::shared_ptr<net::Link> link) {
          std::lock_guard lock(mu_);
          links_.push_back(std::move(link));
        });
    EXPECT_TRUE(l.ok()) << l.status().to_string();
    if (l.ok()) listener_ = std::move(*l);
  }
  ~FakeJe() {
    if (listener_) listener_->stop();
    std::lock_guard lock(mu_);
    for (auto& link : links_) link->close();
  }
  [[nodiscard]] std::string address() const { return listener_->address(); }
  std::atomic<bool> ready{false};
  std::atomic<bool> silent{false};  // never answers a submission
  std::atomic<int> submits{0};

 private:
  void on_message(net::Link& link, net::Message m) {
    if (m.type != msg::kSubmitJob) return;
    ++submits;
    if (silent) return;
    const Status s = ready ? Status() : Status::unavailable("no routable task executor");
    link.reply(m.body.value("call_id", int64_t{0}), status_body(s));
  }

  std::unique_ptr<net::Listener> listener_;
  std::mutex mu_;
  std::vector<std::shared_ptr<net::Link>> links_;
};

class NullSink final : public engine::OutputSink {
 public:
  void on_event(engine::TokenEvent) override {}
};

engine::GenerationRequest prompt() {
  engine::GenerationRequest r;
  r.prompt_tokens = {1, 2, 3};
  r.max_tokens = 4;
  return r;
}

std::unique_ptr<FleetClient> start_client(const FakeJe& je, std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds call_timeout = 10000ms) {
  FleetClientConfig c;
  c.je_addresses = {je.address()};
  c.call_timeout = call_timeout;
  c.activation_timeout = timeout;
  c.wait_for_te = false;
  c.max_model_len = 256;
  c.max_waiting = 64;
  Result<std::unique_ptr<FleetClient>> client = FleetClient::start(c);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? std::move(*client) : nullptr;
}

TEST(FleetClientActivatorTest, HeldRequestsReturnAtOnceAndArePlacedInOrder) {
  FakeJe je;
  std::unique_ptr<FleetClient> client = start_client(je, 3000ms);
  ASSERT_NE(client, nullptr);
  constexpr int kHeld = 16;
  std::mutex mu;
  std::vector<engine::RequestKey> placed;
  std::atomic<int> failed{0};
  for (int i = 0; i < kHeld; ++i) {
    const Clock::time_point t0 = Clock::now();
    client->submit_async(prompt(), std::make_shared<NullSink>(),
                         [&](Result<engine::RequestKey> key) {
                           if (!key.ok()) {
                             ++failed;
                             return;
                           }
                           std::lock_guard lock(mu);
                           placed.push_back(*key);
                         });
    // One JE round trip, not the hold.
    ASSERT_LT(Clock::now() - t0, 500ms) << "submit_async waited out the hold";
  }
  // Each is held once the JE's refusal comes back (on the JE link's thread).
  ASSERT_TRUE(keel::testing::eventually([&] { return client->num_held() == kHeld; }, 2000ms));
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(placed.empty());
  }
  je.ready = true;
  ASSERT_TRUE(keel::testing::eventually(
      [&] {
        std::lock_guard lock(mu);
        return placed.size() == static_cast<size_t>(kHeld);
      },
      2000ms));
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(client->num_held(), 0);
  std::lock_guard lock(mu);
  EXPECT_TRUE(std::is_sorted(placed.begin(), placed.end()));  // oldest first
}

TEST(FleetClientActivatorTest, PastTheActivationTimeoutAHeldRequestIsRefused) {
  FakeJe je;
  std::unique_ptr<FleetClient> client = start_client(je, 150ms);
  ASSERT_NE(client, nullptr);
  std::atomic<bool> done{false};
  Status refusal;
  const Clock::time_point t0 = Clock::now();
  client->submit_async(prompt(), std::make_shared<NullSink>(), [&](Result<engine::RequestKey> k) {
    refusal = k.ok() ? Status() : k.status();
    done = true;
  });
  ASSERT_TRUE(keel::testing::eventually([&] { return done.load(); }, 3000ms));
  EXPECT_GE(Clock::now() - t0, 150ms);
  EXPECT_EQ(refusal.code(), StatusCode::kUnavailable);
  EXPECT_NE(refusal.message().find("activation timeout"), std::string::npos) << refusal.message();
  EXPECT_EQ(client->num_held(), 0);
  EXPECT_EQ(client->num_jobs(), 0u);
  EXPECT_GE(je.submits, 2);  // retried while held
}

TEST(FleetClientActivatorTest, SubmitWaitsOutAHold) {
  FakeJe je;
  std::unique_ptr<FleetClient> client = start_client(je, 3000ms);
  ASSERT_NE(client, nullptr);
  std::thread wake([&] {
    std::this_thread::sleep_for(100ms);
    je.ready = true;
  });
  Result<engine::RequestKey> key = client->submit(prompt(), std::make_shared<NullSink>());
  wake.join();
  EXPECT_TRUE(key.ok()) << key.status().to_string();
  EXPECT_EQ(client->num_held(), 0);
}

TEST(FleetClientAsyncTest, ASilentJeHoldsNoCaller) {
  FakeJe je;
  je.silent = true;
  std::unique_ptr<FleetClient> client = start_client(je, 0ms, 300ms);
  ASSERT_NE(client, nullptr);
  constexpr int kRequests = 64;
  std::atomic<int> unavailable{0};
  std::atomic<int> ended{0};
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < kRequests; ++i) {
    client->submit_async(prompt(), std::make_shared<NullSink>(),
                         [&](Result<engine::RequestKey> key) {
                           if (!key.ok() && key.status().code() == StatusCode::kUnavailable) {
                             ++unavailable;
                           }
                           ++ended;
                         });
  }
  // All 64 were handed over without waiting for the JE (one call timeout each would be 19 s).
  EXPECT_LT(Clock::now() - t0, 250ms);
  EXPECT_EQ(ended.load(), 0);
  ASSERT_TRUE(keel::testing::eventually([&] { return ended.load() == kRequests; }, 5000ms));
  EXPECT_GE(Clock::now() - t0, 300ms);
  EXPECT_EQ(unavailable.load(), kRequests);
  EXPECT_EQ(client->num_jobs(), 0u);
}

}  // namespace
}  // namespace keel::cluster
