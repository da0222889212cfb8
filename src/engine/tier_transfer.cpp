// TierTransfer: see tier_transfer.h.
#include "engine/tier_transfer.h"

#include <utility>

namespace keel::engine {

TierTransfer::TierTransfer(kv::KvTiers* tiers, size_t payload_bytes,
                           size_t max_queued_demotion_bytes)
    : tiers_(tiers),
      payload_bytes_(payload_bytes),
      max_queued_demotion_bytes_(max_queued_demotion_bytes),
      thread_([this] { run(); }) {}

TierTransfer::~TierTransfer() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TierTransfer::submit(RequestKey key, std::vector<kv::BlockHash> chain) {
  Job job;
  job.key = key;
  job.chain = std::move(chain);
  {
    MutexLock lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void TierTransfer::demote(const kv::BlockHash& key, std::vector<std::byte> payload) {
  Job job;
  job.demote_key = key;
  job.payload = std::move(payload);
  {
    MutexLock lock(mu_);
    if (queued_demotion_bytes_ + job.payload.size() > max_queued_demotion_bytes_) {
      ++dropped_demotions_;
      return;
    }
    queued_demotion_bytes_ += job.payload.size();
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

int64_t TierTransfer::dropped_demotions() const {
  MutexLock lock(mu_);
  return dropped_demotions_;
}

size_t TierTransfer::pending() const {
  MutexLock lock(mu_);
  return jobs_.size() + (working_ ? 1 : 0);
}

std::vector<TierTransfer::Done> TierTransfer::poll() {
  MutexLock lock(mu_);
  std::vector<Done> out;
  out.swap(done_);
  return out;
}

void TierTransfer::run() {
  while (true) {
    Job job;
    {
      UniqueLock lock(mu_);
      cv_.wait(lock.native(), [this] {
        mu_.assert_held();  // a wait's predicate runs under its lock
        return stop_ || !jobs_.empty();
      });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      working_ = true;
      if (job.chain.empty()) queued_demotion_bytes_ -= job.payload.size();
    }
    if (job.chain.empty()) {
      tiers_->demote(job.demote_key, job.payload);
      MutexLock lock(mu_);
      working_ = false;
      continue;
    }
    Done done;
    done.key = job.key;
    for (const kv::BlockHash& h : job.chain) {
      Promotion p;
      p.payload.resize(payload_bytes_);
      if (!tiers_->fetch(h, p.payload)) break;
      done.promotions.push_back(std::move(p));
    }
    MutexLock lock(mu_);
    done_.push_back(std::move(done));
    working_ = false;
  }
}

}  // namespace keel::engine
