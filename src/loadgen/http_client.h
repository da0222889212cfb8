// HttpClient: the HTTP/1.1 side of the load generator, on Boost.Asio + Boost.Beast with C++20
// coroutines. It streams one POST per call and feeds the response body, each read stamped with
// the clock, into a StreamTracker. (A plain GET, to list models or read /metrics, is http_get in
// load_runner.h, over net's synchronous client.)
//
// Connections are kept alive and reused through an idle pool (as aiohttp does for vLLM's
// client): a request takes an idle connection or opens a new one; a response read to its end
// with keep-alive returns its connection to the pool. A reused connection that the server had
// already closed is retried once on a fresh one before any byte of the response arrived.
// Send time is stamped before the connection is taken, so connection set-up counts in TTFT.
// Every socket operation has an idle deadline (request_timeout_s without progress fails it).
//
// Thread safety: all calls on one HttpClient must run on one single-threaded executor (the
// benchmark runs everything on one io_context thread); no locks are taken.
#pragma once

#include <utility>  // before Boost: asio/awaitable.hpp in Boost 1.74 misses this include

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "loadgen/endpoint.h"
#include "loadgen/request_record.h"

namespace keel::loadgen {

struct ClientConfig {
  HttpTarget target;
  std::string api_key;  // sent as "Authorization: Bearer <key>" when non-empty
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  double request_timeout_s = 600.0;  // a socket operation making no progress this long fails
};

// One streamed POST.
struct StreamPost {
  std::string path;        // request target, e.g. "/v1/completions"
  std::string body;        // JSON body
  std::string request_id;  // sent as x-request-id when non-empty
  bool chat = false;       // chat API (affects the end-time rule, see StreamTracker)
  bool keep_text = false;  // keep the generated text in the record
  // A client that goes away: close the connection once this many content chunks have arrived (0:
  // as soon as the response header has), unless the stream ended first; the record is then
  // `cancelled`. -1: read to the end.
  int64_t disconnect_after = -1;
};

class HttpClient {
 public:
  // clock and origin_ns: record times are (clock->now_ns() - origin_ns) seconds. The clock must
  // outlive the client; the client must outlive every coroutine it started.
  HttpClient(boost::asio::any_io_executor executor, ClientConfig config, const Clock* clock,
             int64_t origin_ns);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Resolves the host once; later calls reuse the addresses. Must succeed before requests.
  boost::asio::awaitable<Status> resolve();

  // Sends one streamed POST and fills *rec (start_s, timings, tokens, success or error). Never
  // throws; every failure ends up in rec->error.
  boost::asio::awaitable<void> stream_post(StreamPost post, RequestRecord* rec);

  // Connections opened so far (for reporting and tests of connection reuse).
  [[nodiscard]] int64_t connections_opened() const;

  // Seconds since origin_ns on the client's clock.
  [[nodiscard]] double now_s() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::loadgen
