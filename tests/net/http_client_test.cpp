// net's HTTP client against a scripted HTTP/1.1 server on a free loopback port: the request as
// sent, heads and bodies (whole and chunked), the three deadline scopes, cancellation, a refused
// connection, a cut body, body limits and sink errors. Every wait is bounded.
#include "net/http_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace keel::net {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A server whose answer is a script run on the connection after it read the request. One thread
// accepts; each connection has its own thread; the destructor wakes and joins them all.
class ScriptedServer {
 public:
  struct Conn {
    tcp::socket& socket;
    ScriptedServer& server;
    void send(const std::string& bytes) {
      boost::system::error_code ec;
      asio::write(socket, asio::buffer(bytes), ec);
    }
    void pause(std::chrono::milliseconds d) { server.wait_stopped(d); }
  };
  using Script = std::function<void(Conn&)>;

  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    acceptor_.open(tcp::v4());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~ScriptedServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    tcp::socket wake(io_);  // unblocks accept()
    boost::system::error_code ec;
    wake.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
    accept_thread_.join();
    for (std::thread& t : conn_threads_) t.join();
  }

  [[nodiscard]] Url url(const std::string& target) const {
    Url u;
    u.host = "127.0.0.1";
    u.port = port_;
    u.target = target;
    return u;
  }
  // The last request read (method, target, fields and body), once one arrived.
  [[nodiscard]] http::request<http::string_body> last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  // Waits up to d, less if the server stops.
  void wait_stopped(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, d, [this] { return stopping_; });
  }

 private:
  void accept_loop() {
    for (;;) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      if (ec) continue;
      conn_threads_.emplace_back([this, s = std::move(socket)]() mutable { serve(s); });
    }
  }
  void serve(tcp::socket& socket) {
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> req;
    boost::system::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_ = req;
    }
    Conn conn{socket, *this};
    script_(conn);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  Script script_;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  uint16_t port_ = 0;
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                  // guarded by mu_
  http::request<http::string_body> last_;  // guarded by mu_
  std::vector<std::thread> conn_threads_;  // guarded by mu_ while the accept thread runs
};

std::string answer(const std::string& status_line, const std::string& fields,
                   const std::string& body) {
  return "HTTP/1.1 " + status_line + "\r\n" + fields +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

const HeadSink kReadBody = [](const HttpHead&) -> Result<AfterHead> {
  return AfterHead::kReadBody;
};

TEST(HttpClientTest, CallSendsTheRequestAndReturnsTheAnswer) {
  ScriptedServer server(
      [](ScriptedServer::Conn& c) { c.send(answer("201 Created", "X-Test: yes\r\n", "hello")); });
  HttpRequest req;
  req.method = "POST";
  req.url = server.url("/v3/kv/put?x=1");
  req.headers = {{"Content-Type", "application/json"}, {"Authorization", "Bearer t"}};
  req.body = R"({"k":"v"})";
  Result<HttpResponse> r = http_call(req, HttpOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->head.status, 201);
  EXPECT_EQ(r->head.reason, "Created");
  EXPECT_EQ(r->head.field("x-TEST").value_or(""), "yes");
  EXPECT_FALSE(r->head.field("X-Missing").has_value());
  EXPECT_EQ(r->body, "hello");

  const auto seen = server.last_request();
  EXPECT_EQ(seen.method(), http::verb::post);
  EXPECT_EQ(std::string(seen.target()), "/v3/kv/put?x=1");
  EXPECT_EQ(std::string(seen[http::field::host]), "127.0.0.1:" + std::to_string(req.url.port));
  EXPECT_EQ(std::string(seen[http::field::connection]), "close");
  EXPECT_EQ(std::string(seen[http::field::content_type]), "application/json");
  EXPECT_EQ(std::string(seen[http::field::authorization]), "Bearer t");
  EXPECT_EQ(std::string(seen[http::field::content_length]), "9");
  EXPECT_EQ(seen.body(), R"({"k":"v"})");
}

TEST(HttpClientTest, AGetWithoutABodySendsNoContentLength) {
  ScriptedServer server([](ScriptedServer::Conn& c) { c.send(answer("404 Not Found", "", "")); });
  HttpRequest req;
  req.url = server.url("/missing");
  Result<HttpResponse> r = http_call(req, HttpOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->head.status, 404);  // an answer, not an error
  EXPECT_EQ(server.last_request().count(http::field::content_length), 0u);
}

TEST(HttpClientTest, AChunkedBodyArrivesPieceByPiece) {
  ScriptedServer server([](ScriptedServer::Conn& c) {
    c.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (const char* line : {"one\n", "two\n", "three\n"}) {
      c.send(chunk(line));
      c.pause(100ms);
    }
    c.send("0\r\n\r\n");
  });
  HttpRequest req;
  req.url = server.url("/v3/watch");
  std::vector<std::string> pieces;
  Result<HttpHead> head = http_stream(req, HttpOptions{}, kReadBody, [&](std::string_view p) {
    pieces.emplace_back(p);
    return Status();
  });
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->status, 200);
  std::string all;
  for (const std::string& p : pieces) all += p;
  EXPECT_EQ(all, "one\ntwo\nthree\n");
  EXPECT_GE(pieces.size(), 3u);  // each chunk as it came, not the body at its end
}

TEST(HttpClientTest, StoppingAfterTheHeadSkipsTheBody) {
  ScriptedServer server(
      [](ScriptedServer::Conn& c) { c.send(answer("302 Found", "Location: /m/x\r\n", "moved")); });
  HttpRequest req;
  req.url = server.url("/r/x");
  bool body_called = false;
  Result<HttpHead> head = http_stream(
      req, HttpOptions{}, [](const HttpHead&) -> Result<AfterHead> { return AfterHead::kStop; },
      [&](std::string_view) {
        body_called = true;
        return Status();
      });
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->status, 302);
  EXPECT_EQ(head->field("location").value_or(""), "/m/x");
  EXPECT_FALSE(body_called);
}

