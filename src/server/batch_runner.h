// BatchRunner: runs the batches of /v1/batches — "one job, many tasks". A pool of worker threads
// (ServerConfig::batch_concurrency, never the io threads) takes, oldest batch first, either a
// queued batch to validate (batch_input.h) or the next line of a running batch, which it runs as
// one engine request set through the server's EngineClient (batch_line.h), so at most that many
// lines are in flight at once and, behind a FleetClient, they spread over the fleet. Lines start
// only while the server is ready (a `keel serve` whose model is still loading holds them). A
// finished line goes to the batch's progress log (BatchStore::record_line: durable with a state
// store) before it counts as done; results are collected in memory and written as the
// output/error files (FileStore) when the last line ends; the record (BatchStore) counts
// completed/failed lines as they end. A batch pins its input file (FileStore::pin) until it ends.
//
// Cancel: the batch turns cancelling, its lines in flight are aborted (EngineClient::abort, via
// their LineInbox), unstarted lines never run (neither completed nor failed: total − completed −
// failed were cancelled), and once no line is in flight it turns cancelled with the files of the
// lines that did finish. Expiry: once a batch's expires_at (created_at + the 24 h completion
// window) passes, no more of its lines start; when those in flight end it turns expired, the
// unstarted lines in its error file with code batch_expired.
//
// Restarts: with a state store (BatchStore::durable()), draining or stopping the server
// suspends the running batches instead of cancelling them — their lines in flight are aborted
// and not counted, their records stay as they are — and resume() (at the next start) queues
// every batch that had not ended: it is validated again, the lines in its progress log are
// taken as done (their output kept) and only the others run; a cancelling batch ends
// cancelled. Without a state store, draining or stopping cancels them.
//
// Every status change but the last (finalizing/cancelling → completed/cancelled/expired, which
// nothing else touches) happens under the runner's mutex, so cancel() and the workers agree on it.
//
// Thread safety: every public member may be called from any thread but the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
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

  // Queues `batch` (already in ctx.batches, status validating) over `input`, the bytes of its
  // input file, which the caller pinned (the runner unpins it when the batch ends).
  void submit(const BatchRecord& batch, std::shared_ptr<const std::string> input);
  // Queues the batches ctx.batches holds that had not ended (after a restart). Once, before
  // requests arrive.
  void resume();
  // The cancelling (or already cancelling) batch; 404 unknown, 409 when it is finalizing or done.
  ApiResult<BatchRecord> cancel(std::string_view id);
  // Cancels (with a state store: suspends) every batch not yet finalizing; returns at once.
  void cancel_all();
  // cancel_all(), then waits for the workers to finish (lines aborted, files of cancelled batches
  // written). Idempotent.
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
  // A job for `batch` over `input` (pinned); kChat or kCompletion from its endpoint.
  static std::shared_ptr<Job> make_job(const BatchRecord& batch,
                                       std::shared_ptr<const std::string> input);
  Pick pick() KEEL_REQUIRES(mu_);
  void cancel_job(Job& job) KEEL_REQUIRES(mu_);
  // cancel_job, or with a state store: stop the job's lines without touching its record.
  void stop_job(Job& job) KEEL_REQUIRES(mu_);
  void resume_one(const BatchRecord& batch);  // resume()
  void validate(const std::shared_ptr<Job>& job);
  void run_line(const Pick& p);
  void finalize(const std::shared_ptr<Job>& job);
  // The output and error file ids finalize() writes: those planned by an earlier try (replaced),
  // else new ones, planned in the record first.
  std::pair<std::string, std::string> plan_result_files(const Job& job);
  // The batch ended (failed, cancelled, completed, expired): its progress log and input pin go.
  void release(const Job& job);

  ServerContext& ctx_;
  const size_t max_lines_;
  // Guards the members below and each shared Job's step state (see Job in batch_runner.cpp,
  // whose fields an annotation cannot tie to this mutex).
  mutable Mutex mu_;
  std::condition_variable cv_;
  // Not yet finalized, oldest first.
  std::deque<std::shared_ptr<Job>> jobs_ KEEL_GUARDED_BY(mu_);
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  size_t in_flight_ KEEL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
};

}  // namespace keel::server
