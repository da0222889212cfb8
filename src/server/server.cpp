// Server (see server.h): the listener, the io threads, the connection registry and the shutdown
// sequence. The acceptor lives on its own strand; each connection on another.
#include "server/server.h"

#include <fmt/format.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/thread_pool.hpp>

#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "server/http_connection.h"
#include "server/net.h"

namespace keel::server {

struct Server::Impl {
  Impl(ServerConfig config, ServerDeps deps)
      : acceptor_strand(net::make_strand(ioc)),
        acceptor(acceptor_strand),
        work(net::make_work_guard(ioc)) {
    ctx.config = std::move(config);
    ctx.deps = std::move(deps);
    ctx.created_unix = static_cast<int64_t>(std::time(nullptr));
    if (ctx.config.tokenizer_threads > 0) {
      tokenize_pool.emplace(static_cast<size_t>(ctx.config.tokenizer_threads));
    }
  }

  Status listen();
  void register_connection(const std::shared_ptr<HttpConnection>& conn);
  void unregister_connection(HttpConnection* conn);
  static net::awaitable<void> accept_loop(Impl* impl);
  static net::awaitable<void> serve(Impl* impl, std::shared_ptr<HttpConnection> conn);

  ServerContext ctx;
  net::io_context ioc;
  std::optional<net::thread_pool> tokenize_pool;  // destroyed (joined) before ioc
  net::any_io_executor acceptor_strand;
  tcp::acceptor acceptor;
  net::executor_work_guard<net::io_context::executor_type> work;
  uint16_t port = 0;
  std::atomic<bool> accepting{true};
  std::vector<std::thread> threads;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<HttpConnection*, std::weak_ptr<HttpConnection>> connections;  // mu
  std::mutex shutdown_mu;  // serializes shutdown()
  bool shut_down = false;  // mu; io threads joined
};

Status Server::Impl::listen() {
  error_code ec;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(ctx.config.host, std::to_string(ctx.config.port),
                                  tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return Status::invalid_argument(
        fmt::format("server: cannot resolve host \"{}\": {}", ctx.config.host, ec.message()));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  const std::string where = fmt::format("{}:{}", ctx.config.host, ctx.config.port);
  if (acceptor.open(endpoint.protocol(), ec); ec) {
    return Status::io_error(
        fmt::format("server: cannot open a socket for {}: {}", where, ec.message()));
  }
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (acceptor.bind(endpoint, ec); ec) {
    return Status::io_error(fmt::format("server: cannot bind {}: {}", where, ec.message()));
  }
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return Status::io_error(fmt::format("server: cannot listen on {}: {}", where, ec.message()));
  }
  port = acceptor.local_endpoint(ec).port();
  return Status();
}

void Server::Impl::register_connection(const std::shared_ptr<HttpConnection>& conn) {
  std::lock_guard<std::mutex> lock(mu);
  connections.emplace(conn.get(), conn);
}

void Server::Impl::unregister_connection(HttpConnection* conn) {
  std::lock_guard<std::mutex> lock(mu);
  connections.erase(conn);
  cv.notify_all();
}

net::awaitable<void> Server::Impl::serve(Impl* impl, std::shared_ptr<HttpConnection> conn) {
  try {
    co_await conn->run();
  } catch (const std::exception& e) {
    KEEL_LOG_ERROR("server: connection failed: {}", e.what());
  }
  impl->unregister_connection(conn.get());
}

net::awaitable<void> Server::Impl::accept_loop(Impl* impl) {
  const net::any_io_executor tokenize_ex =
      impl->tokenize_pool ? net::any_io_executor(impl->tokenize_pool->get_executor())
                          : net::any_io_executor();
  while (impl->accepting.load(std::memory_order_acquire)) {
    tcp::socket socket(net::make_strand(impl->ioc));
    error_code ec;
    co_await impl->acceptor.async_accept(socket, net::redirect_error(net::use_awaitable, ec));
    if (!impl->acceptor.is_open() || !impl->accepting.load(std::memory_order_acquire)) break;
    if (ec) {
      // E.g. out of file descriptors: back off briefly instead of spinning.
      KEEL_LOG_WARN("server: accept failed: {}", ec.message());
      net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto conn = std::make_shared<HttpConnection>(std::move(socket), &impl->ctx, tokenize_ex);
    impl->register_connection(conn);
    net::co_spawn(conn->executor(), serve(impl, conn), net::detached);
  }
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { shutdown(); }

Result<std::unique_ptr<Server>> Server::start(ServerConfig config, ServerDeps deps) {
  KEEL_TRY(config.validate());
  if (deps.engine == nullptr) return Status::invalid_argument("server: deps.engine is null");
  if (deps.tokenizer == nullptr) return Status::invalid_argument("server: deps.tokenizer is null");
  auto impl = std::make_unique<Impl>(std::move(config), std::move(deps));
  KEEL_TRY(impl->listen());
  Impl* raw = impl.get();
  net::co_spawn(raw->acceptor_strand, Impl::accept_loop(raw), net::detached);
  for (int32_t i = 0; i < raw->ctx.config.io_threads; ++i) {
    raw->threads.emplace_back([raw] {
      try {
        raw->ioc.run();
      } catch (const std::exception& e) {
        KEEL_LOG_ERROR("server: io thread failed: {}", e.what());
      }
    });
  }
  KEEL_LOG_INFO("server: listening on {}:{} (model \"{}\", {} io threads)", raw->ctx.config.host,
                raw->port, raw->ctx.config.served_model_name, raw->ctx.config.io_threads);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const { return impl_->port; }

size_t Server::num_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->connections.size();
}

void Server::stop_accepting() {
  Impl* impl = impl_.get();
  impl->ctx.draining.store(true, std::memory_order_release);
  if (!impl->accepting.exchange(false)) return;
  net::post(impl->acceptor_strand, [impl] {
    error_code ec;
    impl->acceptor.close(ec);
  });
}

void Server::shutdown() {
  Impl* impl = impl_.get();
  std::lock_guard<std::mutex> serial(impl->shutdown_mu);
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    if (impl->shut_down) return;
  }
  stop_accepting();
  std::vector<std::shared_ptr<HttpConnection>> open;
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    for (auto& [ptr, weak] : impl->connections) {
      if (auto conn = weak.lock()) open.push_back(std::move(conn));
    }
  }
  for (auto& conn : open) net::post(conn->executor(), [conn] { conn->close(); });
  open.clear();
  {
    std::unique_lock<std::mutex> lock(impl->mu);
    impl->cv.wait_for(lock, std::chrono::milliseconds(impl->ctx.config.shutdown_timeout_ms),
                      [impl] { return impl->connections.empty(); });
  }
  if (impl->tokenize_pool) impl->tokenize_pool->join();
  impl->work.reset();
  impl->ioc.stop();
  for (std::thread& t : impl->threads) t.join();
  impl->threads.clear();
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    impl->shut_down = true;
  }
  impl->cv.notify_all();
  KEEL_LOG_INFO("server: stopped");
}

void Server::wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->shut_down; });
}

}  // namespace keel::server
