// FleetClient's view of the fleet (see fleet_client.h): every JE asked for its status at once with
// asynchronous calls and the answers merged (fleet_merge.h); the last merged status kept for the
// callers that must not wait (io threads: /health, stats(), metrics()), refreshed in the
// background once older than status_cache.
#include <atomic>
#include <future>
#include <utility>

#include "cluster/gateway/fleet_client.h"
#include "cluster/gateway/fleet_merge.h"
#include "cluster/gateway/fleet_metrics.h"

namespace keel::cluster {

namespace {

// One round of status calls: an answer slot per JE, merged when the last one is in.
struct StatusRound {
  std::vector<JeAnswer> answers;
  std::atomic<size_t> left{0};
  std::function<void(Result<FleetStatus>)> done;
};

}  // namespace

void FleetClient::fleet_status_async(std::function<void(Result<FleetStatus>)> done) const {
  const std::vector<std::shared_ptr<net::Link>> jes = je_links();
  auto round = std::make_shared<StatusRound>();
  {
    MutexLock lock(je_mu_);
    for (size_t i = 0; i < jes.size(); ++i) {
      round->answers.push_back(
          {config_.je_addresses[i], je_ids_[i], Status::unavailable("no answer yet")});
    }
  }
  round->left = jes.size() + 1;  // +1: this function's own hold, released last
  round->done = std::move(done);
  const auto finish_one = [this](const std::shared_ptr<StatusRound>& r) {
    if (r->left.fetch_sub(1) != 1) return;
    {
      MutexLock lock(je_mu_);
      for (size_t i = 0; i < r->answers.size() && i < je_ids_.size(); ++i) {
        if (r->answers[i].status.ok()) je_ids_[i] = r->answers[i].status->je_id;
      }
    }
    Result<FleetStatus> merged = merge_fleet_statuses(r->answers);
    {
      MutexLock lock(status_mu_);
      cached_ = merged;
      cached_at_ = std::chrono::steady_clock::now();
    }
    r->done(std::move(merged));
  };
  for (size_t i = 0; i < jes.size(); ++i) {
    if (jes[i]->closed()) {
      const Status why = jes[i]->close_reason();
      round->answers[i].status =
          Status::unavailable(why.ok() ? "link closed (it exited?)" : why.message());
      finish_one(round);
      continue;
    }
    call_started();
    jes[i]->call_async(net::Message{std::string(msg::kFleet), Json::object()}, config_.call_timeout,
                       [this, round, i, finish_one](Result<Json> reply) {
                         round->answers[i].status =
                             reply.ok() ? decode_fleet_status(*reply) : reply.status();
                         finish_one(round);
                         call_ended();
                       });
  }
  finish_one(round);
}

Result<FleetStatus> FleetClient::fleet_status() const {
  std::promise<Result<FleetStatus>> answered;
  std::future<Result<FleetStatus>> result = answered.get_future();
  fleet_status_async([&answered](Result<FleetStatus> s) { answered.set_value(std::move(s)); });
  return result.get();
}

Result<FleetStatus> FleetClient::fleet_status_snapshot() const {
  bool refresh = false;
  Result<FleetStatus> last = Status::unavailable("the fleet's status is not known yet");
  {
    MutexLock lock(status_mu_);
    if (cached_) last = *cached_;
    if (!refreshing_ &&
        (!cached_ || std::chrono::steady_clock::now() - cached_at_ > config_.status_cache)) {
      refreshing_ = refresh = true;
    }
  }
  if (refresh) {
    fleet_status_async([this](const Result<FleetStatus>&) {
      MutexLock lock(status_mu_);
      refreshing_ = false;
    });
  }
  return last;
}

engine::EngineStats FleetClient::stats() const {
  Result<FleetStatus> fleet = fleet_status_snapshot();
  return fleet.ok() ? merge_stats(fleet->stats) : engine::EngineStats{};
}

engine::MetricsSnapshot FleetClient::metrics() const {
  Result<FleetStatus> fleet = fleet_status_snapshot();
  return fleet.ok() ? merge_metrics(fleet->metrics) : engine::MetricsSnapshot{};
}

}  // namespace keel::cluster
