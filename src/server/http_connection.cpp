// HttpConnection (see http_connection.h): the Boost.Beast side of the server.
#include "server/http_connection.h"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <optional>
#include <vector>

#include "core/log.h"
#include "server/cache_handler.h"
#include "server/generation_handler.h"
#include "server/http_framing.h"
#include "server/responses_handler.h"
#include "server/router.h"

namespace keel::server {
namespace beast = boost::beast;
namespace http = boost::beast::http;

namespace {

// A pipelining client may send this much while a generation request runs; beyond it the peer
// watch stops reading (the bytes are kept) and disconnects are noticed on the next write only.
constexpr size_t kMaxPipelinedBytes = 64 * 1024;
// After an error reply the client's input is read and discarded before closing (closing with
// unread input sends a reset, which can destroy the reply before the client reads it: a client
// still writing an oversize body gets EPIPE/ECONNRESET instead of the 413). Until the client
// closes, no byte comes for kLingerQuiet, or the linger's total time or bytes are spent.
struct Linger {
  std::chrono::milliseconds total{0};
  size_t max_bytes = 0;
};
constexpr std::chrono::milliseconds kLingerQuiet{2000};
// An error reply to a request (413, 400, ...): its body may still be on its way.
constexpr Linger kErrorLinger{std::chrono::milliseconds(10'000), size_t{1} << 30};
// A refused connection (over a connection cap): nothing of its was read; a short linger only.
constexpr Linger kRefusalLinger{std::chrono::milliseconds(1000), size_t{1} << 20};

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

// Errors of the HTTP parser that deserve a 400 (a clean or abrupt close does not).
bool is_parse_error(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

HttpRequest to_request(http::request<http::string_body>&& msg) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = origin_form(sv(msg.target()));  // absolute-form accepted (RFC 9112 §3.2.2)
  req.path = req.target.substr(0, req.target.find('?'));
  for (const auto& f : msg)
    req.headers.emplace_back(lower(sv(f.name_string())), std::string(f.value()));
  req.keep_alive = msg.keep_alive();
  req.body = std::move(msg.body());
  return req;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Transfer-Encoding / Content-Length / version rules of http_framing.h.
template <class Header>
std::optional<FramingError> framing_error(const Header& h) {
  std::vector<std::string_view> te;
  for (auto [it, end] = h.equal_range(http::field::transfer_encoding); it != end; ++it) {
    te.push_back(sv(it->value()));
  }
  return check_framing(static_cast<int>(h.version()), te,
                       h.find(http::field::content_length) != h.end());
}

template <class Message>
void add_headers(Message& m, const HeaderList& headers) {
  m.set(http::field::server, "keel");
  for (const auto& [name, value] : headers) m.set(name, value);
}

}  // namespace

struct HttpConnection::Impl {
  explicit Impl(tcp::socket socket) : stream(std::move(socket)) {}

  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  bool keep_alive = true;  // of the current exchange
  bool http10 = false;     // the current request is HTTP/1.0 (no chunked streaming)
  bool closed = false;
  Linger linger;  // an error reply was sent: drain the client's input before closing
  std::array<char, 4096> scratch{};
  // Peer watch.
  bool watch_active = false;
  bool watch_stop = false;
  bool peer_closed = false;
  AsyncSignal* watch_signal = nullptr;
};

HttpConnection::HttpConnection(tcp::socket socket, ServerContext* ctx,
                               net::any_io_executor tokenize_executor,
                               net::any_io_executor control_executor)
    : ctx_(ctx),
      tokenize_ex_(std::move(tokenize_executor)),
      control_ex_(std::move(control_executor)),
      impl_(std::make_unique<Impl>(std::move(socket))) {}

HttpConnection::~HttpConnection() = default;

net::any_io_executor HttpConnection::executor() const { return impl_->stream.get_executor(); }

void HttpConnection::close() {
  Impl& s = *impl_;
  s.closed = true;
  s.keep_alive = false;
  error_code ec;
  s.stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  s.stream.close();
}

net::awaitable<void> HttpConnection::reject(int status, std::string message) {
  ApiError e = ApiError::bad_request(std::move(message));
  e.status = status;
  co_await reject(std::move(e));
}

net::awaitable<void> HttpConnection::reject(ApiError e) {
  Impl& s = *impl_;
  HttpResponse r = HttpResponse::error(e);
  r.headers.emplace_back("x-request-id", ctx_->ids.next());
  r.close = true;
  s.keep_alive = false;
  s.linger = kErrorLinger;
  co_await write_response(std::move(r));
}

net::awaitable<void> HttpConnection::reject_read_error(const error_code& ec) {
  // Beast reports an over-limit Content-Length while parsing the header, a chunked body when the
  // limit is crossed.
  if (ec == http::error::body_limit) {
    co_await reject(413, ApiError::payload_too_large(ctx_->config.max_body_bytes).message);
  } else if (ec == http::error::header_limit) {
    co_await reject(431, "The request headers are too large.");
  } else if (is_parse_error(ec)) {
    co_await reject(400, "Malformed HTTP request: " + ec.message());
  }  // else: the client closed or timed out; nothing to answer
}

bool HttpConnection::idle() const { return idle_since_ns_.load(std::memory_order_acquire) != 0; }

int64_t HttpConnection::idle_since_ns() const {
  return idle_since_ns_.load(std::memory_order_acquire);
}

void HttpConnection::close_if_idle() {
  if (idle()) close();
}

net::awaitable<bool> HttpConnection::await_request() {
  Impl& s = *impl_;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  idle_since_ns_.store(std::max<int64_t>(now, 1), std::memory_order_release);
  bool ok = true;
  if (s.buffer.size() == 0) {  // nothing pipelined: wait for the first byte of a request
    error_code ec;
    s.stream.expires_after(std::chrono::milliseconds(ctx_->config.idle_timeout_ms));
    const size_t n = co_await s.stream.async_read_some(s.buffer.prepare(4096),
                                                       net::redirect_error(net::use_awaitable, ec));
    s.buffer.commit(n);
    ok = !ec && !s.closed;
  }
  idle_since_ns_.store(0, std::memory_order_release);
  co_return ok;
}

net::awaitable<bool> HttpConnection::read_request(HttpRequest* out, BodyReservation* body) {
  Impl& s = *impl_;
  const ServerConfig& cfg = ctx_->config;
  http::request_parser<http::string_body> parser;
  parser.header_limit(cfg.max_header_bytes);
  parser.body_limit(cfg.max_body_bytes);
  error_code ec;
  // One deadline for the whole header (a client trickling it a byte at a time is closed), then
  // the idle timeout for the body.
  s.stream.expires_after(std::chrono::milliseconds(cfg.header_timeout_ms));
  co_await http::async_read_header(s.stream, s.buffer, parser,
                                   net::redirect_error(net::use_awaitable, ec));
  if (ec) {
    co_await reject_read_error(ec);
    co_return false;
  }
  s.stream.expires_after(std::chrono::milliseconds(cfg.idle_timeout_ms));
  if (std::optional<FramingError> e = framing_error(parser.get())) {
    co_await reject(e->status, std::move(e->message));
    co_return false;
  }
  const auto content_length = parser.content_length();
  if (content_length && *content_length > cfg.max_body_bytes) {
    co_await reject(413, ApiError::payload_too_large(cfg.max_body_bytes).message);
    co_return false;
  }
  const ApiError busy = ApiError::unavailable(
      "The server holds too many request bodies in memory at once; retry later.");
  if (!body->grow_to(static_cast<size_t>(content_length.value_or(0)))) {
    co_await reject(busy);
    co_return false;
  }
  if (iequals(sv(parser.get()[http::field::expect]), "100-continue")) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    co_await net::async_write(s.stream, net::buffer(kContinue.data(), kContinue.size()),
                              net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return false;
  }
  while (!parser.is_done()) {  // piece by piece, so a chunked body is charged as it grows
    co_await http::async_read_some(s.stream, s.buffer, parser,
                                   net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      co_await reject_read_error(ec);
      co_return false;
    }
    if (!body->grow_to(parser.get().body().size())) {
      co_await reject(busy);
      co_return false;
    }
  }
  s.stream.expires_never();
  s.http10 = parser.get().version() < 11;
  *out = to_request(parser.release());
  co_return true;
}

net::awaitable<void> HttpConnection::run() {
  auto self = shared_from_this();  // keeps the connection alive for the loop
  Impl& s = *impl_;
  while (!s.closed && !ctx_->closing.load(std::memory_order_acquire)) {
    if (!co_await await_request()) break;
    HttpRequest req;
    BodyReservation body(&ctx_->body_budget);
    if (!co_await read_request(&req, &body)) break;
    s.keep_alive = req.keep_alive && !ctx_->draining.load(std::memory_order_acquire);
    if (!co_await handle(std::move(req), &body)) break;
    if (!s.keep_alive) break;
  }
  co_await finish();
}

net::awaitable<void> HttpConnection::refuse(ApiError error) {
  auto self = shared_from_this();
  co_await reject(std::move(error));
  impl_->linger = kRefusalLinger;
  co_await finish();
}

net::awaitable<void> HttpConnection::finish() {
  Impl& s = *impl_;
  if (s.closed) co_return;
  error_code ec;
  // FIN first: the client sees the reply end, then (after an error reply) its remaining input is
  // discarded until it closes — see Linger.
  s.stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  const auto deadline = std::chrono::steady_clock::now() + s.linger.total;
  size_t discarded = 0;
  while (discarded < s.linger.max_bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    s.stream.expires_after(std::min(left, kLingerQuiet));
    const size_t n = co_await s.stream.async_read_some(net::buffer(s.scratch),
                                                       net::redirect_error(net::use_awaitable, ec));
    if (ec) break;  // the client closed (EOF), reset, went quiet, or close() was called
    discarded += n;
  }
  s.stream.close();
  s.closed = true;
}

net::awaitable<bool> HttpConnection::handle(HttpRequest request, BodyReservation* body) {
  const std::string request_id = request_id_for(*ctx_, request);
  HeaderList headers = common_headers(*ctx_, request, request_id);
  const Authentication auth = authenticate(*ctx_, request);
  RouteOutcome outcome = route_request(*ctx_, request, auth);
  // A tenant's rate-limit headers: generation runs add them when they are admitted
  // (generation_handler.cpp), every other response here.
  if (auth.tenant && !std::holds_alternative<GenerationCall>(outcome) &&
      !std::holds_alternative<ResponseCall>(outcome)) {
    HeaderList limits = ctx_->tenants->headers(auth.tenant->tenant);
    headers.insert(headers.end(), limits.begin(), limits.end());
  }
  // Routing parsed the body into typed values: its bytes leave memory and the budget now.
  std::string().swap(request.body);
  body->reset();
  if (HttpResponse* response = std::get_if<HttpResponse>(&outcome)) {
    co_return co_await write_response(std::move(*response).with_headers(headers));
  }
  if (BlockingCall* call = std::get_if<BlockingCall>(&outcome)) {
    HttpResponse response = co_await on_control(std::move(call->run));
    co_return co_await write_response(std::move(response).with_headers(headers));
  }
  if (CacheCall* cache = std::get_if<CacheCall>(&outcome)) {
    co_return co_await run_cache_create(*this, std::move(cache->spec), std::move(headers),
                                        request_id);
  }
  if (ResponseCall* response = std::get_if<ResponseCall>(&outcome)) {
    co_return co_await run_response(*this, std::move(response->plan), std::move(headers));
  }
  GenerationCall& call = std::get<GenerationCall>(outcome);
  co_return co_await run_generation(*this, std::move(call.spec), std::move(headers), request_id);
}

net::awaitable<bool> HttpConnection::write_response(HttpResponse r) {
  Impl& s = *impl_;
  if (s.closed) co_return false;
  http::response<http::string_body> res{static_cast<http::status>(r.status), s.http10 ? 10 : 11};
  add_headers(res, r.headers);
  if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
  res.body() = std::move(r.body);
  if (r.close || ctx_->draining.load(std::memory_order_acquire)) s.keep_alive = false;
  res.keep_alive(s.keep_alive);
  res.prepare_payload();
  error_code ec;
  s.stream.expires_after(std::chrono::milliseconds(ctx_->config.write_timeout_ms));
  co_await http::async_write(s.stream, res, net::redirect_error(net::use_awaitable, ec));
  s.stream.expires_never();
  if (ec) {
    s.keep_alive = false;
    co_return false;
  }
  co_return true;
}

net::awaitable<bool> HttpConnection::begin_stream(const HeaderList& headers) {
  Impl& s = *impl_;
  if (s.closed) co_return false;
  http::response<http::empty_body> res{http::status::ok, s.http10 ? 10 : 11};
  add_headers(res, headers);
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  if (s.http10) s.keep_alive = false;  // HTTP/1.0: no chunking; the body ends at close
  if (ctx_->draining.load(std::memory_order_acquire)) s.keep_alive = false;
  res.keep_alive(s.keep_alive);
  if (!s.http10) res.chunked(true);
  http::response_serializer<http::empty_body> serializer{res};
  error_code ec;
  s.stream.expires_after(std::chrono::milliseconds(ctx_->config.write_timeout_ms));
  co_await http::async_write_header(s.stream, serializer,
                                    net::redirect_error(net::use_awaitable, ec));
  s.stream.expires_never();
  if (ec) s.keep_alive = false;
  co_return !ec;
}

net::awaitable<bool> HttpConnection::write_stream(std::string_view data) {
  Impl& s = *impl_;
  if (s.closed) co_return false;
  error_code ec;
  s.stream.expires_after(std::chrono::milliseconds(ctx_->config.write_timeout_ms));
  if (s.http10) {
    co_await net::async_write(s.stream, net::buffer(data.data(), data.size()),
                              net::redirect_error(net::use_awaitable, ec));
  } else {
    co_await net::async_write(s.stream, http::make_chunk(net::buffer(data.data(), data.size())),
                              net::redirect_error(net::use_awaitable, ec));
  }
  s.stream.expires_never();
  if (ec) s.keep_alive = false;
  co_return !ec;
}

net::awaitable<bool> HttpConnection::end_stream() {
  Impl& s = *impl_;
  if (s.closed) co_return false;
  if (s.http10) co_return true;
  error_code ec;
  s.stream.expires_after(std::chrono::milliseconds(ctx_->config.write_timeout_ms));
  co_await net::async_write(s.stream, http::make_chunk_last(),
                            net::redirect_error(net::use_awaitable, ec));
  s.stream.expires_never();
  if (ec) s.keep_alive = false;
  co_return !ec;
}

void HttpConnection::watch_peer(AsyncSignal* signal) {
  Impl& s = *impl_;
  s.watch_signal = signal;
  s.watch_stop = false;
  s.peer_closed = false;
  if (s.closed) {
    s.peer_closed = true;
    return;
  }
  s.watch_active = true;
  net::co_spawn(executor(), watch_loop(shared_from_this()), net::detached);
}

net::awaitable<void> HttpConnection::watch_loop(std::shared_ptr<HttpConnection> self) {
  Impl& s = *self->impl_;
  while (!s.watch_stop && s.buffer.size() < kMaxPipelinedBytes) {
    error_code ec;
    const size_t n = co_await s.stream.socket().async_read_some(
        s.buffer.prepare(4096), net::redirect_error(net::use_awaitable, ec));
    s.buffer.commit(n);
    if (ec) {
      if (!s.watch_stop) s.peer_closed = true;
      break;
    }
  }
  s.watch_active = false;
  if (s.watch_signal != nullptr) s.watch_signal->notify();
}

bool HttpConnection::peer_closed() const { return impl_->peer_closed; }

net::awaitable<void> HttpConnection::unwatch_peer() {
  Impl& s = *impl_;
  s.watch_stop = true;
  if (s.watch_active) {
    error_code ec;
    s.stream.socket().cancel(ec);
  }
  while (s.watch_active) co_await s.watch_signal->wait();
  s.watch_signal = nullptr;
}

}  // namespace keel::server
