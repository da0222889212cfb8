// ResponsesBackground: runs the `background: true` responses of /v1/responses. The route stores
// such a response as queued and returns it at once; a pool of worker threads (ServerConfig::
// background_responses, never the io threads) takes queued responses oldest first, marks each
// in_progress, prepares its prompt and runs it as a ResponseRun over the server's EngineClient,
// blocking on a LineInbox (batch_line.h) for its events, and stores the result (completed,
// incomplete, failed). GET /v1/responses/{id} reads the stored status meanwhile, and the output
// so far: a running response's output and usage are updated in the store (in memory only, at most
// every kProgressInterval; the state directory gets the statuses and the result).
//
// Cancel: the stored response turns cancelled at once; a queued one never starts, a running one
// has its engine request aborted and keeps status cancelled (the worker never overwrites a
// cancelled response). stop() (server shutdown) stops every run: those not finished are stored as
// failed (code server_shutdown); with a state directory a restart finds them so.
//
// Thread safety: every public member may be called from any thread but the workers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "server/api_error.h"
#include "server/batch_line.h"
#include "server/responses_run.h"
#include "server/server_context.h"

namespace keel::server {

inline constexpr auto kProgressInterval = std::chrono::milliseconds(200);

class ResponsesBackground {
 public:
  // `ctx` (its engine, tokenizer and response store) must outlive the runner.
  ResponsesBackground(ServerContext& ctx, int32_t num_workers);
  ~ResponsesBackground();
  ResponsesBackground(const ResponsesBackground&) = delete;
  ResponsesBackground& operator=(const ResponsesBackground&) = delete;

  // Queues `plan`, whose queued response is already in ctx.responses.
  void submit(ResponsePlan plan);
  // The response after cancelling it (unchanged when it had finished already); 404 unknown,
  // 400 when it was not created with `background`.
  ApiResult<StoredResponse> cancel(std::string_view id);
  // Stops every run and joins the workers. Idempotent.
  void stop();

 private:
  struct Job {
    std::string id;  // plan.id (read by cancel() under mu_; the plan is the worker's)
    ResponsePlan plan;
    std::shared_ptr<LineInbox> inbox = std::make_shared<LineInbox>();
  };
  void worker();
  void run(Job& job);
  // Stores `r` unless the stored response was cancelled meanwhile.
  void finish(const StoredResponse& r);
  // A running response's output and usage so far, into the store (not persisted).
  void report_progress(const std::string& id, const ResponseRun& run);

  ServerContext& ctx_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queued_ KEEL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Job>> running_ KEEL_GUARDED_BY(mu_);
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace keel::server
