// LocalRing: in-process queues as a context-parallel ring (see local_ring.h).
#include "cp/local_ring.h"

#include "core/check.h"

namespace keel::cp {

class LocalRing::End final : public model::CpRing {
 public:
  End(std::shared_ptr<Shared> shared, int rank, int size)
      : shared_(std::move(shared)), rank_(rank), size_(size) {}
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  Status send_next(model::CpMessage msg) override {
    Shared& s = *shared_;
    {
      MutexLock lock(s.mu);
      if (s.closed) return Status::unavailable("context-parallel ring closed");
      s.inbox[static_cast<size_t>((rank_ + 1) % size_)].push_back(std::move(msg));
    }
    s.cv.notify_all();
    return Status();
  }

  Result<model::CpMessage> recv_prev() override {
    Shared& s = *shared_;
    UniqueLock lock(s.mu);
    auto& box = s.inbox[static_cast<size_t>(rank_)];
    const bool got = s.cv.wait_for(lock.native(), s.timeout, [&]() KEEL_NO_THREAD_SAFETY_ANALYSIS {
      return s.closed || !box.empty();
    });
    if (!box.empty()) {
      model::CpMessage msg = std::move(box.front());
      box.pop_front();
      return msg;
    }
    if (!got)
      return Status::unavailable(
          "context-parallel ring: no message from the previous member in time");
    return Status::unavailable("context-parallel ring closed");
  }

  Status flush() override { return Status(); }  // a queued message has already arrived

 private:
  std::shared_ptr<Shared> shared_;
  int rank_, size_;
};

LocalRing::LocalRing(int n_members, std::chrono::milliseconds timeout)
    : shared_(std::make_shared<Shared>()) {
  KEEL_CHECK(n_members >= 1);
  {
    MutexLock lock(shared_->mu);
    shared_->inbox.resize(static_cast<size_t>(n_members));
  }
  shared_->timeout = timeout;
  for (int r = 0; r < n_members; ++r) ends_.push_back(std::make_unique<End>(shared_, r, n_members));
}

LocalRing::~LocalRing() = default;

model::CpRing& LocalRing::end(int rank) { return *ends_[static_cast<size_t>(rank)]; }

void LocalRing::close() {
  {
    MutexLock lock(shared_->mu);
    shared_->closed = true;
  }
  shared_->cv.notify_all();
}

}  // namespace keel::cp
