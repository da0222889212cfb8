// UcxWorker: one UCX context and worker (UCP, active messages) driven by one progress thread that
// it owns. Everything that touches the worker — endpoints, listeners, sends, receive handlers —
// runs on that thread: other threads hand it work through post()/run_sync(). The thread polls
// the worker, runs posted tasks and the owner's tick; after a short spin without progress it
// sleeps on its own eventfd at most as long as the tick asks (1 ms while a transfer is active).
// Only progress or a wake-up (post, wake) starts a spin: a sleep that ends with nothing done
// polls once and sleeps again, so an idle worker does not spin (an idle decode TE's receiver
// spun 2 ms of every 12: ~17 % of a core in sched_yield).
// By default the worker is polled, not woken by UCX (UCP_FEATURE_WAKEUP would rule out shared
// memory). A worker started with `wakeup` (for links that cross hosts, where shared memory does not
// apply) also sleeps on UCX's event fd, so a message wakes the thread at once instead of at the
// next tick.
//
// Transports are UCX's choice (UCX_TLS, default "all"): shared memory (sysv/posix + cma) between
// processes on one host, TCP otherwise, RDMA where present.
// Thread safety: post(), run_sync() and stop() from any thread except run_sync()/stop() from the
// worker thread itself; the tick and tasks run on the worker thread.
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/result.h"
#include "core/status.h"

namespace keel::net {

class UcxWorker {
 public:
  // Called on the worker thread after each pass; returns how long the thread may sleep before the
  // next call when nothing happens (wake-ups from the network or post() come sooner).
  using Tick = std::function<std::chrono::milliseconds()>;

  // How long the thread keeps polling (yielding between polls) after the last progress before it
  // sleeps, at most as long as the tick allows. Short: on an oversubscribed host a longer spin
  // measured slower (the spinning thread takes the core its peer needs); see docs/benchmarks.md.
  static constexpr std::chrono::microseconds kDefaultSpinWindow{2000};

  // A context with active messages and wake-up, its worker, and the running progress thread.
  // wakeup: UCP_FEATURE_WAKEUP and the worker's event fd (see above). spin_window: see above (a
  // thread that only waits for completions its peer drives may spin less).
  static Result<std::unique_ptr<UcxWorker>> start(
      std::string name, Tick tick, bool wakeup = false,
      std::chrono::microseconds spin_window = kDefaultSpinWindow);
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;
  ~UcxWorker();  // stop(), then destroys the worker and the context

  [[nodiscard]] ucp_worker_h handle() const { return worker_; }
  // Runs `task` on the worker thread (soon; tasks run in order).
  void post(std::function<void()> task);
  // Wakes the worker thread (its tick runs soon).
  void wake();
  // Runs `task` on the worker thread and waits for it.
  void run_sync(const std::function<void()>& task);
  // Drives progress on the worker thread until `done()` or `timeout` (for closing endpoints
  // inside a task). Worker thread only.
  void progress_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);
  // Drives progress until the worker has been quiet (no progress) for `quiet`, or `timeout`:
  // after closing endpoints, UCX still completes internal work (a closed endpoint's transports
  // are flushed and destroyed in the background), which must finish before the worker is
  // destroyed. Worker thread only.
  void drain(std::chrono::milliseconds quiet, std::chrono::milliseconds timeout);
  // Joins the thread; queued tasks not yet run are dropped. Idempotent.
  void stop();

 private:
  UcxWorker() = default;
  void run();

  std::string name_;
  Tick tick_;
  std::chrono::microseconds spin_window_ = kDefaultSpinWindow;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // an eventfd: post(), wake() and stop() end the thread's sleep
  int ucx_fd_ = -1;    // the worker's event fd (wakeup only; UCX's, not closed here)
  Mutex mu_;
  std::vector<std::function<void()>> tasks_ KEEL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// `host` (an IPv4 literal or a name, resolved to IPv4) and `port` as a socket address.
[[nodiscard]] Result<sockaddr_storage> resolve_ipv4(const std::string& host, uint16_t port);

// "UCX <call>: <status string>" as a Status.
[[nodiscard]] Status ucx_status(const char* what, ucs_status_t status);

}  // namespace keel::net
