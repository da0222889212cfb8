// Server (see server.h): the listener, the io threads, the connection registry and the shutdown
// sequence. The acceptor lives on its own strand; each connection on another.
#include "server/server.h"

#include <fmt/format.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/thread_pool.hpp>

#include <condition_variable>
#include <ctime>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/failure_streak.h"
#include "core/log.h"
#include "core/mutex.h"
#include "server/batch_runner.h"
#include "server/connection_admission.h"
#include "server/fine_tuning_runner.h"
#include "server/http_connection.h"
#include "server/net.h"
#include "server/responses_background.h"
#include "server/responses_owner.h"
#include "state/state_store.h"

namespace keel::server {

struct Server::Impl {
  // Declared before ctx, so the stores in ctx that write to it go first.
  PosixFileSystem state_fs;
  std::unique_ptr<state::StateStore> state;  // config.state_dir's; null: memory only
  // config.responses_dir's (shared with the cluster's other gateways); null: none
  std::unique_ptr<state::StateStore> shared_responses;

  Impl(ServerConfig config, ServerDeps deps)
      : ctx(std::move(config)),
        acceptor_strand(net::make_strand(ioc)),
        acceptor(acceptor_strand),
        work(net::make_work_guard(ioc)) {
    ctx.deps = std::move(deps);
    ctx.created_unix = static_cast<int64_t>(std::time(nullptr));
    if (ctx.config.tokenizer_threads > 0) {
      tokenize_pool.emplace(static_cast<size_t>(ctx.config.tokenizer_threads));
    }
    // A server in front of a fleet answers /metrics and /v1/cluster/status by asking the job
    // executors: one thread waits on them, never an io thread.
    if (ctx.deps.cluster_status || ctx.deps.extra_metrics) control_pool.emplace(1);
  }

  // A registered connection and the address of its client (for the per-client cap).
  struct Entry {
    std::weak_ptr<HttpConnection> conn;
    net::ip::address client;
  };

  Status listen();
  // Opens config.state_dir (when set) and loads the files, batches, responses and fine-tuning
  // jobs it holds; the responses from config.responses_dir instead when that is set.
  Status open_state();
  Status open_shared_responses();
  void register_connection(const std::shared_ptr<HttpConnection>& conn,
                           const net::ip::address& client);
  void unregister_connection(HttpConnection* conn);
  // Posts close_if_idle() (or close()) to every open connection.
  void close_connections(bool idle_only);
  // Closes the connection that has been idle longest (of `client` only, when given); false when
  // none is idle.
  bool shed_idle_connection(const net::ip::address* client = nullptr);
  // connection_admission.h's verdict for a new connection from `client`.
  Admission admission(const net::ip::address& client) const;
  // Registers `conn` when the caps allow (shedding an idle connection at a cap), else answers
  // 429/503 on it and closes it.
  void admit(const std::shared_ptr<HttpConnection>& conn, const net::ip::address& client);
  void note_accept_failure(const error_code& ec);
  void note_accept_success();
  static net::awaitable<void> accept_loop(Impl* impl);
  static net::awaitable<void> serve(Impl* impl, std::shared_ptr<HttpConnection> conn);
  static net::awaitable<void> refuse(std::shared_ptr<HttpConnection> conn, ApiError error) {
    co_await conn->refuse(std::move(error));
  }

  ServerContext ctx;
  net::io_context ioc;
  std::optional<net::thread_pool> tokenize_pool;  // destroyed (joined) before ioc
  std::optional<net::thread_pool> control_pool;   // BlockingCall handlers (router.h); the same
  std::unique_ptr<BatchRunner> batch_runner;      // stopped by shutdown(), before ctx goes
  std::unique_ptr<ResponsesBackground> responses_background;  // stopped by shutdown() too
  std::unique_ptr<FineTuningRunner> fine_tuning_runner;       // stopped by shutdown() too
  net::any_io_executor acceptor_strand;
  tcp::acceptor acceptor;
  net::executor_work_guard<net::io_context::executor_type> work;
  uint16_t port = 0;
  std::atomic<bool> accepting{true};
  std::vector<std::thread> threads;

