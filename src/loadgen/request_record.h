// RequestRecord: what the client observed for one benchmark request, in seconds on the run's
// monotonic clock. Filled by StreamTracker (timings, tokens) and the HTTP client (failures);
// read by compute_metrics(). Definitions follow `vllm bench serve`:
//   ttft     first SSE chunk whose `choices` is non-empty − send time
//   itl      gaps between successive such chunks (one entry per chunk after the first)
//   latency  (E2E) the last such chunk − send time (for chat, the usage chunk counts too)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace keel::loadgen {

struct RequestRecord {
  int64_t index = 0;               // position of the request in the workload
  bool success = false;            // the stream completed with [DONE] and had a content chunk
  bool cancelled = false;          // the client hung up on purpose (--disconnect-prob): neither
                                   // a success nor a failure
  std::string error;               // why it failed; "" on success
  double scheduled_s = 0.0;        // planned arrival (offset from the start of the run)
  double start_s = 0.0;            // send time (offset from the start of the run)
  double ttft_s = 0.0;             // see above; 0 when no content chunk arrived
  double latency_s = 0.0;          // see above
  std::vector<double> itl_s;       // [num_content_chunks - 1]
  int64_t num_content_chunks = 0;  // chunks with non-empty choices
  int64_t prompt_len = 0;          // prompt length as generated (tokens or words)
  std::optional<int64_t> usage_prompt_tokens;      // from the streamed usage, if any
  std::optional<int64_t> usage_completion_tokens;  // from the streamed usage, if any
  std::string generated_text;  // concatenated chunk text (kept only when asked for)

  // Arrival time of each content chunk (seconds from the run start): start + TTFT, then the ITLs.
  [[nodiscard]] std::vector<double> chunk_times_s() const {
    std::vector<double> t = {start_s + ttft_s};
    for (double gap : itl_s) t.push_back(t.back() + gap);
    return t;
  }
};

}  // namespace keel::loadgen
