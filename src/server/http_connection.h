// HttpConnection: one accepted TCP connection speaking HTTP/1.1 with keep-alive, run as a C++20
// coroutine on its own strand. run() reads a request (its header within header_timeout_ms of its
// first byte; Content-Length checked against max_body_bytes before the body is read; the body
// parser is capped too), routes it, and either
// writes the response or hands the exchange to the generation handler, which uses the
// streaming/peer-watch calls below. Boost.Beast stays inside http_connection.cpp.
//
// Peer watch: while a generation request waits for the engine, a concurrent read on the socket
// notices the client closing (EOF/reset) so the request can be aborted — streaming or not. Bytes
// a pipelining client sends meanwhile are kept for the next request.
//
// Thread safety: every member function must be called on the connection's strand (executor()),
// except that the object itself is shared (shared_ptr) between the server's registry and the
// coroutines.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/async_signal.h"
#include "server/body_budget.h"
#include "server/http_message.h"
#include "server/net.h"
#include "server/server_context.h"

namespace keel::server {

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // `socket` must use a strand executor. `tokenize_executor` (may be empty) runs prompt
  // tokenization off the io threads.
  HttpConnection(tcp::socket socket, ServerContext* ctx, net::any_io_executor tokenize_executor,
                 net::any_io_executor control_executor = {});
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // The keep-alive request loop; returns when the connection is closed.
  net::awaitable<void> run();
  // Instead of run(): answers `error` (e.g. 503 over the connection cap) and closes.
  net::awaitable<void> refuse(ApiError error);
  // Closes the socket; pending operations fail and run() returns.
  void close();
  // close() when the connection is idle (see idle()); a request in progress goes on.
  void close_if_idle();
  // True while the connection waits for the first byte of its next request (keep-alive, nothing
  // pipelined): closing it then loses nothing. Any thread (an atomic).
  [[nodiscard]] bool idle() const;
  // steady_clock nanoseconds since the connection became idle, 0 while it is not. Any thread.
  [[nodiscard]] int64_t idle_since_ns() const;
  [[nodiscard]] net::any_io_executor executor() const;
  [[nodiscard]] ServerContext& context() const { return *ctx_; }
  [[nodiscard]] const net::any_io_executor& tokenize_executor() const { return tokenize_ex_; }
  // fn() (returning a default-constructible T) on the tokenization pool, or right here when the
  // server has none.
  template <typename T, typename Fn>
  net::awaitable<T> on_tokenizer(Fn fn) {
    if (!tokenize_ex_) co_return fn();
    co_return co_await net::co_spawn(
        tokenize_ex_, [&fn]() -> net::awaitable<T> { co_return fn(); }, net::use_awaitable);
  }

  // fn() on the control pool (handlers that wait on other processes: BlockingCall), or right
  // here when the server has none.
  net::awaitable<HttpResponse> on_control(std::function<HttpResponse()> fn) {
    if (!control_ex_) co_return fn();
    co_return co_await net::co_spawn(
        control_ex_, [&fn]() -> net::awaitable<HttpResponse> { co_return fn(); },
        net::use_awaitable);
  }

  // --- for the handler of the current exchange (false: the connection failed) ---
  // A complete response; adds Server and keep-alive handling.
  net::awaitable<bool> write_response(HttpResponse response);
  // 200 text/event-stream headers (chunked transfer), then events, then the terminating chunk.
  net::awaitable<bool> begin_stream(const HeaderList& headers);
  net::awaitable<bool> write_stream(std::string_view data);
  net::awaitable<bool> end_stream();
  // Starts watching for the peer closing; `signal` is notified when the watch ends.
  void watch_peer(AsyncSignal* signal);
  [[nodiscard]] bool peer_closed() const;
  // Stops the watch and waits until its read has completed.
  net::awaitable<void> unwatch_peer();

 private:
  struct Impl;
  // Marks the connection idle and waits for the first byte of the next request; false when the
  // peer closed, the idle timeout passed or close() was called.
  net::awaitable<bool> await_request();
  // Reads one request (framing checks, 413, the body-bytes budget, 100-continue); false after an
  // error reply or a failed read.
  net::awaitable<bool> read_request(HttpRequest* out, BodyReservation* body);
  net::awaitable<bool> handle(HttpRequest request, BodyReservation* body);
  net::awaitable<void> reject(int status, std::string message);
  net::awaitable<void> reject(ApiError error);
  // Ends the connection: FIN, then (after an error reply) discards the client's input until it
  // closes, goes quiet for 2 s, or 10 s pass (1 s for a refused connection), so the reply is
  // read before the close (no reset).
  net::awaitable<void> finish();
  net::awaitable<void> reject_read_error(const error_code& ec);
  static net::awaitable<void> watch_loop(std::shared_ptr<HttpConnection> self);

  ServerContext* ctx_;
  net::any_io_executor tokenize_ex_;
  net::any_io_executor control_ex_;
  std::atomic<int64_t> idle_since_ns_{0};
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::server
