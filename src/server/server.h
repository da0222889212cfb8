// Server: keel's OpenAI-compatible HTTP front end. start() binds host:port, spawns io threads
// running an io_context (one strand per connection, C++20 coroutines), and serves the routes of
// router.h until shutdown.
//
// Lifecycle (what `keel serve` does on SIGTERM): stop_accepting() — the listener closes, /health
// and new generation requests answer 503, keep-alive ends after the current response — then
// engine.drain(timeout) lets in-flight requests finish, then shutdown() closes the remaining
// connections (aborting whatever they still run), stops the io threads and returns. The
// destructor calls shutdown().
//
// Thread safety: every public member may be called from any thread except the server's own io
// threads (shutdown() and wait() join them).
#pragma once

#include <cstdint>
#include <memory>

#include "core/result.h"
#include "server/server_config.h"
#include "server/server_context.h"

namespace keel::server {

class Server {
 public:
  // Validates the config and deps (engine and tokenizer required), binds and starts serving.
  // Errors: InvalidArgument (config/deps), IoError (address in use, bad host).
  static Result<std::unique_ptr<Server>> start(ServerConfig config, ServerDeps deps);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound TCP port (the ephemeral one when config.port was 0).
  [[nodiscard]] uint16_t port() const;
  // Closes the listener and enters draining (see the file comment). Idempotent.
  void stop_accepting();
  // stop_accepting(), then closes every connection, waits up to config.shutdown_timeout_ms for
  // them to wind down, stops and joins the io threads. Idempotent.
  void shutdown();
  // Blocks until the io threads have exited (i.e. until shutdown() completes elsewhere).
  void wait();
  // Number of open connections (for tests and /metrics-like introspection).
  [[nodiscard]] size_t num_connections() const;
  // Of those, the ones idle between requests (HttpConnection::idle()).
  [[nodiscard]] size_t num_idle_connections() const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::server
