// http_call / http_stream (see http_client.h): Beast's asynchronous operations run one at a time
// to completion on a private io_context, so the tcp_stream's timer is the deadline and an
// HttpCancel can stop the context from another thread. The same exchange serves plain TCP and TLS
// (a template over the stream).
#include "net/http_client.h"

#include <utility>  // before Boost: asio/awaitable.hpp in Boost 1.74 misses this include

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>

namespace keel::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

void HttpCancel::cancel() {
  MutexLock lock(mu_);
  cancelled_ = true;
  if (armed_ != nullptr) armed_->stop();
}

bool HttpCancel::cancelled() const {
  MutexLock lock(mu_);
  return cancelled_;
}

bool HttpCancel::arm(asio::io_context& ioc) {
  MutexLock lock(mu_);
  if (cancelled_) return false;
  armed_ = &ioc;
  ioc.restart();  // under the lock: a cancel() after this stops the run that follows
  return true;
}

void HttpCancel::disarm() {
  MutexLock lock(mu_);
  armed_ = nullptr;
}

std::optional<std::string_view> HttpHead::field(std::string_view name) const {
  const auto lower = [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  for (const auto& [n, v] : fields) {
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(),
                   [&](char a, char b) { return lower(a) == lower(b); })) {
      return std::string_view(v);
    }
  }
  return std::nullopt;
}

