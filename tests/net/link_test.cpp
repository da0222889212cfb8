// Links on loopback: calls are answered by call_id, messages arrive in order, on_written runs
// after the frame left, a closed peer fails pending calls at once (no hang), an oversize or
// garbage frame closes the link, a peer that is not keel (an HTTP server) fails a call with a
// message naming it, a listener stops promptly, and a connect to a peer that drops SYNs gives up
// at its timeout. Asynchronous calls: many in flight, each answered once; one past its deadline
// ends then; pending ones fail when the link closes, and one on a closed link fails inline.
#include "net/link.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "net/link_server.h"
#include "net/listener.h"

namespace keel::net {
namespace {

using namespace std::chrono_literals;

bool eventually_closed(const Link& link) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!link.closed() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  return link.closed();
}

// An echo server: "ping" calls are answered with their "n" + 1; other messages are recorded.
struct EchoServer {
  EchoServer() {
    auto l = LinkServer::start(
        "127.0.0.1", 0,
        [this](Link& link, Message m) {
          if (m.type == "ping") {
            link.reply(m.body["call_id"].get<int64_t>(), Json{{"n", m.body["n"].get<int>() + 1}});
            return;
          }
          std::lock_guard lock(mu);
          seen.push_back(m.body["i"].get<int>());
        },
        [this](Link&) { closes.fetch_add(1); });
    EXPECT_TRUE(l.ok()) << l.status().message();
    listener = std::move(*l);
  }
  ~EchoServer() { listener->stop(); }
  std::unique_ptr<LinkServer> listener;
  std::mutex mu;
  std::vector<int> seen;
  std::atomic<int> closes{0};
};

TEST(LinkTest, CallsAreAnsweredAndMessagesArriveInOrder) {
  EchoServer server;
  auto link = Link::connect(server.listener->address(), 2000ms, nullptr, nullptr);
  ASSERT_TRUE(link.ok()) << link.status().message();
  for (int n = 0; n < 20; ++n) {
    Result<Json> r = (*link)->call(Message{"ping", Json{{"n", n}}}, 2000ms);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)["n"], n + 1);
  }
  std::atomic<int> written{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*link)->send(Message{"note", Json{{"i", i}}}, [&] { written.fetch_add(1); }));
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::lock_guard lock(server.mu);
    if (server.seen.size() == 100) break;
  }
  std::lock_guard lock(server.mu);
  ASSERT_EQ(server.seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(server.seen[i], i);
  EXPECT_EQ(written.load(), 100);
}

TEST(LinkTest, PendingCallFailsWhenThePeerCloses) {
  // The accept thread hands the link over; the reader may deliver before that, so both are
  // waited for.
  std::promise<std::shared_ptr<Link>> accepted;
  std::promise<void> got;
  auto l = Listener::start(
      "127.0.0.1", 0, [&](Link&, Message) { got.set_value(); }, nullptr,
      [&](std::shared_ptr<Link> link) { accepted.set_value(std::move(link)); });
  ASSERT_TRUE(l.ok());
  std::atomic<bool> closed{false};
  auto link = Link::connect((*l)->address(), 2000ms, nullptr, [&](Link&) { closed = true; });
  ASSERT_TRUE(link.ok());
  std::thread closer([&] {
    got.get_future().wait();
    accepted.get_future().get()->close();  // the peer never answers: it hangs up
  });
  const auto start = std::chrono::steady_clock::now();
  Result<Json> r = (*link)->call(Message{"ping", Json{{"n", 1}}}, 10000ms);
  closer.join();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE((*link)->closed());
  (*l)->stop();
}

TEST(LinkTest, CallTimesOutWithoutAReply) {
  auto l = Listener::start(
      "127.0.0.1", 0, [](Link&, Message) {}, nullptr,
      [](std::shared_ptr<Link> link) { (void)link; });
  ASSERT_TRUE(l.ok());
  auto link = Link::connect((*l)->address(), 2000ms, nullptr, nullptr);
  ASSERT_TRUE(link.ok());
  Result<Json> r = (*link)->call(Message{"ping", Json{{"n", 1}}}, 100ms);
  EXPECT_FALSE(r.ok());
  (*l)->stop();
}

