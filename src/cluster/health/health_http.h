// HealthHttp: a minimal HTTP/1.1 endpoint for probes (Kubernetes' httpGet, curl), on Boost.Beast
// with one thread of its own. GET of one path answers the handler's status and JSON body; any
// other path is 404 and any other method 405 (OpenAI-style error objects); one request per
// connection (Connection: close); a request not read within 2 s, or larger than 8 KiB, drops the
// connection. The handler runs on the endpoint's thread and must not block for long.
//
// Thread safety: start/stop/port from the owner's thread; the handler on the endpoint's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cluster/health/progress_watch.h"
#include "core/result.h"

namespace keel::cluster {

class HealthHttp {
 public:
  using Handler = std::function<HealthReply()>;
  // Listens on host:port (0: a free port) and answers GET `path` with `handler`. InvalidArgument
  // for a bad host, Unavailable when the port cannot be bound.
  static Result<std::unique_ptr<HealthHttp>> start(const std::string& host, uint16_t port,
                                                   std::string path, Handler handler);
  ~HealthHttp();  // stop()
  HealthHttp(const HealthHttp&) = delete;
  HealthHttp& operator=(const HealthHttp&) = delete;

  [[nodiscard]] uint16_t port() const;
  void stop();  // idempotent: closes the listener and the open connections, joins the thread

  struct State;

 private:
  explicit HealthHttp(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace keel::cluster
