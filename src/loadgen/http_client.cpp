// HttpClient implementation: connection pool, request writing, streamed body reading into a
// StreamTracker, error-body capture, the post-[DONE] drain that parks a connection for reuse.
// Every Asio/Beast operation uses redirect_error, so no exception crosses a coroutine; a
// catch-all at each entry point turns anything unexpected (bad_alloc, ...) into a failed record.
#include "loadgen/http_client.h"

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <limits>

#include "loadgen/stream_chunk.h"
#include "loadgen/stream_tracker.h"

namespace keel::loadgen {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using Parser = http::response_parser<http::buffer_body>;

constexpr size_t kReadBufferBytes = 16 * 1024;
constexpr size_t kMaxErrorBodyBytes = 64 * 1024;
constexpr double kDrainTimeoutS = 2.0;  // wait for the end of a message after [DONE]

auto with_ec(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// An open connection with the read state of the response in flight.
struct Exchange {
  std::unique_ptr<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  std::unique_ptr<Parser> parser;
};

}  // namespace

struct HttpClient::Impl {
  asio::any_io_executor executor;
  ClientConfig config;
  const Clock* clock;
  int64_t origin_ns;
  tcp::resolver::results_type endpoints;
  bool resolved = false;
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;  // kept-alive connections, LIFO
  int64_t connections_opened = 0;

  double now_s() const { return static_cast<double>(clock->now_ns() - origin_ns) * 1e-9; }

  std::string where() const { return config.target.host + ":" + config.target.port; }

  std::string describe(const error_code& ec, const char* op) const {
    if (ec == beast::error::timeout) {
      return fmt::format("{} {}: timed out (no progress for {:g} s)", op, where(),
                         config.request_timeout_s);
    }
    return std::string(op) + " " + where() + ": " + ec.message();
  }

  http::request<http::string_body> make_request(http::verb verb, const std::string& path,
                                                std::string body, const std::string& id) const {
    http::request<http::string_body> req{verb, config.target.base_path + path, 11};
    req.set(http::field::host, config.target.host + ":" + config.target.port);
    req.set(http::field::user_agent, "keel-bench-serve");
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.set(http::field::accept, "text/event-stream");
    }
    if (!config.api_key.empty()) req.set(http::field::authorization, "Bearer " + config.api_key);
    if (!id.empty()) req.set("x-request-id", id);
    for (const auto& [name, value] : config.headers) req.set(name, value);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  awaitable<std::unique_ptr<beast::tcp_stream>> connect(error_code& ec) {
    auto stream = std::make_unique<beast::tcp_stream>(executor);
    stream->expires_after(seconds(config.request_timeout_s));
    co_await stream->async_connect(endpoints, with_ec(ec));
    if (ec) co_return nullptr;
    ++connections_opened;
    error_code ignored;
    stream->socket().set_option(tcp::no_delay(true), ignored);
    co_return stream;
  }

  // Sends req and reads the response header, on an idle connection if there is one (retrying once
  // on a fresh connection if that one turns out dead), else on a new one.
  awaitable<Result<Exchange>> open(const http::request<http::string_body>& req) {
    for (int attempt = 0;; ++attempt) {
      Exchange ex;
      bool reused = false;
      error_code ec;
      if (!idle.empty() && attempt == 0) {
        ex.stream = std::move(idle.back());
        idle.pop_back();
        reused = true;
      } else {
        if (!resolved) co_return Status::unavailable("host " + where() + " was not resolved");
        ex.stream = co_await connect(ec);
        if (ec) co_return Status::unavailable(describe(ec, "connect to"));
      }
      ex.stream->expires_after(seconds(config.request_timeout_s));
      co_await http::async_write(*ex.stream, req, with_ec(ec));
      const char* op = "write to";
      if (!ec) {
        ex.parser = std::make_unique<Parser>();
        ex.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
        ex.stream->expires_after(seconds(config.request_timeout_s));
        co_await http::async_read_header(*ex.stream, ex.buffer, *ex.parser, with_ec(ec));
        op = "read response header from";
      }
      if (!ec) co_return std::move(ex);
      const bool stale = reused && ec != beast::error::timeout && ex.buffer.size() == 0;
      if (!stale) co_return Status::unavailable(describe(ec, op));
    }
  }

  // Reads a whole (small) body, an error message, up to max_bytes.
  awaitable<std::string> read_small_body(Exchange& ex, size_t max_bytes) {
    std::string body;
    char buf[4096];
    error_code ec;
    while (!ex.parser->is_done() && body.size() < max_bytes) {
      ex.parser->get().body().data = buf;
      ex.parser->get().body().size = sizeof buf;
      ex.stream->expires_after(seconds(std::min(config.request_timeout_s, 10.0)));
      co_await http::async_read_some(*ex.stream, ex.buffer, *ex.parser, with_ec(ec));
      body.append(buf, sizeof buf - ex.parser->get().body().size);
      if (ec && ec != http::error::need_buffer) break;
    }
    co_return body;
  }

