// fetch() (see http_fetch.h): async Beast operations run to completion one at a time on a private
// io_context, so tcp_stream's per-operation deadlines apply.
#include "pull/http_fetch.h"

#include <utility>  // before Boost: asio/awaitable.hpp in Boost 1.74 misses this include

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <charconv>
#include <limits>

#include "pull/asio_run_op.h"

namespace keel::pull {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

Status transport(const Url& url, std::string_view what, const error_code& ec) {
  return Status::unavailable(url.str() + ": " + std::string(what) + ": " + ec.message());
}

std::optional<uint64_t> to_u64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string_view sv(beast::string_view v) { return {v.data(), v.size()}; }

template <class Fields>
FetchHead head_of(int status, const Fields& f) {
  FetchHead h;
  h.status = status;
  if (auto it = f.find(http::field::content_length); it != f.end()) {
    h.content_length = to_u64(sv(it->value()));
  }
  if (auto it = f.find(http::field::location); it != f.end()) h.location = sv(it->value());
  if (auto it = f.find("X-Linked-ETag"); it != f.end()) {
    h.etag = sv(it->value());
  } else if (auto e = f.find(http::field::etag); e != f.end()) {
    h.etag = sv(e->value());
  }
  if (auto it = f.find(http::field::content_range); it != f.end()) {
    std::string_view v = sv(it->value());  // "bytes a-b/total"
    if (v.starts_with("bytes ")) {
      v.remove_prefix(6);
      const size_t dash = v.find('-');
      const size_t slash = v.find('/');
      if (dash != std::string_view::npos) h.range_start = to_u64(v.substr(0, dash));
      if (slash != std::string_view::npos) h.total_size = to_u64(v.substr(slash + 1));
    }
  }
  std::erase(h.etag, '"');
  if (h.etag.starts_with("W/")) h.etag.erase(0, 2);
  return h;
}

template <class Stream>
Result<FetchHead> exchange(net::io_context& ioc, Stream& stream, const FetchRequest& req,
                           const HeadSink& on_head, const BodySink& on_body) {
  const Url& url = req.url;
  beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
  http::request<http::empty_body> get{http::verb::get, url.target, 11};
  get.set(http::field::host, url.port == (url.https ? 443 : 80)
                                 ? url.host
                                 : url.host + ":" + std::to_string(url.port));
  get.set(http::field::user_agent, "keel-pull");
  get.set(http::field::accept_encoding, "identity");
  get.set(http::field::connection, "close");
  if (req.offset > 0) get.set(http::field::range, "bytes=" + std::to_string(req.offset) + "-");
  tcp.expires_after(req.io_timeout);
  if (auto ec = run_op(ioc, [&](auto h) { http::async_write(stream, get, h); })) {
    return transport(url, "sending the request", ec);
  }
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // models are large
  tcp.expires_after(req.io_timeout);
  if (auto ec = run_op(ioc, [&](auto h) { http::async_read_header(stream, buffer, parser, h); })) {
    return transport(url, "reading the response head", ec);
  }
  const FetchHead head = head_of(parser.get().result_int(), parser.get());
  KEEL_TRY(on_head(head));
  if (head.status < 200 || head.status >= 300) return head;
  std::vector<std::byte> chunk(size_t{1} << 20);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    tcp.expires_after(req.io_timeout);
    const error_code ec = run_op(ioc, [&](auto h) { http::async_read(stream, buffer, parser, h); });
    const size_t got = chunk.size() - parser.get().body().size;
    if (got > 0) KEEL_TRY(on_body({chunk.data(), got}));  // kept even when the read then failed
    if (ec && ec != http::error::need_buffer) return transport(url, "reading the body", ec);
  }
  return head;
}

}  // namespace

Result<FetchHead> fetch(const FetchRequest& req, const HeadSink& on_head, const BodySink& on_body) {
  const Url& url = req.url;
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  tcp::resolver::results_type endpoints;
  error_code ec = run_op(ioc, [&](auto h) {
    resolver.async_resolve(url.host, std::to_string(url.port),
                           [&endpoints, h](error_code e, tcp::resolver::results_type r) mutable {
                             endpoints = std::move(r);
                             h(e);
                           });
  });
  if (ec) return transport(url, "resolving the host", ec);
  beast::tcp_stream tcp(ioc);
  tcp.expires_after(req.io_timeout);
  ec = run_op(ioc, [&](auto h) { tcp.async_connect(endpoints, h); });
  if (ec) return transport(url, "connecting", ec);
  if (!url.https) return exchange(ioc, tcp, req, on_head, on_body);

  net::ssl::context ctx(net::ssl::context::tls_client);
  ctx.set_default_verify_paths();
  ctx.set_verify_mode(net::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp), ctx);
  if (!SSL_set_tlsext_host_name(tls.native_handle(), url.host.c_str())) {
    return Status::unavailable(url.str() + ": cannot set the TLS server name");
  }
  tls.set_verify_callback(net::ssl::rfc2818_verification(url.host));
  beast::get_lowest_layer(tls).expires_after(req.io_timeout);
  ec = run_op(ioc, [&](auto h) { tls.async_handshake(net::ssl::stream_base::client, h); });
  if (ec) return transport(url, "TLS handshake", ec);
  return exchange(ioc, tls, req, on_head, on_body);
}

}  // namespace keel::pull