  mutable Mutex mu;
  std::condition_variable cv;
  std::unordered_map<HttpConnection*, Entry> connections KEEL_GUARDED_BY(mu);
  std::map<net::ip::address, size_t> per_client KEEL_GUARDED_BY(mu);  // open connections by client
  Mutex shutdown_mu;                                        // guards no data: serializes shutdown()
  bool shut_down KEEL_GUARDED_BY(mu) = false;               // io threads joined
  FailureStreak accept_failures{std::chrono::seconds(60)};  // acceptor strand only
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

Status Server::Impl::open_shared_responses() {
  const std::string& dir = ctx.config.responses_dir;
  Result<std::unique_ptr<state::StateStore>> opened =
      state::StateStore::open_shared(&state_fs, dir);
  Result<std::string> owner =
      opened.ok() ? responses_owner_id(state.get()) : Result<std::string>(opened.status());
  const Status st = owner.ok() ? Status() : owner.status();
  if (st.ok()) {
    shared_responses = std::move(*opened);
    const Status attached = ctx.responses.attach(shared_responses.get(), *owner);
    if (attached.ok()) return {};
    return Status(attached.code(),
                  fmt::format("server: --responses-dir {}: {}", dir, attached.message()));
  }
  return Status(st.code(), fmt::format("server: --responses-dir {}: {}", dir, st.message()));
}

Status Server::Impl::open_state() {
  if (!ctx.config.state_dir.empty()) {
    Result<std::unique_ptr<state::StateStore>> opened =
        state::StateStore::open(&state_fs, ctx.config.state_dir);
    if (!opened.ok()) {
      return Status(opened.status().code(),
                    fmt::format("server: --state-dir {}: {}", ctx.config.state_dir,
                                opened.status().message()));
    }
    state = std::move(*opened);
  }
  if (!ctx.config.responses_dir.empty()) KEEL_TRY(open_shared_responses());
  if (state == nullptr) return {};
  KEEL_TRY(ctx.files.attach(state.get()));
  if (shared_responses == nullptr) KEEL_TRY(ctx.responses.attach(state.get()));
  KEEL_TRY(ctx.fine_tuning.attach(state.get()));
  return ctx.batches.attach(state.get());
}

void Server::Impl::register_connection(const std::shared_ptr<HttpConnection>& conn,
                                       const net::ip::address& client) {
  MutexLock lock(mu);
  connections.emplace(conn.get(), Entry{conn, client});
  ++per_client[client];
}

void Server::Impl::unregister_connection(HttpConnection* conn) {
  MutexLock lock(mu);
  const auto it = connections.find(conn);
  if (it != connections.end()) {
    const auto count = per_client.find(it->second.client);
    if (count != per_client.end() && --count->second == 0) per_client.erase(count);
    connections.erase(it);
  }
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

void Server::Impl::close_connections(bool idle_only) {
  std::vector<std::shared_ptr<HttpConnection>> open;
  {
    MutexLock lock(mu);
    for (auto& [ptr, entry] : connections) {
      if (auto conn = entry.conn.lock()) open.push_back(std::move(conn));
    }
  }
  for (auto& conn : open) {
    net::post(conn->executor(), [conn, idle_only] {
      if (idle_only) {
        conn->close_if_idle();
      } else {
        conn->close();
      }
    });
  }
}

Admission Server::Impl::admission(const net::ip::address& client) const {
  MutexLock lock(mu);
  const auto it = per_client.find(client);
  return admit_connection(connections.size(), it == per_client.end() ? 0 : it->second,
                          ctx.config.max_connections, ctx.config.max_connections_per_client);
}

bool Server::Impl::shed_idle_connection(const net::ip::address* client) {
  std::shared_ptr<HttpConnection> oldest;
  {
    MutexLock lock(mu);
    int64_t oldest_since = 0;
    for (auto& [ptr, entry] : connections) {
      const int64_t since = ptr->idle_since_ns();
      if (since == 0 || (oldest_since != 0 && since >= oldest_since)) continue;
      if (client != nullptr && entry.client != *client) continue;
      if (auto conn = entry.conn.lock()) {
        oldest = std::move(conn);
        oldest_since = since;
      }
    }
  }
  if (oldest == nullptr) return false;
  // Re-checked on its strand: a request that started meanwhile is not cut.
  net::post(oldest->executor(), [oldest] { oldest->close_if_idle(); });
  return true;
}

void Server::Impl::note_accept_failure(const error_code& ec) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  if (accept_failures.fail(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count())) {
    KEEL_LOG_WARN("server: accept failed: {} ({} in a row; closing idle connections, retrying)",
                  ec.message(), accept_failures.streak());
  }
}

void Server::Impl::note_accept_success() {
  if (const int64_t n = accept_failures.succeed(); n > 0) {
    KEEL_LOG_INFO("server: accepting again after {} failed accepts", n);
  }
}

net::awaitable<void> Server::Impl::accept_loop(Impl* impl) {
  const net::any_io_executor tokenize_ex =
      impl->tokenize_pool ? net::any_io_executor(impl->tokenize_pool->get_executor())
                          : net::any_io_executor();
  const net::any_io_executor control_ex =
      impl->control_pool ? net::any_io_executor(impl->control_pool->get_executor())
                         : net::any_io_executor();
  while (impl->accepting.load(std::memory_order_acquire)) {
    tcp::socket socket(net::make_strand(impl->ioc));
    error_code ec;
    co_await impl->acceptor.async_accept(socket, net::redirect_error(net::use_awaitable, ec));
    if (!impl->acceptor.is_open() || !impl->accepting.load(std::memory_order_acquire)) break;
    if (ec) {
      // E.g. out of file descriptors: free one held by an idle connection and retry shortly,
      // logging the first failure of a streak only.
      impl->note_accept_failure(ec);
      impl->shed_idle_connection();
      net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    impl->note_accept_success();
    socket.set_option(tcp::no_delay(true), ec);
    const tcp::endpoint peer = socket.remote_endpoint(ec);
    if (ec) continue;  // gone already
    impl->admit(
        std::make_shared<HttpConnection>(std::move(socket), &impl->ctx, tokenize_ex, control_ex),
        peer.address());
  }
}

void Server::Impl::admit(const std::shared_ptr<HttpConnection>& conn,
                         const net::ip::address& client) {
  std::optional<ApiError> refusal;
  switch (admission(client)) {
    case Admission::kAdmit:
      break;
    case Admission::kClientCap:
      if (!shed_idle_connection(&client)) {
        refusal = ApiError::rate_limited(
            fmt::format("This client address has too many open connections (at most {}).",
                        ctx.config.max_connections_per_client));
      }
      break;
    case Admission::kServerCap:
      if (!shed_idle_connection()) {
        refusal = ApiError::unavailable("The server has too many open connections.");
      }
      break;
  }
  if (refusal) {
    // Not registered: it answers 429/503 and closes within about a second.
    refusal->code = "too_many_connections";
    net::co_spawn(conn->executor(), refuse(conn, std::move(*refusal)), net::detached);
    return;
  }
  register_connection(conn, client);
  net::co_spawn(conn->executor(), serve(this, conn), net::detached);
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { shutdown(); }

Result<std::unique_ptr<Server>> Server::start(ServerConfig config, ServerDeps deps) {
  KEEL_TRY(config.validate());
  if (deps.engine == nullptr) return Status::invalid_argument("server: deps.engine is null");
  if (deps.tokenizer == nullptr) return Status::invalid_argument("server: deps.tokenizer is null");
  auto impl = std::make_unique<Impl>(std::move(config), std::move(deps));
  if (!impl->ctx.config.api_keys_file.empty()) {
    const ServerConfig& c = impl->ctx.config;
    std::string quota_dir = c.quota_dir;
    if (quota_dir.empty() && !c.responses_dir.empty()) quota_dir = c.responses_dir + "/quotas";
    KEEL_ASSIGN_OR_RETURN(impl->ctx.tenants, Tenants::open(c.api_keys_file, nullptr, quota_dir));
  }
  KEEL_TRY(impl->listen());
  KEEL_TRY(impl->open_state());
  Impl* raw = impl.get();
  if (raw->ctx.deps.fine_tuner != nullptr) {  // before the batches: its pins are taken first
    const std::string& dir = raw->ctx.config.state_dir;
    raw->fine_tuning_runner = std::make_unique<FineTuningRunner>(
        raw->ctx, *raw->ctx.deps.fine_tuner, dir.empty() ? "" : dir + "/fine_tuned_models");
    KEEL_TRY(raw->fine_tuning_runner->start());
    raw->ctx.fine_tuning_runner = raw->fine_tuning_runner.get();
  }
  raw->batch_runner =
      std::make_unique<BatchRunner>(raw->ctx, raw->ctx.config.batch_concurrency,
                                    static_cast<size_t>(raw->ctx.config.max_batch_requests));
  raw->ctx.batch_runner = raw->batch_runner.get();
  raw->batch_runner->resume();  // the batches a restart interrupted
  raw->responses_background =
      std::make_unique<ResponsesBackground>(raw->ctx, raw->ctx.config.background_responses);
  raw->ctx.responses_background = raw->responses_background.get();
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
  MutexLock lock(impl_->mu);
  return impl_->connections.size();
}

size_t Server::num_idle_connections() const {
  MutexLock lock(impl_->mu);
  size_t n = 0;
  for (const auto& [ptr, entry] : impl_->connections) n += ptr->idle() ? 1 : 0;
  return n;
}

void Server::stop_accepting() {
  Impl* impl = impl_.get();
  impl->ctx.draining.store(true, std::memory_order_release);
  if (!impl->accepting.exchange(false)) return;
  // Running batches are cancelled (their lines in flight aborted) so a drain does not wait on
  // them; what finished is kept in their output files. With a state directory they are
  // suspended instead, and resume at the next start.
  if (impl->batch_runner) impl->batch_runner->cancel_all();
  net::post(impl->acceptor_strand, [impl] {
    error_code ec;
    impl->acceptor.close(ec);
  });
}

void Server::shutdown() {
  Impl* impl = impl_.get();
  MutexLock serial(impl->shutdown_mu);
  {
    MutexLock lock(impl->mu);
    if (impl->shut_down) return;
  }
  stop_accepting();
  // Idle connections close now; a request in progress finishes first (its final events and
  // [DONE] reach the client; after it the connection closes because the server is draining).
  // Whatever is still open after shutdown_timeout_ms is closed, cutting it. `closing` first: a
  // connection that turns idle after the posts below closes by itself.
  impl->ctx.closing.store(true, std::memory_order_release);
  impl->close_connections(/*idle_only=*/true);
  {
    UniqueLock lock(impl->mu);
    impl->cv.wait_for(lock.native(),
                      std::chrono::milliseconds(impl->ctx.config.shutdown_timeout_ms), [impl] {
                        impl->mu.assert_held();  // a wait's predicate runs under its lock
                        return impl->connections.empty();
                      });
  }
  impl->close_connections(/*idle_only=*/false);
  {
    UniqueLock lock(impl->mu);
    impl->cv.wait_for(lock.native(), std::chrono::seconds(1), [impl] {
      impl->mu.assert_held();
      return impl->connections.empty();
    });
  }
  if (impl->batch_runner) impl->batch_runner->stop();
  if (impl->responses_background) impl->responses_background->stop();
  if (impl->fine_tuning_runner) impl->fine_tuning_runner->stop();
  if (impl->tokenize_pool) impl->tokenize_pool->join();
  if (impl->control_pool) impl->control_pool->join();
  impl->work.reset();
  impl->ioc.stop();
  for (std::thread& t : impl->threads) t.join();
  impl->threads.clear();
  {
    MutexLock lock(impl->mu);
    impl->shut_down = true;
  }
  impl->cv.notify_all();
  KEEL_LOG_INFO("server: stopped");
}

void Server::wait() {
  UniqueLock lock(impl_->mu);
  impl_->cv.wait(lock.native(), [this] {
    impl_->mu.assert_held();
    return impl_->shut_down;
  });
}

}  // namespace keel::server
