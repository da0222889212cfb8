// TestHttpServer (see test_http_server.h): a blocking accept loop and a thread per connection.
#include "test_http_server.h"

#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace keel::testing {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

struct TestHttpServer::Impl {
  TestHttpServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::atomic<bool> stopping{false};
  std::thread accept_thread;
  mutable std::mutex mu;
  std::vector<std::thread> connections;  // guarded by mu
  std::vector<std::string> ranges;       // guarded by mu
  int drops_left = 0;                    // guarded by mu

  void accept_loop() {
    while (!stopping.load()) {
      tcp::socket socket(ioc);
      boost::system::error_code ec;
      acceptor.accept(socket, ec);
      if (ec || stopping.load()) return;
      std::lock_guard lock(mu);
      connections.emplace_back([this, s = std::move(socket)]() mutable { serve(std::move(s)); });
    }
  }

  static bool serves_file(const std::string& target) {
    return target.starts_with("/m/") || target.find("/resolve/") != std::string::npos;
  }

  void serve(tcp::socket socket) {
    boost::beast::flat_buffer buffer;
    http::request<http::empty_body> req;
    boost::system::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    const std::string target(req.target());
    const std::string range(req[http::field::range]);
    bool drop = false;
    {
      std::lock_guard lock(mu);
      ranges.push_back(range);
      if (serves_file(target) && drops_left > 0) {
        --drops_left;
        drop = true;
      }
    }
    std::string head;
    std::string_view body;
    if (target.starts_with("/r/")) {
      head = "HTTP/1.1 302 Found\r\nLocation: /m/" + target.substr(3) + "\r\nContent-Length: 0\r\n";
    } else if (!serves_file(target)) {
      head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n";
    } else {
      const std::string& content = options.content;
      uint64_t start = 0;
      if (range.starts_with("bytes=") && !options.ignore_range) {
        start = std::stoull(range.substr(6));
      }
      if (start >= content.size() && start > 0) {
        head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" +
               std::to_string(content.size()) + "\r\nContent-Length: 0\r\n";
      } else {
        body = std::string_view(content).substr(start);
        head = start > 0 ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " +
                               std::to_string(start) + "-" + std::to_string(content.size() - 1) +
                               "/" + std::to_string(content.size()) + "\r\n"
                         : "HTTP/1.1 200 OK\r\n";
        head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
        if (!options.etag.empty()) head += "X-Linked-ETag: \"" + options.etag + "\"\r\n";
      }
    }
    head += "Connection: close\r\n\r\n";
    net::write(socket, net::buffer(head), ec);
    if (drop) body = body.substr(0, std::min<uint64_t>(body.size(), options.drop_after));
    if (!ec && !body.empty()) net::write(socket, net::buffer(body.data(), body.size()), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }
};

TestHttpServer::TestHttpServer(TestHttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->drops_left = impl_->options.drops;
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept_thread = std::thread([this] { impl_->accept_loop(); });
}

TestHttpServer::~TestHttpServer() { stop(); }

std::string TestHttpServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<std::string> TestHttpServer::ranges() const {
  std::lock_guard lock(impl_->mu);
  return impl_->ranges;
}

void TestHttpServer::stop() {
  if (impl_->stopping.exchange(true)) return;
  // Wake the blocking accept with a connection of our own, then join everything.
  {
    boost::system::error_code ec;
    tcp::socket poke(impl_->ioc);
    poke.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
  }
  impl_->accept_thread.join();
  boost::system::error_code ec;
  impl_->acceptor.close(ec);  // later connections are refused
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(impl_->mu);
    threads.swap(impl_->connections);
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace keel::testing
