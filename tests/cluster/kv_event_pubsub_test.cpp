// KvEventPublisher and KvEventSubscriber on loopback (ports chosen by the OS): vLLM's framing on
// the PUB and ROUTER sockets, in-order delivery, a late subscriber filled from the replay buffer,
// loss beyond the buffer, a quiet source's catch-up (alone, and racing a live stream), several
// publishers, a publisher restart, bounded shutdown.
#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/kv_events/kv_event_codec.h"
#include "cluster/kv_events/kv_event_publisher.h"
#include "cluster/kv_events/kv_event_subscriber.h"
#include "net/zmq_socket.h"
#include "support/test_support.h"

namespace keel::cluster {
namespace {

using keel::testing::eventually;
using std::chrono::milliseconds;

KvEventBatch batch_with_ts(double ts) {
  KvEventBatch b;
  b.ts = ts;
  b.events.emplace_back(BlockRemoved{{static_cast<uint64_t>(ts)}, "pool"});
  return b;
}

std::unique_ptr<KvEventPublisher> start_publisher(KvEventPublisherConfig c = {}) {
  auto p = KvEventPublisher::start(std::move(c));
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  return p.ok() ? std::move(p).value() : nullptr;
}

// What a subscriber delivered, per TE.
class Collector {
 public:
  KvEventCallback callback() {
    return [this](const std::string& te, int64_t seq, const KvEventBatch& b) {
      std::lock_guard lock(mu_);
      got_.push_back({te, seq, b});
    };
  }
  struct Item {
    std::string te;
    int64_t seq;
    KvEventBatch batch;
  };
  std::vector<Item> items() {
    std::lock_guard lock(mu_);
    return got_;
  }
  size_t count(const std::string& te) {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const Item& i : got_) n += i.te == te ? 1 : 0;
    return n;
  }
  std::vector<int64_t> seqs(const std::string& te) {
    std::lock_guard lock(mu_);
    std::vector<int64_t> out;
    for (const Item& i : got_) {
      if (i.te == te) out.push_back(i.seq);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<Item> got_;
};

std::unique_ptr<KvEventSubscriber> subscribe(std::vector<KvEventSource> sources, Collector& c,
                                             int64_t start_seq = 0, int32_t catch_up_ms = 500) {
  KvEventSubscriberConfig config;
  config.sources = std::move(sources);
  config.start_seq = start_seq;
  config.catch_up_ms = catch_up_ms;
  auto s = KvEventSubscriber::start(std::move(config), c.callback());
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

KvEventSource source_of(const std::string& te, const KvEventPublisher& p) {
  return {te, p.endpoint(), p.replay_endpoint()};
}

// Publishes batches (ts = seq) until the collector has delivered one from `te` (the SUB socket
// has joined), then up to `total`; returns the number published.
int64_t publish_until_joined(KvEventPublisher& p, Collector& c, const std::string& te,
                             int64_t first, int64_t total) {
  int64_t next = first;
  while (c.count(te) == 0 && next < 100000) {
    EXPECT_TRUE(p.publish(batch_with_ts(static_cast<double>(next++))));
    std::this_thread::sleep_for(milliseconds(5));
  }
  while (next < total) EXPECT_TRUE(p.publish(batch_with_ts(static_cast<double>(next++))));
  return next;
}

std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST(KvEventPublisherTest, SendsVllmFramingAndAnswersReplay) {
  KvEventPublisherConfig config;
  config.topic = "kv@te1";
  config.data_parallel_rank = 2;
  auto pub = start_publisher(config);
  ASSERT_NE(pub, nullptr);
  EXPECT_NE(pub->endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  EXPECT_EQ(pub->endpoint().find(":0"), std::string::npos) << pub->endpoint();

  net::ZmqContext ctx;
  auto sub = net::ZmqSocket::open(ctx, ZMQ_SUB);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(sub->set_bytes(ZMQ_SUBSCRIBE, "").ok());
  ASSERT_TRUE(sub->connect(pub->endpoint()).ok());
  std::optional<std::vector<std::string>> msg;
  ASSERT_TRUE(eventually([&] {
    pub->publish(batch_with_ts(1.0));
    msg = sub->wait_readable(20) ? sub->try_recv() : std::nullopt;
    return msg.has_value();
  }));
  ASSERT_EQ(msg->size(), 3u);  // [topic, seq, payload]
  EXPECT_EQ((*msg)[0], "kv@te1");
  ASSERT_EQ((*msg)[1].size(), 8u);
  const int64_t seq = *net::decode_seq((*msg)[1]);
  EXPECT_EQ((*msg)[1], net::encode_seq(seq));
  EXPECT_EQ(net::encode_seq(258), std::string("\0\0\0\0\0\0\x01\x02", 8));
  auto decoded = decode_kv_event_batch(
      std::span(reinterpret_cast<const uint8_t*>((*msg)[2].data()), (*msg)[2].size()));
  ASSERT_TRUE(decoded.ok());
  KvEventBatch want = batch_with_ts(1.0);
  want.data_parallel_rank = 2;  // stamped by the publisher
  EXPECT_EQ(*decoded, want);

  // Replay from seq 1 (a DEALER sends the empty delimiter a REQ socket would).
  ASSERT_TRUE(eventually([&] { return pub->stats().published > seq; }));
  const int64_t published = pub->stats().published;
  auto dealer = net::ZmqSocket::open(ctx, ZMQ_DEALER);
  ASSERT_TRUE(dealer.ok());
  ASSERT_TRUE(dealer->connect(pub->replay_endpoint()).ok());
  ASSERT_TRUE(dealer->send({"", net::encode_seq(1)}));
  std::vector<int64_t> replayed;
  bool ended = false;
  while (!ended && dealer->wait_readable(2000)) {
    while (auto r = dealer->try_recv()) {
      ASSERT_EQ(r->size(), 3u);
      EXPECT_EQ((*r)[0], "");
      const int64_t s = *net::decode_seq((*r)[1]);
      if (s == -1) {
        EXPECT_EQ((*r)[2], "");
        ended = true;
        break;
      }
      replayed.push_back(s);
    }
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(replayed, iota(1, published));
  EXPECT_EQ(pub->stats().replay_requests, 1);
}

TEST(KvEventPubSubTest, DeliversInOrder) {
  auto pub = start_publisher();
  ASSERT_NE(pub, nullptr);
  Collector c;
  auto sub = subscribe({source_of("te1", *pub)}, c);
  ASSERT_NE(sub, nullptr);
  const int64_t n = publish_until_joined(*pub, c, "te1", 0, 300);
  ASSERT_TRUE(eventually([&] { return c.count("te1") == static_cast<size_t>(n); }));
  EXPECT_EQ(c.seqs("te1"), iota(0, n));
  for (const Collector::Item& i : c.items()) EXPECT_EQ(i.batch.ts, static_cast<double>(i.seq));
  EXPECT_EQ(sub->stats().lost, 0);
  EXPECT_EQ(sub->stats().decode_errors, 0);
}

TEST(KvEventPubSubTest, LateSubscriberGetsTheHistoryFromReplay) {
  auto pub = start_publisher();
  ASSERT_NE(pub, nullptr);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(pub->publish(batch_with_ts(i)));
  ASSERT_TRUE(eventually([&] { return pub->stats().published == 50; }));
  Collector c;
  auto sub = subscribe({source_of("te1", *pub)}, c);
  ASSERT_NE(sub, nullptr);
  const int64_t n = publish_until_joined(*pub, c, "te1", 50, 80);
  ASSERT_TRUE(eventually([&] { return c.count("te1") == static_cast<size_t>(n); }));
  EXPECT_EQ(c.seqs("te1"), iota(0, n));
  EXPECT_GE(sub->stats().replayed, 50);
  EXPECT_EQ(sub->stats().lost, 0);
}

// The slow joiner: one batch published before the subscriber existed, then nothing. No later
// batch reveals the gap, so only the quiet source's catch-up delivers it.
TEST(KvEventPubSubTest, AQuietSourcesEarlierBatchArrivesByCatchUp) {
  auto pub = start_publisher();
  ASSERT_NE(pub, nullptr);
  ASSERT_TRUE(pub->publish(batch_with_ts(0)));
  ASSERT_TRUE(eventually([&] { return pub->stats().published == 1; }));
  Collector c;
  auto sub = subscribe({source_of("te1", *pub)}, c, 0, /*catch_up_ms=*/100);
  ASSERT_NE(sub, nullptr);
  ASSERT_TRUE(eventually([&] { return c.count("te1") == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(c.seqs("te1"), iota(0, 1));
  EXPECT_EQ(sub->stats().replayed, 1);
  EXPECT_EQ(sub->stats().lost, 0);

  // Without catch-ups it stays undelivered.
  Collector quiet;
  auto off = subscribe({source_of("te1", *pub)}, quiet, 0, /*catch_up_ms=*/0);
  ASSERT_NE(off, nullptr);
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(quiet.count("te1"), 0u);
}

// Catch-ups racing a live stream (every 1 ms of quiet): each batch once, in order; a live batch a
// catch-up already gave is a duplicate, never a restart.
TEST(KvEventPubSubTest, CatchUpsRacingALiveStreamDeliverEachBatchOnce) {
  auto pub = start_publisher();
  ASSERT_NE(pub, nullptr);
  Collector c;
  auto sub = subscribe({source_of("te1", *pub)}, c, 0, /*catch_up_ms=*/1);
  ASSERT_NE(sub, nullptr);
  int64_t n = 0;
  for (; n < 300; ++n) {
    ASSERT_TRUE(pub->publish(batch_with_ts(static_cast<double>(n))));
    std::this_thread::sleep_for(std::chrono::microseconds(500 + 500 * (n % 4)));
  }
  ASSERT_TRUE(eventually([&] { return c.count("te1") == static_cast<size_t>(n); }));
  std::this_thread::sleep_for(milliseconds(100));  // any late duplicate would land now
  EXPECT_EQ(c.seqs("te1"), iota(0, n));
  EXPECT_EQ(sub->stats().restarts, 0);
  EXPECT_EQ(sub->stats().lost, 0);
  std::printf("[ %lld batches: %lld replayed, %lld live duplicates dropped ]\n",
              static_cast<long long>(n), static_cast<long long>(sub->stats().replayed),
              static_cast<long long>(sub->stats().duplicates));
}

// A live batch a catch-up has already delivered (in flight meanwhile) is dropped as a duplicate,
// not taken for a publisher restart. A raw PUB and ROUTER stand in for the publisher, so the
// order is exact: the catch-up answers seqs 0 and 1, then seq 1 arrives live, then seq 2.
TEST(KvEventPubSubTest, ALiveBatchACatchUpAlreadyGaveIsADuplicate) {
  net::ZmqContext ctx;
  auto pub = net::ZmqSocket::open(ctx, ZMQ_PUB);
  auto router = net::ZmqSocket::open(ctx, ZMQ_ROUTER);
  ASSERT_TRUE(pub.ok() && router.ok());
  ASSERT_TRUE(pub->bind("tcp://127.0.0.1:*").ok());
  ASSERT_TRUE(router->bind("tcp://127.0.0.1:*").ok());
  Collector c;
  auto sub = subscribe({{"te1", pub->last_endpoint(), router->last_endpoint()}}, c, 0, 50);
  ASSERT_NE(sub, nullptr);
  const auto payload = [](double ts) {
    const Bytes b = encode_kv_event_batch(batch_with_ts(ts));
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  ASSERT_TRUE(router->wait_readable(5000)) << "no catch-up came";
  std::optional<std::vector<std::string>> req = router->try_recv();  // [identity, "", start]
  ASSERT_TRUE(req.has_value() && req->size() == 3);
  EXPECT_EQ(net::decode_seq((*req)[2]), 0);
  const std::string id = (*req)[0];
  ASSERT_TRUE(router->send({id, "", net::encode_seq(0), payload(0)}));
  ASSERT_TRUE(router->send({id, "", net::encode_seq(1), payload(1)}));
  ASSERT_TRUE(router->send({id, "", net::encode_seq(-1), ""}));
  ASSERT_TRUE(eventually([&] { return c.count("te1") == 2; }));
  // Seq 1 live, until the SUB socket has surely joined (each arrival is one duplicate).
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(pub->send({"", net::encode_seq(1), payload(1)}));
    std::this_thread::sleep_for(milliseconds(10));
    return sub->stats().duplicates >= 1;
  }));
  ASSERT_TRUE(pub->send({"", net::encode_seq(2), payload(2)}));
  ASSERT_TRUE(eventually([&] { return c.count("te1") == 3; }));
  EXPECT_EQ(c.seqs("te1"), iota(0, 3));
  EXPECT_EQ(sub->stats().restarts, 0) << "a duplicate taken for a restart";
  EXPECT_EQ(sub->stats().lost, 0);
}

TEST(KvEventPubSubTest, HistoryBeyondTheReplayBufferIsCountedLost) {
  KvEventPublisherConfig config;
  config.buffer_steps = 10;
  auto pub = start_publisher(config);
  ASSERT_NE(pub, nullptr);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(pub->publish(batch_with_ts(i)));
  ASSERT_TRUE(eventually([&] { return pub->stats().published == 50; }));
  Collector c;
  auto sub = subscribe({source_of("te1", *pub)}, c);
  ASSERT_NE(sub, nullptr);
  const int64_t n = publish_until_joined(*pub, c, "te1", 50, 55);
  ASSERT_TRUE(eventually([&] { return c.count("te1") > 0 && c.seqs("te1").back() == n - 1; }));
  const std::vector<int64_t> seqs = c.seqs("te1");
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(seqs, iota(seqs.front(), n));  // in order, no holes after the first
  EXPECT_GE(seqs.front(), 40);             // the buffer held only the last 10
  EXPECT_EQ(sub->stats().lost, seqs.front());
}

TEST(KvEventPubSubTest, SeveralPublishersEachInOrder) {
  auto a = start_publisher();
  auto b = start_publisher();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  Collector c;
  auto sub = subscribe({source_of("a", *a), source_of("b", *b)}, c);
  ASSERT_NE(sub, nullptr);
  int64_t nb = 0;
  std::thread other([&] { nb = publish_until_joined(*b, c, "b", 0, 200); });
  const int64_t na = publish_until_joined(*a, c, "a", 0, 200);
  other.join();
  ASSERT_TRUE(eventually([&] {
    return c.count("a") == static_cast<size_t>(na) && c.count("b") == static_cast<size_t>(nb);
  }));
  EXPECT_EQ(c.seqs("a"), iota(0, na));
  EXPECT_EQ(c.seqs("b"), iota(0, nb));
}

TEST(KvEventPubSubTest, PublisherRestartClearsAndStartsOver) {
  auto first = start_publisher();
  ASSERT_NE(first, nullptr);
  const KvEventSource src = source_of("te1", *first);
  Collector c;
  auto sub = subscribe({src}, c);
  ASSERT_NE(sub, nullptr);
  // Long enough that the new stream is still below it when the subscriber reconnects (a restart
  // is recognized by a seq below the next expected one).
  const int64_t n = publish_until_joined(*first, c, "te1", 0, 1000);
  ASSERT_TRUE(eventually([&] { return c.count("te1") == static_cast<size_t>(n); }));
  first.reset();

  KvEventPublisherConfig again;  // the same endpoints, numbering from 0
  again.endpoint = src.endpoint;
  again.replay_endpoint = src.replay_endpoint;
  auto second = start_publisher(again);
  ASSERT_NE(second, nullptr);
  // Publish until the subscriber sees the restart; seqs below n look like a restart at once.
  int64_t m = 0;
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(second->publish(batch_with_ts(0)));
    ++m;
    std::this_thread::sleep_for(milliseconds(5));
    return sub->stats().restarts == 1;
  }));
  for (int i = 0; i < 5; ++i, ++m) EXPECT_TRUE(second->publish(batch_with_ts(0)));
  ASSERT_TRUE(eventually([&] { return c.count("te1") == static_cast<size_t>(n + 1 + m); }));
  const std::vector<Collector::Item> items = c.items();
  ASSERT_EQ(items[static_cast<size_t>(n)].seq, -1);
  EXPECT_TRUE(
      std::holds_alternative<AllBlocksCleared>(items[static_cast<size_t>(n)].batch.events[0]));
  std::vector<int64_t> after;
  for (size_t i = static_cast<size_t>(n) + 1; i < items.size(); ++i) after.push_back(items[i].seq);
  EXPECT_EQ(after, iota(0, m));
}

TEST(KvEventPubSubTest, ShutdownIsBoundedAndFinal) {
  auto pub = start_publisher();
  ASSERT_NE(pub, nullptr);
  Collector c;
  auto sub = subscribe({source_of("te1", *pub)}, c);
  ASSERT_NE(sub, nullptr);
  publish_until_joined(*pub, c, "te1", 0, 2000);
  const auto t0 = std::chrono::steady_clock::now();
  pub->shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_FALSE(pub->publish(batch_with_ts(0)));
  EXPECT_EQ(pub->stats().dropped, 1);
  const auto t1 = std::chrono::steady_clock::now();
  sub->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(1));
  sub->stop();  // idempotent
  // A subscriber of a publisher that never existed stops as quickly.
  Collector none;
  auto orphan = subscribe({{"gone", "tcp://127.0.0.1:1", "tcp://127.0.0.1:1"}}, none);
  ASSERT_NE(orphan, nullptr);
  const auto t2 = std::chrono::steady_clock::now();
  orphan.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t2, std::chrono::seconds(1));
}

TEST(KvEventPubSubTest, ConfigsValidate) {
  KvEventPublisherConfig p;
  p.buffer_steps = 0;
  EXPECT_FALSE(KvEventPublisher::start(p).ok());
  KvEventPublisherConfig bad_endpoint;
  bad_endpoint.endpoint = "nonsense://x";
  EXPECT_FALSE(KvEventPublisher::start(bad_endpoint).ok());
  Collector c;
  EXPECT_FALSE(KvEventSubscriber::start({}, c.callback()).ok());
  KvEventSubscriberConfig no_cb;
  no_cb.sources.push_back({"te", "tcp://127.0.0.1:1", ""});
  EXPECT_FALSE(KvEventSubscriber::start(no_cb, nullptr).ok());
}

}  // namespace
}  // namespace keel::cluster