  // Streams the body of a 200 response into tracker until [DONE], the end, an error, or the
  // planned hang-up after `disconnect_after` content chunks (-1: none).
  awaitable<void> read_stream(Exchange& ex, StreamTracker& tracker, int64_t disconnect_after) {
    auto buf = std::make_unique<char[]>(kReadBufferBytes);
    Parser& p = *ex.parser;
    error_code ec;
    while (!p.is_done() && !tracker.finished()) {
      p.get().body().data = buf.get();
      p.get().body().size = kReadBufferBytes;
      ex.stream->expires_after(seconds(config.request_timeout_s));
      co_await http::async_read_some(*ex.stream, ex.buffer, p, with_ec(ec));
      const double t = now_s();
      const size_t n = kReadBufferBytes - p.get().body().size;
      if (n > 0) tracker.on_bytes(std::string_view(buf.get(), n), t);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      if (disconnect_after >= 0 && !tracker.finished() &&
          tracker.num_content_chunks() >= disconnect_after) {
        hang_up(ex, tracker);
        co_return;
      }
    }
    if (tracker.finished()) co_return;
    if (!ec || ec == http::error::partial_message || ec == http::error::end_of_stream ||
        ec == asio::error::eof) {
      tracker.on_end_of_body(now_s());  // fails with "ended before [DONE]" unless it was there
    } else {
      tracker.fail(describe(ec, "read stream from"));
    }
  }

  // After [DONE]: reads the rest of the message (normally just the last chunk) and parks the
  // connection for reuse, or drops it. Runs detached so the request completes at [DONE].
  static awaitable<void> drain_and_park(Impl* self, Exchange ex) {
    try {
      char buf[4096];
      error_code ec;
      Parser& p = *ex.parser;
      while (!p.is_done() && !ec) {
        p.get().body().data = buf;
        p.get().body().size = sizeof buf;
        ex.stream->expires_after(seconds(kDrainTimeoutS));
        co_await http::async_read_some(*ex.stream, ex.buffer, p, with_ec(ec));
        if (ec == http::error::need_buffer) ec = {};
      }
      if (!ec && p.is_done() && p.keep_alive() && ex.buffer.size() == 0) {
        ex.stream->expires_never();
        self->idle.push_back(std::move(ex.stream));
      }
    } catch (...) {
      // the connection is simply dropped
    }
  }

  // Closes the connection mid-response, as a client that went away.
  static void hang_up(Exchange& ex, StreamTracker& tracker) {
    error_code ignored;
    ex.stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    ex.stream->close();
    tracker.cancel();
  }

  void finish_exchange(Exchange ex, const StreamTracker& tracker) {
    if (!tracker.saw_done() || ex.parser->get().result_int() != 200) return;  // closed here
    if (ex.parser->is_done()) {
      if (ex.parser->keep_alive() && ex.buffer.size() == 0) {
        ex.stream->expires_never();
        idle.push_back(std::move(ex.stream));
      }
      return;
    }
    asio::co_spawn(executor, drain_and_park(this, std::move(ex)), asio::detached);
  }

  awaitable<void> post(const StreamPost& post, StreamTracker& tracker) {
    auto req = make_request(http::verb::post, post.path, post.body, post.request_id);
    Result<Exchange> opened = co_await open(req);
    if (!opened.ok()) {
      tracker.fail(opened.error().message());
      co_return;
    }
    Exchange ex = std::move(opened).value();
    const unsigned status = ex.parser->get().result_int();
    if (status != 200) {
      std::string body = co_await read_small_body(ex, kMaxErrorBodyBytes);
      tracker.fail("HTTP " + std::to_string(status) + " " + std::string(ex.parser->get().reason()) +
                   ": " + error_message_from_body(body));
      co_return;
    }
    if (post.disconnect_after == 0) {
      hang_up(ex, tracker);
      co_return;
    }
    co_await read_stream(ex, tracker, post.disconnect_after);
    finish_exchange(std::move(ex), tracker);
  }
};

HttpClient::HttpClient(asio::any_io_executor executor, ClientConfig config, const Clock* clock,
                       int64_t origin_ns)
    : impl_(std::make_unique<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->config = std::move(config);
  impl_->clock = clock;
  impl_->origin_ns = origin_ns;
}

HttpClient::~HttpClient() = default;

int64_t HttpClient::connections_opened() const { return impl_->connections_opened; }

double HttpClient::now_s() const { return impl_->now_s(); }

awaitable<Status> HttpClient::resolve() {
  if (impl_->resolved) co_return Status();
  try {
    tcp::resolver resolver(impl_->executor);
    error_code ec;
    impl_->endpoints = co_await resolver.async_resolve(impl_->config.target.host,
                                                       impl_->config.target.port, with_ec(ec));
    if (ec) co_return Status::unavailable("cannot resolve " + impl_->where() + ": " + ec.message());
    impl_->resolved = true;
    co_return Status();
  } catch (const std::exception& e) {
    co_return Status::internal(std::string("resolve: ") + e.what());
  }
}

awaitable<void> HttpClient::stream_post(StreamPost post, RequestRecord* rec) {
  StreamTracker tracker(impl_->now_s(), post.chat, post.keep_text);
  try {
    co_await impl_->post(post, tracker);
  } catch (const std::exception& e) {
    tracker.fail(std::string("client error: ") + e.what());
  } catch (...) {
    tracker.fail("client error: unknown exception");
  }
  tracker.fill(rec);
}

}  // namespace keel::loadgen