// call_async: many calls in flight at once, each answered once, on the link's reader thread.
TEST(LinkTest, AsyncCallsAreAnsweredOnceEachWithoutWaiting) {
  EchoServer server;
  auto link = Link::connect(server.listener->address(), 2000ms, nullptr, nullptr);
  ASSERT_TRUE(link.ok()) << link.status().message();
  constexpr int kCalls = 200;
  std::mutex mu;
  std::vector<int> answers(kCalls, -1);
  std::atomic<int> done{0};
  std::promise<void> all;
  for (int n = 0; n < kCalls; ++n) {
    (*link)->call_async(Message{"ping", Json{{"n", n}}}, 5000ms, [&, n](Result<Json> r) {
      {
        std::lock_guard lock(mu);
        answers[n] = r.ok() ? (*r)["n"].get<int>() : -2;
      }
      if (done.fetch_add(1) + 1 == kCalls) all.set_value();
    });
  }
  ASSERT_EQ(all.get_future().wait_for(10s), std::future_status::ready);
  std::this_thread::sleep_for(50ms);  // a second run of any continuation would show here
  EXPECT_EQ(done.load(), kCalls);
  for (int n = 0; n < kCalls; ++n) EXPECT_EQ(answers[n], n + 1) << n;
}

// A peer that never answers: the continuation runs at its deadline (the writer minds it), and
// an answered call beside it is not held up.
TEST(LinkTest, AsyncCallTimesOutAtItsDeadline) {
  std::shared_ptr<Link> peer;
  std::mutex mu;
  auto l = Listener::start(
      "127.0.0.1", 0,
      [](Link& link, Message m) {
        if (m.body.value("answer", false)) link.reply(m.body["call_id"].get<int64_t>(), Json{});
      },
      nullptr,
      [&](std::shared_ptr<Link> link) {
        std::lock_guard lock(mu);
        peer = std::move(link);
      });
  ASSERT_TRUE(l.ok());
  auto link = Link::connect((*l)->address(), 2000ms, nullptr, nullptr);
  ASSERT_TRUE(link.ok());
  const auto start = std::chrono::steady_clock::now();
  std::promise<std::pair<Status, std::chrono::steady_clock::duration>> silent, answered;
  (*link)->call_async(Message{"ping", Json{{"answer", false}}}, 300ms, [&](Result<Json> r) {
    silent.set_value({r.status(), std::chrono::steady_clock::now() - start});
  });
  (*link)->call_async(Message{"ping", Json{{"answer", true}}}, 5000ms, [&](Result<Json> r) {
    answered.set_value({r.status(), std::chrono::steady_clock::now() - start});
  });
  auto a = answered.get_future().get();
  EXPECT_TRUE(a.first.ok()) << a.first.message();
  auto s = silent.get_future();
  ASSERT_EQ(s.wait_for(5s), std::future_status::ready);
  auto [status, took] = s.get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("within 300 ms"), std::string::npos) << status.message();
  EXPECT_GE(took, 300ms);
  EXPECT_FALSE((*link)->closed());  // a late call does not close the link
  (*l)->stop();
  std::lock_guard lock(mu);
  if (peer) peer->close();
}

// Closed links: a pending async call fails when the peer hangs up; one made on a closed link
// fails inline.
TEST(LinkTest, AsyncCallsFailWhenTheLinkCloses) {
  std::promise<std::shared_ptr<Link>> accepted;
  std::promise<void> got;
  auto l = Listener::start(
      "127.0.0.1", 0, [&](Link&, Message) { got.set_value(); }, nullptr,
      [&](std::shared_ptr<Link> link) { accepted.set_value(std::move(link)); });
  ASSERT_TRUE(l.ok());
  auto link = Link::connect((*l)->address(), 2000ms, nullptr, nullptr);
  ASSERT_TRUE(link.ok());
  std::promise<Status> failed;
  (*link)->call_async(Message{"ping", Json{{"n", 1}}}, 10000ms,
                      [&](Result<Json> r) { failed.set_value(r.status()); });
  got.get_future().wait();
  accepted.get_future().get()->close();
  auto f = failed.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(eventually_closed(**link));
  bool inline_done = false;
  (*link)->call_async(Message{"ping", Json{{"n", 2}}}, 1000ms,
                      [&](Result<Json> r) { inline_done = !r.ok(); });
  EXPECT_TRUE(inline_done);
  (*l)->stop();
}

