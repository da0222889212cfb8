// The input file of a batch, checked when the batch starts (status validating): a JSONL file whose
// every non-blank line is {"custom_id": string, "method": "POST", "url": <the batch's endpoint>,
// "body": object}. A line that breaks this — malformed JSON, a missing or mistyped field, another
// method or url, a custom_id seen before — fails the whole batch, listing the offending lines in
// the batch's `errors` (at most kMaxBatchErrors), as OpenAI does. The bodies themselves are
// validated later, one by one, when their line runs (a bad body fails that line only).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/batch_store.h"

namespace keel::server {

struct BatchLine {
  int64_t line = 0;  // 1-based line number in the input file
  std::string custom_id;
  std::string_view text;  // the whole line (its JSON), a view into the input file's bytes
};

struct BatchInput {
  std::vector<BatchLine> lines;    // when errors is empty
  std::vector<BatchError> errors;  // non-empty: the batch fails
};

inline constexpr size_t kMaxBatchErrors = 100;

// The batch endpoints keel runs.
bool is_batch_endpoint(std::string_view url);

// Checks `content` (kept alive by the caller while the lines are used) for `endpoint`; more
// than max_lines requests is an error too.
BatchInput parse_batch_input(std::string_view content, std::string_view endpoint, size_t max_lines);

}  // namespace keel::server
