// FineTuningStore: the jobs of /v1/fine_tuning/jobs (fine_tuning_job.h), their events and their
// resumable training states — and, with a state store, all of it on disk. The runner
// (fine_tuning_runner.h) moves jobs through their statuses with update(); routes read copies.
//
// Durability (after attach(): `--state-dir`): a job's record (collection "fine_tuning_jobs") is
// written when added and whenever update() changes it with `persist`. Events go to the job's log
// ("fine_tuning_events/<id>", one entry a JSON array of events) when add_event() flushes: metrics
// events wait in memory for the next flush (a status change, a checkpoint), so a crash loses at
// most the steps since the last saved state, and attach() drops the metrics events of an
// unfinished job past its saved state (FineTuningJob::state_step): a resumed job takes those steps
// again. Training states are blobs ("fine_tuning_states/<id>"). Without attach() everything lives
// in memory only.
//
// Thread safety: every member may be called from any thread (one mutex; disk writes happen under
// it, so the disk holds the updates in order; update()'s function runs under it and must not call
// back into the store); attach() before the store is shared.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "server/fine_tuning_job.h"
#include "state/state_store.h"

namespace keel::server {

class FineTuningStore {
 public:
  // Loads the jobs and events `state` holds (damaged ones are logged and left out) and keeps
  // every later change there. `state` must outlive the store.
  Status attach(state::StateStore* state);
  [[nodiscard]] bool durable() const { return state_ != nullptr; }

  // With a state store: the error when the record could not be written (then it is not added).
  Status add(FineTuningJob job);
  [[nodiscard]] std::optional<FineTuningJob> find(std::string_view id) const;
  // Runs fn on job `id` under the lock, writing the record when `persist` (a failed write is
  // logged); the updated copy, or nullopt when unknown.
  std::optional<FineTuningJob> update(std::string_view id,
                                      const std::function<void(FineTuningJob&)>& fn,
                                      bool persist = true);
  // Every job, oldest first.
  [[nodiscard]] std::vector<FineTuningJob> all() const;
  // Jobs not in a terminal status.
  [[nodiscard]] size_t num_unfinished() const;

  struct Page {
    std::vector<FineTuningJob> jobs;
    bool has_more = false;
  };
  // Newest first, after job `after` ("" = from the newest; unknown → empty), at most `limit`.
  [[nodiscard]] Page list(size_t limit, std::string_view after) const;

  // Appends an event to job `id` (ignored when unknown); with `flush`, it and every event not yet
  // on disk are written as one log entry.
  void add_event(std::string_view id, FtEvent event, bool flush);
  struct EventPage {
    std::vector<FtEvent> events;
    bool has_more = false;
  };
  // Newest first, after event `after` ("" = from the newest), at most `limit`.
  [[nodiscard]] EventPage events(std::string_view id, size_t limit, std::string_view after) const;
  // Every event of job `id`, oldest first.
  [[nodiscard]] std::vector<FtEvent> all_events(std::string_view id) const;

  // The resumable training state of job `id`: kept (durable with a state store) until dropped.
  Status put_state(std::string_view id, std::string bytes);
  // "" when there is none (or it was damaged: logged, and the job starts over).
  [[nodiscard]] std::string state(std::string_view id) const;
  void drop_state(std::string_view id);

 private:
  struct Entry {
    FineTuningJob job;
    uint64_t seq = 0;
    std::vector<FtEvent> events;  // oldest first
    size_t flushed = 0;           // events[0, flushed) are on disk
    std::string state;            // without a state store: the training state
  };
  Entry* find_locked(std::string_view id) KEEL_REQUIRES(mu_);
  const Entry* find_locked(std::string_view id) const KEEL_REQUIRES(mu_);
  void persist_locked(const Entry& e) KEEL_REQUIRES(mu_);
  void load_events_locked(Entry* e) KEEL_REQUIRES(mu_);

  state::StateStore* state_ = nullptr;  // set once by attach()
  mutable Mutex mu_;
  uint64_t next_seq_ KEEL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> jobs_ KEEL_GUARDED_BY(mu_);  // by creation order
  std::unordered_map<std::string, uint64_t> seq_of_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::server
