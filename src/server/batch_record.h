// BatchRecord: one batch of /v1/batches as OpenAI's Batch object describes it (status, timestamps,
// request_counts, output/error file ids, batch-level errors, metadata), its JSON for the API
// (to_json) and the JSON the state store keeps (to_state_json / batch_record_from_state_json:
// the API object plus what only keel needs to resume it).
//
// Status flow: validating → in_progress → finalizing → completed; validating → failed (input
// errors, in `errors`); validating/in_progress → cancelling → cancelled; in_progress → expired
// (the completion window passed before every line ran).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

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
// The status named `name`, or nullopt.
std::optional<BatchStatus> parse_batch_status(std::string_view name);
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
  // Not in the API object: the ids finalizing gives the output and error files, chosen (and
  // kept in the state store) before they are written, so a finalize repeated after a crash
  // replaces the same files instead of leaving orphans.
  std::optional<std::string> planned_output_file_id, planned_error_file_id;

  [[nodiscard]] nlohmann::json to_json() const;
  // to_json() plus "keel": {"seq": seq, the planned file ids}.
  [[nodiscard]] nlohmann::json to_state_json(uint64_t seq) const;
};

// The record (and its `seq`) of to_state_json's output; Corrupt naming what is missing or
// mistyped.
Result<std::pair<BatchRecord, uint64_t>> batch_record_from_state_json(const nlohmann::json& j);

}  // namespace keel::server
