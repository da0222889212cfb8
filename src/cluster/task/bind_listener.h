// BindListener: a warm TE's bind port. It listens on host:0, and hands the owner the first
// bind_model call that decodes (later binds, and malformed ones, are answered with an error at
// once: a TE binds once). The owner loads the model and answers through reply(). bind_warm_te is
// the binder's side: the call to that port.
//
// Thread safety: wait() and reply() from the owner's thread; the links' reader threads only queue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>

#include "cluster/protocol/bind_model.h"
#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "net/link_server.h"

namespace keel::cluster {

class BindListener {
 public:
  static Result<std::unique_ptr<BindListener>> start(const std::string& host);
  ~BindListener();

  [[nodiscard]] uint16_t port() const { return server_->port(); }
  // The bind, once one came; nullopt after `timeout`.
  [[nodiscard]] std::optional<BindModel> wait(std::chrono::milliseconds timeout);
  // Answers the bind wait() returned; false when its link is gone.
  bool reply(const BindReply& r);

 private:
  BindListener() = default;
  void on_message(net::Link& link, net::Message m);

  std::unique_ptr<net::LinkServer> server_;
  Mutex mu_;
  std::condition_variable cv_;
  std::optional<BindModel> bind_ KEEL_GUARDED_BY(mu_);
  std::shared_ptr<net::Link> bind_link_ KEEL_GUARDED_BY(mu_);  // the link it came on
  int64_t call_id_ KEEL_GUARDED_BY(mu_) = 0;
};

// Sends `bind` to the warm TE whose bind port is host:port and waits for its reply.
[[nodiscard]] Result<BindReply> bind_warm_te(const std::string& host, int port,
                                             const BindModel& bind,
                                             std::chrono::milliseconds timeout);

}  // namespace keel::cluster