TEST(HttpClientTest, ASilentServerTimesOutWithinTheDeadline) {
  ScriptedServer server([](ScriptedServer::Conn& c) { c.pause(5s); });
  HttpRequest req;
  req.url = server.url("/");
  HttpOptions options;
  options.timeout = 300ms;
  const auto t0 = Clock::now();
  Result<HttpResponse> r = http_call(req, options);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("reading the response head: timed out after 300 ms"),
            std::string::npos)
      << r.status().message();
}

// Five pieces 150 ms apart: slow, but never 400 ms without progress.
void trickle(ScriptedServer::Conn& c) {
  c.send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
  for (int i = 0; i < 5; ++i) {
    c.pause(150ms);
    c.send("x");
  }
}

TEST(HttpClientTest, EachOperationDeadlineAllowsSlowProgressAWholeDeadlineDoesNot) {
  ScriptedServer server(trickle);
  HttpRequest req;
  req.url = server.url("/model.gguf");
  HttpOptions options;
  options.timeout = 400ms;
  options.scope = TimeoutScope::kEachOperation;
  Result<HttpResponse> slow = http_call(req, options);
  ASSERT_TRUE(slow.ok()) << slow.status().message();
  EXPECT_EQ(slow->body, "xxxxx");

  options.scope = TimeoutScope::kWholeExchange;
  Result<HttpResponse> whole = http_call(req, options);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("reading the body: timed out"), std::string::npos)
      << whole.status().message();
}

TEST(HttpClientTest, UntilSentWaitsPastTheDeadlineAndCancelStopsIt) {
  ScriptedServer server([](ScriptedServer::Conn& c) {
    c.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk("event\n"));
    c.pause(10s);  // a watch with nothing to say; ended by the test
  });
  HttpRequest req;
  req.method = "POST";
  req.url = server.url("/v3/watch");
  req.body = "{}";
  HttpOptions options;
  options.timeout = 200ms;
  options.scope = TimeoutScope::kUntilSent;
  HttpCancel cancel;
  std::promise<void> first_piece;
  std::atomic<bool> got_piece{false};
  auto call = std::async(std::launch::async, [&] {
    return http_stream(
        req, options, kReadBody,
        [&](std::string_view p) {
          if (!got_piece.exchange(true)) first_piece.set_value();
          EXPECT_EQ(p, "event\n");
          return Status();
        },
        &cancel);
  });
  ASSERT_EQ(first_piece.get_future().wait_for(5s), std::future_status::ready);
  // Well past the 200 ms deadline, the stream is still being read.
  EXPECT_EQ(call.wait_for(600ms), std::future_status::timeout);
  const auto t0 = Clock::now();
  cancel.cancel();
  ASSERT_EQ(call.wait_for(3s), std::future_status::ready);
  EXPECT_LT(Clock::now() - t0, 1s);
  Result<HttpHead> r = call.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().message();

  // Once cancelled, a call given the same token returns at once.
  Result<HttpHead> again = http_stream(
      req, options, kReadBody, [](std::string_view) { return Status(); }, &cancel);
  EXPECT_EQ(again.status().code(), StatusCode::kCancelled);
}

TEST(HttpClientTest, ARefusedConnectionIsUnavailable) {
  uint16_t port = 0;
  {
    asio::io_context io;
    tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  HttpRequest req;
  req.url.host = "127.0.0.1";
  req.url.port = port;
  req.url.target = "/";
  HttpOptions options;
  options.timeout = 2s;
  Result<HttpResponse> r = http_call(req, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("connecting"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("GET http://127.0.0.1:"), std::string::npos)
      << r.status().message();
}

TEST(HttpClientTest, ACutBodyKeepsWhatArrivedAndFails) {
  ScriptedServer server([](ScriptedServer::Conn& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(40, 'a'));
  });
  HttpRequest req;
  req.url = server.url("/m");
  std::string got;
  Result<HttpHead> r = http_stream(req, HttpOptions{}, kReadBody, [&](std::string_view p) {
    got += p;
    return Status();
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("reading the body"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(got, std::string(40, 'a'));
}

TEST(HttpClientTest, LimitsAndSinkErrorsStopTheTransfer) {
  ScriptedServer server(
      [](ScriptedServer::Conn& c) { c.send(answer("200 OK", "", std::string(100, 'b'))); });
  HttpRequest req;
  req.url = server.url("/big");
  HttpOptions options;
  options.max_body_bytes = 10;
  Result<HttpResponse> r = http_call(req, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("longer than 10 bytes"), std::string::npos)
      << r.status().message();

  Result<HttpHead> s = http_stream(req, HttpOptions{}, kReadBody,
                                   [](std::string_view) { return Status::io_error("disk full"); });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIoError);
  EXPECT_EQ(s.status().message(), "disk full");

  Result<HttpHead> h = http_stream(
      req, HttpOptions{},
      [](const HttpHead&) -> Result<AfterHead> { return Status::not_found("no"); },
      [](std::string_view) { return Status(); });
  EXPECT_EQ(h.status().code(), StatusCode::kNotFound);
}

TEST(HttpClientTest, AnUnknownMethodIsAnInvalidArgument) {
  ScriptedServer server([](ScriptedServer::Conn& c) { c.send(answer("200 OK", "", "")); });
  HttpRequest req;
  req.method = "FETCH IT";
  req.url = server.url("/");
  Result<HttpResponse> r = http_call(req, HttpOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::net
