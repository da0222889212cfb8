// libFuzzer target: HTTP/1.1 framing through the server's own connection code. The input is what
// a client sends on one connection (request lines, headers, bodies, pipelined requests, garbage);
// HttpConnection::run() serves it exactly as `keel serve` does — over one end of a socketpair —
// in front of a SyncEngine. When everything has run (the io_context is idle) the client
// half-closes, as a client that has sent its last request. Checks: the connection always ends,
// nothing escapes run() as an exception, and every byte the server sent parses as a sequence of
// complete HTTP responses.
#include <sys/socket.h>

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "server/http_connection.h"
#include "server_fixture.h"

namespace {

namespace net = keel::server::net;
namespace http = boost::beast::http;
using keel::server::error_code;
using keel::server::tcp;

// Every byte of `out` must belong to a complete response (a body without a length ends at EOF).
void check_responses(const std::string& out) {
  size_t pos = 0;
  while (pos < out.size()) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(boost::none);
    error_code ec;
    while (!parser.is_done() && !ec) {
      const size_t n = parser.put(net::buffer(out.data() + pos, out.size() - pos), ec);
      pos += n;
      if (ec == http::error::need_more) ec = {};
      if (!ec && !parser.is_done() && (pos == out.size() || n == 0)) {
        parser.put_eof(ec);  // the server closed: legal only for a body that ends at EOF
        if (!ec && !parser.is_done()) ec = http::error::partial_message;
      }
    }
    if (ec) {
      std::fprintf(stderr, "http_fuzz: malformed response at byte %zu: %s\n", pos,
                   ec.message().c_str());
      std::abort();
    }
  }
}

net::awaitable<void> read_all(tcp::socket& client, std::string* out) {
  std::array<char, 16384> buf;
  for (;;) {
    error_code ec;
    const size_t n = co_await client.async_read_some(net::buffer(buf),
                                                     net::redirect_error(net::use_awaitable, ec));
    out->append(buf.data(), n);
    if (ec) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::quiet_logs();
  std::signal(SIGPIPE, SIG_IGN);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  net::io_context ioc(1);
  std::string sent;
  {
    keel::fuzz::ServerFixture fx;
    tcp::socket server_side(net::make_strand(ioc));
    tcp::socket client(ioc);
    error_code ec;
    server_side.assign(tcp::v4(), fds[0], ec);
    if (ec) std::abort();
    client.assign(tcp::v4(), fds[1], ec);
    if (ec) std::abort();
    auto conn = std::make_shared<keel::server::HttpConnection>(std::move(server_side), &fx.ctx,
                                                               net::any_io_executor());
    bool server_done = false;
    net::co_spawn(conn->executor(), conn->run(), [&server_done](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);  // the server logs and drops such a connection: a bug
      server_done = true;
    });
    const std::string input(reinterpret_cast<const char*>(data), size);
    net::async_write(client, net::buffer(input), [](error_code, size_t) {});
    net::co_spawn(ioc, read_all(client, &sent), net::detached);
    // Run until nothing is left to do but wait for the client, then end the client's side.
    while (ioc.poll() > 0 || ioc.poll() > 0) {
    }
    client.shutdown(tcp::socket::shutdown_send, ec);
    ioc.run();
    if (!server_done) std::abort();
  }
  check_responses(sent);
  return 0;
}
