// BatchStore: the records of /v1/batches — OpenAI's Batch object (status, timestamps,
// request_counts, output/error file ids, batch-level errors, metadata), kept in memory. The
// BatchRunner moves a batch through its statuses with update(); routes read copies.
//
// Status flow: validating → in_progress → finalizing → completed; validating → failed (input
// errors, in `errors`); validating/in_progress → cancelling → cancelled. (`expired` is never
// entered: keel runs a batch until it is done.) At most kMaxBatches records are kept; past it
// the oldest finished batch is forgotten (a running one never is).
//
// Thread safety: every member may be called from any thread (one mutex; update()'s function runs
// under it and must not call back into the store).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace keel::server {

enum class BatchStatus {
  kValidating,
  kFailed,
  kInProgress,
  kFinalizing,
  kCompleted,
  kExpired,
  kCancelling,
  kCancelled,
};
std::string_view batch_status_name(BatchStatus status);
// failed, completed, expired, cancelled.
bool is_terminal(BatchStatus status);

// One entry of a batch's `errors.data`.
struct BatchError {
  std::string code;
  std::string message;
  std::optional<std::string> param;
  std::optional<int64_t> line;  // 1-based line of the input file
};

struct BatchRecord {
  std::string id;  // "batch_<hex>"
  std::string endpoint;
  std::string input_file_id;
  std::string completion_window;
  BatchStatus status = BatchStatus::kValidating;
  nlohmann::json metadata;  // null or an object of strings
  std::vector<BatchError> errors;
  std::optional<std::string> output_file_id;
  std::optional<std::string> error_file_id;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  std::optional<int64_t> in_progress_at, finalizing_at, completed_at, failed_at, expired_at,
      cancelling_at, cancelled_at;
  int64_t total = 0;  // request_counts
  int64_t completed = 0;
  int64_t failed = 0;

  [[nodiscard]] nlohmann::json to_json() const;
};

inline constexpr size_t kMaxBatches = 10'000;

class BatchStore {
 public:
  void add(BatchRecord record);
  [[nodiscard]] std::optional<BatchRecord> find(std::string_view id) const;
  // Runs fn on batch `id` under the lock; the updated copy, or nullopt when unknown.
  std::optional<BatchRecord> update(std::string_view id,
                                    const std::function<void(BatchRecord&)>& fn);

  struct Page {
    std::vector<BatchRecord> batches;
    bool has_more = false;
  };
  // Newest first, after batch `after` ("" = from the newest), at most `limit`.
  [[nodiscard]] Page list(size_t limit, std::string_view after) const;

 private:
  mutable std::mutex mu_;
  uint64_t next_seq_ = 0;                             // mu_
  std::map<uint64_t, BatchRecord> batches_;           // mu_; by creation order
  std::unordered_map<std::string, uint64_t> seq_of_;  // mu_
};

}  // namespace keel::server
