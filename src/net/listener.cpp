// Listener (see listener.h): bind, accept loop, stop through the native handle.
#include "net/listener.h"

#include <sys/socket.h>

#include <utility>

#include "core/log.h"

namespace keel::net {

namespace asio = boost::asio;
using asio::ip::tcp;

Result<std::unique_ptr<Listener>> Listener::start(const std::string& host, uint16_t port,
                                                  Link::MessageHandler on_message,
                                                  Link::CloseHandler on_close, OnLink on_link) {
  std::unique_ptr<Listener> l(new Listener());
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return Status::invalid_argument("bad listen address \"" + host + "\"");
  const tcp::endpoint endpoint(address, port);
  l->acceptor_.open(endpoint.protocol(), ec);
  if (!ec) l->acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) l->acceptor_.bind(endpoint, ec);
  if (!ec) l->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::io_error("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                            ec.message());
  }
  l->host_ = host;
  l->port_ = l->acceptor_.local_endpoint().port();
  l->on_message_ = std::move(on_message);
  l->on_close_ = std::move(on_close);
  l->on_link_ = std::move(on_link);
  l->thread_ = std::thread([p = l.get()] { p->run(); });
  return l;
}

Listener::~Listener() { stop(); }

void Listener::stop() {
  if (stopping_.exchange(true)) {
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    return;
  }
  ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
}

void Listener::run() {
  while (!stopping_.load()) {
    tcp::socket socket(io_);
    boost::system::error_code ec;
    acceptor_.accept(socket, ec);
    if (ec) {
      if (stopping_.load()) return;
      KEEL_LOG_WARN("listener {}: accept failed: {}", address(), ec.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::string peer = "?";
    const auto remote = socket.remote_endpoint(ec);
    if (!ec) peer = remote.address().to_string() + ":" + std::to_string(remote.port());
    on_link_(Link::start(std::move(socket), on_message_, on_close_, peer));
  }
}

}  // namespace keel::net