TEST(LinkTest, GarbageAndOversizeFramesCloseTheLink) {
  for (const std::vector<uint8_t>& frame : {std::vector<uint8_t>{0, 0, 0, 2, 0xc1, 0xc1},
                                            std::vector<uint8_t>{0x7f, 0xff, 0xff, 0xff}}) {
    EchoServer server;
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket raw(io);
    raw.connect({boost::asio::ip::make_address("127.0.0.1"), server.listener->port()});
    boost::asio::write(raw, boost::asio::buffer(frame));
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (server.closes.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(server.closes.load(), 1);
  }
}

TEST(LinkTest, FrameHeadsThatCannotBeKeelAreNamed) {
  const std::vector<uint8_t> http = {'H', 'T', 'T', 'P'};
  const Status s = check_frame_head(http, 0x48545450, std::nullopt, "/1.1 400 Bad Request\r\nX: y");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"HTTP/1.1 400 Bad Request\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("HTTP server"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("1213486160"), std::string::npos) << s.message();
  const std::vector<uint8_t> big = {0x10, 0, 0, 0};
  EXPECT_NE(check_frame_head(big, 0x10000000, std::nullopt).message().find("over the 64 MiB"),
            std::string::npos);
  const std::vector<uint8_t> ok = {0, 1, 0, 0};
  EXPECT_TRUE(check_frame_head(ok, 0x10000, std::nullopt).ok());
  EXPECT_TRUE(check_frame_head(ok, 0x10000, uint8_t{0x83}).ok());
  EXPECT_TRUE(check_frame_head(ok, 0x10000, uint8_t{0xde}).ok());
  EXPECT_FALSE(check_frame_head(ok, 0x10000, uint8_t{0xc1}).ok());
  // Every real frame round-trips through the check: an envelope opens a map.
  EXPECT_TRUE(check_frame_head(ok, 0x10000, encode_message(Message{"x", Json::object()})[0]).ok());
}

// `keel cluster scale` pointed at the gateway's HTTP port: the call fails at once, saying so.
TEST(LinkTest, ACallToAnHttpServerFailsNamingIt) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  std::thread server([&] {
    boost::asio::ip::tcp::socket peer(io);
    acceptor.accept(peer);
    std::array<char, 256> buf{};
    boost::system::error_code ec;
    (void)peer.read_some(boost::asio::buffer(buf), ec);  // the call's frame
    const std::string reply = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    boost::asio::write(peer, boost::asio::buffer(reply), ec);
    std::this_thread::sleep_for(200ms);
  });
  auto link = Link::connect("127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), 2000ms,
                            nullptr, nullptr);
  ASSERT_TRUE(link.ok());
  const auto start = std::chrono::steady_clock::now();
  Result<Json> r = (*link)->call(Message{"scale_out", Json::object()}, 10000ms);
  server.join();
  ASSERT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(r.status().message().find("not a keel cluster endpoint"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("HTTP/1.1 400 Bad Request"), std::string::npos);
  EXPECT_FALSE((*link)->close_reason().ok());
}

TEST(LinkTest, ConnectToNothingFailsWithinTheTimeout) {
  uint16_t port = 0;
  {
    auto l = Listener::start("127.0.0.1", 0, nullptr, nullptr, [](std::shared_ptr<Link>) {});
    ASSERT_TRUE(l.ok());
    port = (*l)->port();
  }  // closed: nothing listens there now
  const auto start = std::chrono::steady_clock::now();
  auto link = Link::connect("127.0.0.1:" + std::to_string(port), 300ms, nullptr, nullptr);
  EXPECT_FALSE(link.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_FALSE(Link::connect("nonsense", 100ms, nullptr, nullptr).ok());
}

// A peer that drops connection attempts (a cut-off host; here a listener whose accept queue is
// full, so the kernel drops further SYNs) is given up at the timeout, not after the kernel's SYN
// retries (minutes).
TEST(LinkTest, ConnectToAPeerThatDropsSynsGivesUpAtItsTimeout) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(listener, 0), 0);  // never accepts
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::vector<int> fillers;  // fill the accept queue: later SYNs are dropped
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  auto link =
      Link::connect("127.0.0.1:" + std::to_string(ntohs(a.sin_port)), 500ms, nullptr, nullptr);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(link.ok());
  EXPECT_LT(took, 3s) << "the connect outlived its 500 ms timeout";
  for (int fd : fillers) ::close(fd);
  ::close(listener);
}

}  // namespace
}  // namespace keel::net
