// keel's HTTP/1.1 client (Boost.Beast; TLS with OpenSSL): one request on one connection
// (Connection: close), synchronous, with a deadline, over plain TCP or TLS (SNI and host-name
// verification against a CA bundle or the system's store). http_call() reads a bounded answer into
// a string (the Kubernetes API, etcd's unary calls, a GET of /v1/models or /metrics);
// http_stream() hands the head, then each piece of the body as it arrives, to sinks (model
// downloads, etcd's watch stream). Redirects are not followed: a 3xx is an answer (its Location is
// in the head). An HttpCancel stops a call from another thread (a watch that waits for ever).
// Errors: Unavailable for transport failures and timeouts, naming the request and the stage
// ("connecting", "TLS handshake", "sending the request", "reading the response head", "reading
// the body") — worth retrying; any HTTP status is an answer, returned as is; Cancelled after
// cancel(); whatever a sink returns stops the transfer and is passed back.
// Thread safety: reentrant; each call has its own io_context and connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/result.h"
#include "net/url.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace keel::net {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE, ...
  Url url;                     // scheme, host, port and target (path and query)
  // Sent besides Host (the port omitted when it is the scheme's default) and Connection: close.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent, with Content-Length, when non-empty or the method is not GET
};

// What the deadline covers.
enum class TimeoutScope {
  kWholeExchange,  // one deadline from connect to the last byte of the answer (unary calls)
  kEachOperation,  // every socket operation anew — connect, handshake, write, each read — so the
                   // deadline is "this long without progress" (downloads)
  kUntilSent,  // connect, handshake and write; the answer is then awaited without a deadline
               // (a watch stream; stop it with HttpCancel)
};

struct HttpOptions {
  std::chrono::milliseconds timeout{30000};
  TimeoutScope scope = TimeoutScope::kWholeExchange;
  std::string ca_file;  // https: the CA bundle to verify the server with ("" = the system's store)
  uint64_t max_body_bytes = uint64_t{16} << 20;  // http_call(): a longer answer fails the call
};

struct HttpHead {
  int status = 0;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> fields;  // in arrival order
  // The value of the first field named `name` (case-insensitive); nullopt when there is none.
  [[nodiscard]] std::optional<std::string_view> field(std::string_view name) const;
};

struct HttpResponse {
  HttpHead head;
  std::string body;
};

// After the head: read the body into the body sink, or stop there (the connection is closed).
enum class AfterHead { kReadBody, kStop };
using HeadSink = std::function<Result<AfterHead>(const HttpHead&)>;
// One piece of the body, as it arrived; a non-ok Status stops the transfer and is returned.
using BodySink = std::function<Status(std::string_view)>;

// Stops a call in flight from another thread. One-shot: once cancelled, every call given it
// returns Cancelled (at once, or as soon as its current socket operation is abandoned).
// Thread safety: cancel() and cancelled() from any thread; a call uses it from its own.
class HttpCancel {
 public:
  void cancel();
  [[nodiscard]] bool cancelled() const;

  // For the client: restarts `ioc` for its next operation unless cancelled (false), and lets
  // cancel() stop it until disarm().
  bool arm(boost::asio::io_context& ioc);
  void disarm();

 private:
  mutable Mutex mu_;
  bool cancelled_ KEEL_GUARDED_BY(mu_) = false;
  boost::asio::io_context* armed_ KEEL_GUARDED_BY(mu_) = nullptr;
};

// Sends the request and reads the whole answer (up to options.max_body_bytes).
Result<HttpResponse> http_call(const HttpRequest& request, const HttpOptions& options);

// Sends the request, passes the head to `on_head`, then (kReadBody) each piece of the body to
// `on_body` until the answer ends. Returns the head. Body bytes that arrived before a transport
// error reach `on_body` before the error is returned.
Result<HttpHead> http_stream(const HttpRequest& request, const HttpOptions& options,
                             const HeadSink& on_head, const BodySink& on_body,
                             HttpCancel* cancel = nullptr);

}  // namespace keel::net