namespace {

constexpr size_t kBodyPieceBytes = size_t{64} << 10;

enum class Phase { kConnect, kSend, kReceive };

// One request's exchange: its io_context, its deadline rule and the messages of its failures.
class Exchange {
 public:
  Exchange(const HttpRequest& request, const HttpOptions& options, HttpCancel* cancel)
      : request_(request), options_(options), cancel_(cancel) {}
  ~Exchange() {
    if (cancel_ != nullptr) cancel_->disarm();
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  Result<HttpHead> run(const HeadSink& on_head, const BodySink& on_body);

 private:
  // Runs one asynchronous operation to completion: its error code; nullopt when cancelled.
  template <class Start>
  std::optional<error_code> run_op(Start&& start) {
    error_code result;
    bool done = false;
    std::forward<Start>(start)([&result, &done](error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    if (cancel_ != nullptr) {
      if (!cancel_->arm(ioc_)) return std::nullopt;
    } else {
      ioc_.restart();
    }
    ioc_.run();
    if (!done) return std::nullopt;
    return result;
  }

  // run_op for an operation whose every failure ends the exchange.
  template <class Start>
  Status step(std::string_view stage, Start&& start) {
    const std::optional<error_code> ec = run_op(std::forward<Start>(start));
    if (!ec) return cancelled();
    if (*ec) return failed(stage, *ec);
    return {};
  }

  // Sets the stream's timer for the operation about to start, as options_.scope says.
  void before(beast::tcp_stream& tcp, Phase phase) const {
    switch (options_.scope) {
      case TimeoutScope::kWholeExchange:
        if (phase == Phase::kConnect) tcp.expires_after(options_.timeout);
        return;
      case TimeoutScope::kEachOperation:
        tcp.expires_after(options_.timeout);
        return;
      case TimeoutScope::kUntilSent:
        if (phase == Phase::kConnect) tcp.expires_after(options_.timeout);
        if (phase == Phase::kReceive) tcp.expires_never();
        return;
    }
  }

  [[nodiscard]] std::string what() const { return request_.method + " " + request_.url.str(); }
  [[nodiscard]] Status failed(std::string_view stage, const error_code& ec) const {
    const std::string why =
        ec == beast::error::timeout
            ? "timed out after " + std::to_string(options_.timeout.count()) + " ms"
            : ec.message();
    return Status::unavailable(what() + ": " + std::string(stage) + ": " + why);
  }
  [[nodiscard]] Status cancelled() const { return Status::cancelled(what() + ": cancelled"); }

  template <class Stream>
  Result<HttpHead> converse(Stream& stream, const HeadSink& on_head, const BodySink& on_body);
  template <class Stream, class Parser>
  Status read_body(Stream& stream, beast::flat_buffer& buffer, Parser& parser,
                   const BodySink& on_body);

  const HttpRequest& request_;
  const HttpOptions& options_;
  HttpCancel* cancel_;
  asio::io_context ioc_;  // outlives run()'s streams and the operations they abandoned
};

std::string str(beast::string_view v) { return {v.data(), v.size()}; }

template <class Message>
HttpHead head_of(const Message& msg) {
  HttpHead head;
  head.status = static_cast<int>(msg.result_int());
  head.reason = str(msg.reason());
  for (const auto& f : msg) head.fields.emplace_back(str(f.name_string()), str(f.value()));
  return head;
}

template <class Stream>
Result<HttpHead> Exchange::converse(Stream& stream, const HeadSink& on_head,
                                    const BodySink& on_body) {
  const Url& url = request_.url;
  beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
  const http::verb verb = http::string_to_verb(request_.method);
  if (verb == http::verb::unknown) {
    return Status::invalid_argument("bad HTTP method " + request_.method);
  }
  http::request<http::string_body> req{verb, url.target, 11};
  const bool default_port = url.port == (url.https ? 443 : 80);
  req.set(http::field::host, default_port ? url.host : url.host + ":" + std::to_string(url.port));
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : request_.headers) req.set(name, value);
  if (!request_.body.empty() || verb != http::verb::get) {
    req.body() = request_.body;
    req.prepare_payload();
  }
  before(tcp, Phase::kSend);
  KEEL_TRY(step("sending the request", [&](auto h) { http::async_write(stream, req, h); }));

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // the sinks decide
  if (verb == http::verb::head) parser.skip(true);
  before(tcp, Phase::kReceive);
  KEEL_TRY(step("reading the response head",
                [&](auto h) { http::async_read_header(stream, buffer, parser, h); }));
  HttpHead head = head_of(parser.get());
  KEEL_ASSIGN_OR_RETURN(const AfterHead next, on_head(head));
  if (next == AfterHead::kStop) return head;
  KEEL_TRY(read_body(stream, buffer, parser, on_body));
  return head;
}

template <class Stream, class Parser>
Status Exchange::read_body(Stream& stream, beast::flat_buffer& buffer, Parser& parser,
                           const BodySink& on_body) {
  beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
  std::vector<char> piece(kBodyPieceBytes);
  while (!parser.is_done()) {
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    before(tcp, Phase::kReceive);
    const std::optional<error_code> ec =
        run_op([&](auto h) { http::async_read_some(stream, buffer, parser, h); });
    const size_t got = piece.size() - parser.get().body().size;
    if (got > 0) KEEL_TRY(on_body({piece.data(), got}));  // kept even when the read then failed
    if (!ec) return cancelled();
    if (*ec && *ec != http::error::need_buffer) return failed("reading the body", *ec);
  }
  return {};
}

Result<HttpHead> Exchange::run(const HeadSink& on_head, const BodySink& on_body) {
  const Url& url = request_.url;
  if (cancel_ != nullptr && cancel_->cancelled()) return cancelled();
  tcp::resolver resolver(ioc_);
  error_code ec;
  const auto endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) return failed("resolving the host", ec);
  beast::tcp_stream tcp(ioc_);
  before(tcp, Phase::kConnect);
  KEEL_TRY(step("connecting", [&](auto h) { tcp.async_connect(endpoints, h); }));
  if (!url.https) return converse(tcp, on_head, on_body);

  asio::ssl::context ctx(asio::ssl::context::tls_client);
  if (options_.ca_file.empty()) {
    ctx.set_default_verify_paths(ec);
  } else {
    ctx.load_verify_file(options_.ca_file, ec);
  }
  if (ec) {
    const std::string bundle = options_.ca_file.empty() ? "the system's" : options_.ca_file;
    return Status::io_error("CA bundle " + bundle + ": " + ec.message());
  }
  ctx.set_verify_mode(asio::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp), ctx);
  if (!SSL_set_tlsext_host_name(tls.native_handle(), url.host.c_str())) {
    return Status::unavailable(what() + ": cannot set the TLS server name");
  }
  tls.set_verify_callback(asio::ssl::rfc2818_verification(url.host));
  before(beast::get_lowest_layer(tls), Phase::kSend);
  KEEL_TRY(step("TLS handshake",
                [&](auto h) { tls.async_handshake(asio::ssl::stream_base::client, h); }));
  return converse(tls, on_head, on_body);
}

}  // namespace

Result<HttpHead> http_stream(const HttpRequest& request, const HttpOptions& options,
                             const HeadSink& on_head, const BodySink& on_body, HttpCancel* cancel) {
  Exchange exchange(request, options, cancel);
  return exchange.run(on_head, on_body);
}

Result<HttpResponse> http_call(const HttpRequest& request, const HttpOptions& options) {
  HttpResponse out;
  const auto on_head = [](const HttpHead&) -> Result<AfterHead> { return AfterHead::kReadBody; };
  const auto on_body = [&](std::string_view piece) -> Status {
    if (out.body.size() + piece.size() > options.max_body_bytes) {
      return Status::unavailable(request.method + " " + request.url.str() +
                                 ": the answer is longer than " +
                                 std::to_string(options.max_body_bytes) + " bytes");
    }
    out.body.append(piece);
    return {};
  };
  KEEL_ASSIGN_OR_RETURN(out.head, http_stream(request, options, on_head, on_body));
  return out;
}

}  // namespace keel::net
