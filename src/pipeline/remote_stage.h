// RemoteStage: engine::PipelineTail over a cluster link to a StageServer (`keel pp-stage`), the
// activation channel of a pipeline-parallel engine. connect() opens the link and says hello (the
// split, the KV pool's shape, the model identity the stage must match); run() sends each step as
// one PpStep frame and waits for its logits rows. A stage that dies closes the link: the step in
// flight and every later one fail at once with Unavailable (the engine finishes their requests
// with an error); a stage that stops answering fails the step after step_timeout. No reconnect:
// a broken pipeline stays broken until the engine is restarted (its KV would be stale anyway).
// on_lost, when set, is told first (once, on the step's thread) and may end the process: a TE
// does, so that its job executors re-drive its requests instead of seeing them fail.
//
// Thread safety: run() from one thread (the step executor); the link's threads are its own.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/pipeline_tail.h"
#include "kv/block_hash.h"
#include "net/link.h"
#include "pipeline/stage_runner.h"

namespace keel::pipeline {

struct RemoteStageOptions {
  std::string address;                               // the stage's "host:port"
  std::chrono::milliseconds connect_timeout{10000};  // link up and hello answered
  std::chrono::milliseconds step_timeout{60000};     // one step's reply (a loaded machine)
  std::function<void(const Status&)> on_lost;        // the link broke or timed out (optional)
};

class RemoteStage final : public engine::PipelineTail {
 public:
  // Unavailable when the stage does not answer; the stage's refusal (another model, a bad
  // split) as it sent it.
  static Result<std::unique_ptr<RemoteStage>> connect(const RemoteStageOptions& options,
                                                      const StageSpec& spec,
                                                      const kv::BlockHash& model_key);
  ~RemoteStage() override;

  [[nodiscard]] int64_t first_layer() const override { return spec_.first_layer; }
  Status run(const engine::PipelineStep& step, std::vector<float>* logits) override;

 private:
  RemoteStage(RemoteStageOptions options, StageSpec spec)
      : options_(std::move(options)), spec_(spec) {}

  RemoteStageOptions options_;
  Status lost(Status why);  // tells on_lost (once), returns `why`

  StageSpec spec_;
  std::shared_ptr<net::Link> link_;
  bool lost_told_ = false;
};

}  // namespace keel::pipeline
