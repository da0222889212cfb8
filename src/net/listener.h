// Listener: a TCP acceptor for cluster links. It binds host:port (0 = a free port), and on its own
// thread turns each accepted connection into a Link with the owner's handlers. stop() closes the
// acceptor and joins the thread; links already made belong to the owner.
//
// Thread safety: port() from any thread; stop() from any thread but the accept thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "core/result.h"
#include "net/link.h"

namespace keel::net {

class Listener {
 public:
  // Called on the accept thread with each new link (already reading).
  using OnLink = std::function<void(std::shared_ptr<Link>)>;

  static Result<std::unique_ptr<Listener>> start(const std::string& host, uint16_t port,
                                                 Link::MessageHandler on_message,
                                                 Link::CloseHandler on_close, OnLink on_link);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] std::string address() const { return host_ + ":" + std::to_string(port_); }
  void stop();

 private:
  Listener() : acceptor_(io_) {}
  void run();

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::string host_;
  uint16_t port_ = 0;
  Link::MessageHandler on_message_;
  Link::CloseHandler on_close_;
  OnLink on_link_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace keel::net
