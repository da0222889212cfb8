// BatchRunner: runs the batches of /v1/batches — "one job, many tasks". A pool of worker threads
// (ServerConfig::batch_concurrency, never the io threads) takes, oldest batch first, either a
// queued batch to validate (batch_input.h) or the next line of a running batch, which it runs as
// one engine request set through the server's EngineClient (batch_line.h), so at most that many
// lines are in flight at once and, behind a FleetClient, they spread over the fleet. Results are
// collected in memory and written as the output/error files (FileStore) when the last line ends;
// the record (BatchStore) counts completed/failed lines as they end.
//
// Cancel: the batch turns cancelling, its lines in flight are aborted (EngineClient::abort, via
// their LineInbox), unstarted lines never run (neither completed nor failed: total − completed −
// failed were cancelled), and once no line is in flight it turns cancelled with the files of the
// lines that did finish. stop() (server shutdown) cancels every batch and joins the workers;
// cancel_all() (drain) only starts that.
//
// Every status change but the last (finalizing/cancelling → completed/cancelled, which nothing
// else touches) happens under the runner's mutex, so cancel() and the workers agree on it.
//
// Thread safety: every public member may be called from any thread but the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/api_error.h"
#include "server/batch_line.h"
#include "server/batch_store.h"
#include "server/generation_request.h"
#include "server/server_context.h"

namespace keel::server {

class BatchRunner {
 public:
  // `ctx` (its engine, tokenizer, files and batches) must outlive the runner.
  BatchRunner(ServerContext& ctx, int32_t num_workers, size_t max_lines);
  ~BatchRunner();
  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;

  // Queues batch `id` (already in ctx.batches, status validating) over `input`'s bytes.
  void submit(const std::string& id, ApiKind kind, std::string endpoint,
              std::shared_ptr<const std::string> input);
  // The cancelling (or already cancelling) batch; 404 unknown, 409 when it is finalizing or done.
  ApiResult<BatchRecord> cancel(std::string_view id);
  // Cancels every batch not yet finalizing; returns at once.
  void cancel_all();
  // cancel_all(), then waits for the workers to finish (lines aborted, files written). Idempotent.
  void stop();
  // Lines running now (for tests).
  [[nodiscard]] size_t num_in_flight() const;

 private:
  struct Job;
  enum class Task { kNone, kValidate, kLine, kFinalize };
  struct Pick {
    Task task = Task::kNone;
    std::shared_ptr<Job> job;
    size_t line_idx = 0;
    std::shared_ptr<LineInbox> inbox;
  };
  void worker();
  Pick pick();                // mu_
  void cancel_job(Job& job);  // mu_
  void validate(const std::shared_ptr<Job>& job);
  void run_line(const Pick& p);
  void finalize(const std::shared_ptr<Job>& job);

  ServerContext& ctx_;
  const size_t max_lines_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // mu_; not yet finalized, oldest first
  bool stopping_ = false;                  // mu_
  size_t in_flight_ = 0;                   // mu_
  std::vector<std::thread> workers_;
};

}  // namespace keel::server
