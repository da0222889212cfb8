// The load loop of `keel bench-serve`: sends prebuilt requests at their planned arrival times
// (arrivals.h), at most max_concurrency at a time, and collects one RequestRecord each.
//
// Design: one io_context on one thread runs every request as a C++20 coroutine (HttpClient), as
// vLLM's client runs one asyncio task per request. Hundreds of concurrent streams cost one small
// coroutine frame and one socket each; the thread spends microseconds per SSE chunk, so read
// times are stamped within microseconds of arrival even on two shared cores, and no lock or
// cross-thread hand-off sits between a socket read and its timestamp. The concurrency limit is a
// counter plus a wake-up timer (a FIFO semaphore: a request that arrives while all slots are busy
// is sent as soon as one frees, before any later arrival). Send time is stamped when the request
// gets its slot, so client-side queueing is not charged to the server (it is kept separately as
// start_s − scheduled_s).
//
// Thread safety: run_load() and fetch_first_model() block the calling thread; they share nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/result.h"
#include "loadgen/http_client.h"
#include "loadgen/request_record.h"

namespace keel::loadgen {

struct LoadConfig {
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf = all at once
  double burstiness = 1.0;      // Gamma shape of inter-arrival gaps; 1 = Poisson
  int64_t max_concurrency = 0;  // requests in flight at most; 0 = unlimited
  uint64_t seed = 0;            // seeds the arrival schedule

  // Ok, or invalid_argument naming the field out of range.
  [[nodiscard]] Status validate() const;
};

// One request to send: its JSON body and the prompt length recorded for it.
struct PlannedRequest {
  std::string body;
  int64_t prompt_len = 0;
  int64_t disconnect_after = -1;  // hang up after this many content chunks (see StreamPost)
};

struct RunnerConfig {
  ClientConfig client;
  std::string endpoint = "/v1/completions";  // request path (after the base URL's prefix)
  bool chat = false;                         // endpoint is a chat API
  bool keep_text = false;                    // keep generated text in the records
  std::string request_id_prefix;             // x-request-id = prefix + index ("" = none sent)
  LoadConfig load;
  // Called on the load thread after each request finishes (for progress); may be empty. It must
  // be quick: it runs between socket reads.
  std::function<void(const RequestRecord&)> on_complete;
};

struct RunOutput {
  std::vector<RequestRecord> records;  // one per request, in request order; times from run start
  double duration_s = 0.0;             // run start (first arrival) to the last completion
  int64_t connections_opened = 0;
};

// Runs the load. Per-request failures (refused connection, HTTP errors, broken streams) are
// recorded in the records; only an invalid config fails the call.
Result<RunOutput> run_load(const RunnerConfig& config, const std::vector<PlannedRequest>& requests);

// GET <base><path>: the body of a 200 response (blocks; its own connection).
Result<std::string> http_get(const ClientConfig& config, const std::string& path);

// GET <base>/v1/models and return data[0].id.
Result<std::string> fetch_first_model(const ClientConfig& config);

}  // namespace keel::loadgen
