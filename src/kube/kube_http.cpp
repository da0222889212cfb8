// kube_call (see kube_http.h): Beast's async operations chained on a private io_context and run
// until done or until the tcp_stream's deadline expires.
#include "kube/kube_http.h"

#include <utility>  // before Boost: asio/awaitable.hpp in Boost 1.74 misses this include

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "pull/asio_run_op.h"

namespace keel::kube {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

using pull::run_op;

Status transport(const pull::Url& api, std::string_view stage, const error_code& ec,
                 std::chrono::milliseconds timeout) {
  const std::string what = ec == beast::error::timeout
                               ? "timed out after " + std::to_string(timeout.count()) + " ms"
                               : ec.message();
  return Status::unavailable("kubernetes API " + api.host + ":" + std::to_string(api.port) + ": " +
                             std::string(stage) + ": " + what);
}

template <class Stream>
Result<KubeResponse> exchange(net::io_context& ioc, Stream& stream, const KubeEndpoint& ep,
                              const KubeRequest& r, std::chrono::milliseconds timeout) {
  const http::verb verb = http::string_to_verb(r.method);
  if (verb == http::verb::unknown) return Status::invalid_argument("bad HTTP method " + r.method);
  http::request<http::string_body> req{verb, r.target, 11};
  const bool default_port = ep.api.port == (ep.api.https ? 443 : 80);
  req.set(http::field::host,
          default_port ? ep.api.host : ep.api.host + ":" + std::to_string(ep.api.port));
  req.set(http::field::user_agent, "keel-autoscaler");
  req.set(http::field::accept, "application/json");
  req.set(http::field::connection, "close");
  if (!r.bearer_token.empty()) req.set(http::field::authorization, "Bearer " + r.bearer_token);
  if (!r.body.empty() || verb != http::verb::get) {
    if (!r.content_type.empty()) req.set(http::field::content_type, r.content_type);
    req.body() = r.body;
    req.prepare_payload();
  }
  if (auto ec = run_op(ioc, [&](auto h) { http::async_write(stream, req, h); })) {
    return transport(ep.api, "sending " + r.method + " " + r.target, ec, timeout);
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(16 * 1024 * 1024);
  if (auto ec = run_op(ioc, [&](auto h) { http::async_read(stream, buffer, parser, h); })) {
    return transport(ep.api, "reading the answer to " + r.method + " " + r.target, ec, timeout);
  }
  return KubeResponse{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

}  // namespace

Result<KubeResponse> kube_call(const KubeEndpoint& ep, const KubeRequest& r,
                               std::chrono::milliseconds timeout) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  error_code ec;
  const auto endpoints = resolver.resolve(ep.api.host, std::to_string(ep.api.port), ec);
  if (ec) return transport(ep.api, "resolving the host", ec, timeout);
  beast::tcp_stream tcp(ioc);
  tcp.expires_after(timeout);  // one deadline for the whole exchange
  ec = run_op(ioc, [&](auto h) { tcp.async_connect(endpoints, h); });
  if (ec) return transport(ep.api, "connecting", ec, timeout);
  if (!ep.api.https) return exchange(ioc, tcp, ep, r, timeout);

  net::ssl::context ctx(net::ssl::context::tls_client);
  if (ep.ca_file.empty()) {
    ctx.set_default_verify_paths();
  } else {
    ctx.load_verify_file(ep.ca_file, ec);
    if (ec) return Status::io_error("kubernetes CA " + ep.ca_file + ": " + ec.message());
  }
  ctx.set_verify_mode(net::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp), ctx);
  if (!SSL_set_tlsext_host_name(tls.native_handle(), ep.api.host.c_str())) {
    return Status::unavailable("kubernetes API " + ep.api.host +
                               ": cannot set the TLS server name");
  }
  tls.set_verify_callback(net::ssl::rfc2818_verification(ep.api.host));
  ec = run_op(ioc, [&](auto h) { tls.async_handshake(net::ssl::stream_base::client, h); });
  if (ec) return transport(ep.api, "TLS handshake", ec, timeout);
  return exchange(ioc, tls, ep, r, timeout);
}

}  // namespace keel::kube
