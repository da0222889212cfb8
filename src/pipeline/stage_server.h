// StageServer: a later pipeline stage as a service (the `keel pp-stage` process). It holds the
// loaded model and listens for stage 0's link; calls on it (cluster/protocol/link.h framing):
//   pp_hello {model_lo, model_hi, first_layer, num_blocks, block_size, kv_type, max_batch_tokens}
//     → status_body: checks the model identity (engine::model_identity of the GGUF) and builds a
//     fresh StageRunner (KV zeroed) — a reconnecting stage 0 starts over;
//   pp_step {step: binary PpStep} → status_body, plus {logits: binary f32 rows} when OK.
// Steps run on the link's reader thread, one at a time (a mutex guards the runner, should a
// second link appear). A step before any hello is refused (InvalidArgument).
//
// Thread safety: start/stop from the owner; handlers on the links' reader threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/result.h"
#include "kernels/kernels.h"
#include "kv/block_hash.h"
#include "model/model.h"
#include "net/link.h"
#include "net/link_server.h"
#include "pipeline/stage_runner.h"

namespace keel::pipeline {

struct StageServerConfig {
  std::string host = "127.0.0.1";  // --listen's host
  uint16_t port = 0;               // 0 = a free port
  kernels::Isa isa = kernels::Isa::kScalar;
  int threads = 1;
  // Called (on the link's reader thread) when a stage-0 link closes; `keel pp-stage
  // --exit-with-peer` exits then. Empty: nothing.
  std::function<void()> on_link_closed;
};

class StageServer {
 public:
  // `model` must outlive the server.
  static Result<std::unique_ptr<StageServer>> start(const model::Model& model,
                                                    StageServerConfig config);
  ~StageServer();  // stop()
  StageServer(const StageServer&) = delete;
  StageServer& operator=(const StageServer&) = delete;

  [[nodiscard]] uint16_t port() const;
  // Stops accepting, closes every link. Idempotent.
  void stop();
  [[nodiscard]] int64_t num_steps() const;

 private:
  StageServer(const model::Model& model, StageServerConfig config, kv::BlockHash model_key)
      : model_(model), config_(std::move(config)), model_key_(model_key) {}
  void on_message(net::Link& link, net::Message m);
  net::Json hello(const net::Json& body);
  net::Json step(const net::Json& body);

  const model::Model& model_;
  StageServerConfig config_;
  kv::BlockHash model_key_;
  std::unique_ptr<net::LinkServer> server_;
  mutable Mutex mu_;
  Mutex run_mu_;  // one step at a time
  std::unique_ptr<StageRunner> runner_ KEEL_GUARDED_BY(run_mu_);
  std::vector<float> logits_ KEEL_GUARDED_BY(run_mu_);
  int64_t num_steps_ KEEL_GUARDED_BY(mu_) = 0;
};

}  // namespace keel::pipeline
