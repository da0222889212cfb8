// LinkServer: a Listener that owns the links it accepts — what every keel service with a control
// port needs (a JE's gateway links, a TE's JE links, the gateway's TE event links, the weights and
// KV peer services, a warm TE's bind port, a pipeline stage, a node agent, the scale-out control).
// Accepted links are kept until they close (closed ones are dropped as the next one arrives) or
// the server stops. stop() closes the acceptor, then every link, and joins their threads; a link
// accepted while it stops is closed at once.
//
// Thread safety: every member from any thread; stop() (and the destructor) not from one of the
// server's own links' threads, which it joins. Links are dropped outside the server's mutex, so a
// link's close handler may call links().
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/result.h"
#include "net/link.h"
#include "net/listener.h"

namespace keel::net {

class LinkServer {
 public:
  // Listens on host:port (0 = a free port); each accepted link runs `on_message` and `on_close`
  // (null: none) on its reader thread.
  static Result<std::unique_ptr<LinkServer>> start(const std::string& host, uint16_t port,
                                                   Link::MessageHandler on_message,
                                                   Link::CloseHandler on_close = nullptr);
  ~LinkServer();
  LinkServer(const LinkServer&) = delete;
  LinkServer& operator=(const LinkServer&) = delete;

  [[nodiscard]] uint16_t port() const { return listener_->port(); }
  [[nodiscard]] std::string address() const { return listener_->address(); }
  // The accepted links still open.
  [[nodiscard]] std::vector<std::shared_ptr<Link>> links() const;
  // Idempotent; see the contract above.
  void stop();

 private:
  LinkServer() = default;
  void adopt(std::shared_ptr<Link> link);

  std::unique_ptr<Listener> listener_;
  mutable Mutex mu_;
  bool stopped_ KEEL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<Link>> links_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::net
