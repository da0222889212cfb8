// UcxWorker: the progress loop (see ucx_worker.h).
#include "net/ucx_worker.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <future>
#include <string>

namespace keel::net {

Status ucx_status(const char* what, ucs_status_t status) {
  return Status::unavailable(std::string("UCX ") + what + ": " + ucs_status_string(status));
}

Result<sockaddr_storage> resolve_ipv4(const std::string& host, uint16_t port) {
  sockaddr_storage storage{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&storage);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sin->sin_addr) == 1) return storage;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return Status::invalid_argument("cannot resolve host '" + host + "'");
  }
  sin->sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return storage;
}

Result<std::unique_ptr<UcxWorker>> UcxWorker::start(std::string name, Tick tick, bool wakeup,
                                                    std::chrono::microseconds spin_window) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  w->name_ = std::move(name);
  w->tick_ = std::move(tick);
  w->spin_window_ = spin_window;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  // No UCP_FEATURE_WAKEUP: asking for it restricts UCX to transports with event fds, which on
  // one host means TCP instead of shared memory (sysv/posix + cma). The worker is polled instead.
  params.features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0);
  params.name = w->name_.c_str();
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return ucx_status("config_read", s);
  s = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (s != UCS_OK) return ucx_status("init", s);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread touches the worker
  s = ucp_worker_create(w->context_, &wp, &w->worker_);
  if (s != UCS_OK) return ucx_status("worker_create", s);
  if (wakeup) {
    s = ucp_worker_get_efd(w->worker_, &w->ucx_fd_);
    if (s != UCS_OK) return ucx_status("worker_get_efd", s);
  }
  w->event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->event_fd_ < 0) return Status::io_error("eventfd failed");
  w->thread_ = std::thread([raw = w.get()] { raw->run(); });
  return w;
}

void UcxWorker::wake() {
  const uint64_t one = 1;
  (void)::write(event_fd_, &one, sizeof(one));
}

UcxWorker::~UcxWorker() {
  stop();
  if (event_fd_ >= 0) ::close(event_fd_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxWorker::post(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(task));
  }
  wake();
}

void UcxWorker::run_sync(const std::function<void()>& task) {
  std::promise<void> done;
  post([&] {
    task();
    done.set_value();
  });
  done.get_future().wait();
}

void UcxWorker::progress_until(const std::function<bool()>& done,
                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) ucp_worker_progress(worker_);
}

void UcxWorker::drain(std::chrono::milliseconds quiet, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (ucp_worker_progress(worker_) != 0) {
      last_progress = now;
    } else if (now - last_progress >= quiet || now - start >= timeout) {
      return;
    }
  }
}

void UcxWorker::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  wake();
  thread_.join();
}

void UcxWorker::run() {
  auto last_busy = std::chrono::steady_clock::now();
  std::vector<std::function<void()>> batch;
  while (!stop_.load(std::memory_order_relaxed)) {
    {
      MutexLock lock(mu_);
      batch.swap(tasks_);
    }
    for (auto& task : batch) task();
    const bool had_tasks = !batch.empty();
    batch.clear();
    const unsigned progressed = ucp_worker_progress(worker_);
    const std::chrono::milliseconds sleep = tick_ ? tick_() : std::chrono::milliseconds(100);
    const auto now = std::chrono::steady_clock::now();
    if (progressed != 0 || had_tasks || sleep.count() == 0) {
      last_busy = now;
      continue;
    }
    if (now - last_busy < spin_window_) {
      std::this_thread::yield();  // on an oversubscribed host, let the peer thread run
      continue;
    }
    // With wakeup, arm UCX's event fd first; BUSY: events came meanwhile, progress them.
    if (ucx_fd_ >= 0 && ucp_worker_arm(worker_) == UCS_ERR_BUSY) {
      last_busy = now;
      continue;
    }
    // Sleep until post(), wake() or stop() signal (or, with wakeup, a UCX event), or the tick is
    // due. Only a signal starts a new spin (work was handed over); a sleep that timed out polls
    // the worker once more and sleeps again, so an idle worker costs one poll per tick, not a
    // spin window per tick.
    pollfd pfd[2] = {{event_fd_, POLLIN, 0}, {ucx_fd_, POLLIN, 0}};
    if (::poll(pfd, ucx_fd_ >= 0 ? 2 : 1, static_cast<int>(sleep.count())) > 0) {
      if ((pfd[0].revents & POLLIN) != 0) {
        uint64_t count = 0;
        (void)::read(event_fd_, &count, sizeof(count));
      }
      last_busy = std::chrono::steady_clock::now();
    }
  }
}

}  // namespace keel::net
