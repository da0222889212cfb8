// BatchStore: the records of /v1/batches (batch_record.h) and, with a state store, everything
// kept about them on disk. The BatchRunner moves a batch through its statuses with update();
// routes read copies. At most kMaxBatches records are kept; past it the oldest finished batch is
// forgotten (a running one never is).
//
// Durability (after attach(): `--state-dir`): each record is written to the state store's
// "batches" collection when added and whenever update() changes it with `persist` (status
// changes; the per-line counts are not written each time: a resumed batch counts them again
// from its progress log). A batch's progress log ("batches/<id>.log") holds one entry per
// finished line — its custom_id and its output or error line — appended durably before the line
// counts as done, so a batch resumed after a restart runs only the lines not in it. Without
// attach() everything lives in memory only and the log calls do nothing.
//
// Thread safety: every member may be called from any thread (one mutex; update()'s function runs
// under it and must not call back into the store; a record is written under it, so the disk
// holds the updates in order); attach() before the store is shared.
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
#include "server/batch_record.h"
#include "state/state_store.h"

namespace keel::server {

inline constexpr size_t kMaxBatches = 10'000;

// One finished line of a batch, as its progress log holds it.
struct FinishedLine {
  std::string custom_id;
  bool ok = false;    // true: a line of the output file; false: of the error file
  std::string jsonl;  // that line (no newline)
};

class BatchStore {
 public:
  // Loads the batch records `state` holds (damaged ones are set aside by the state store and
  // logged) and keeps every later change there. `state` must outlive the store.
  Status attach(state::StateStore* state);
  // Whether attach() was called: records and progress survive a restart.
  [[nodiscard]] bool durable() const { return state_ != nullptr; }
  // With a state store: the error when the record could not be written (then it is not added).
  Status add(BatchRecord record);
  [[nodiscard]] std::optional<BatchRecord> find(std::string_view id) const;
  // Runs fn on batch `id` under the lock, writing the result to the state store when `persist`
  // (a failed write is logged: the record in memory is updated anyway); the updated copy, or
  // nullopt when unknown.
  std::optional<BatchRecord> update(std::string_view id,
                                    const std::function<void(BatchRecord&)>& fn,
                                    bool persist = true);
  // Every batch not in a terminal status, oldest first (to resume after attach()).
  [[nodiscard]] std::vector<BatchRecord> unfinished() const;

  struct Page {
    std::vector<BatchRecord> batches;
    bool has_more = false;
  };
  // Newest first, after batch `after` ("" = from the newest), at most `limit`.
  [[nodiscard]] Page list(size_t limit, std::string_view after) const;

  // Progress logs. record_line: durable when it returns ok.
  Status record_line(std::string_view id, const FinishedLine& line);
  // The lines batch `id` finished, in order, the first entry of each custom_id only; entries the
  // state store found damaged are left out (those lines run again).
  [[nodiscard]] std::vector<FinishedLine> finished_lines(std::string_view id);
  // Drops batch `id`'s progress log (its results are in its files now).
  void forget_lines(std::string_view id);

 private:
  void persist_locked(const BatchRecord& record, uint64_t seq) KEEL_REQUIRES(mu_);

  state::StateStore* state_ = nullptr;  // set once by attach()
  mutable Mutex mu_;
  uint64_t next_seq_ KEEL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, BatchRecord> batches_ KEEL_GUARDED_BY(mu_);  // by creation order
  std::unordered_map<std::string, uint64_t> seq_of_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::server
