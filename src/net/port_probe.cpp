// probe_listen (see port_probe.h).
#include "net/port_probe.h"

#include <boost/asio/ip/tcp.hpp>

namespace keel::net {

Status probe_listen(const std::string& host, uint16_t port) {
  if (port == 0) return Status::ok_status();
  namespace asio = boost::asio;
  using asio::ip::tcp;
  const std::string where = host + ":" + std::to_string(port);
  asio::io_context io;
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec || endpoints.empty()) {
    return Status::unavailable("cannot listen on " + where + ": " +
                               (ec ? ec.message() : std::string("no address")));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) return Status::ok_status();
  return Status::unavailable("cannot listen on " + where + ": " + ec.message());
}

}  // namespace keel::net
