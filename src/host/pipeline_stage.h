// Pipeline parallelism for a hosted engine (`keel serve --pp 2`, `keel te --pp 2`): stage 0 is
// the engine with the scheduler; stage 1 is a `keel pp-stage` process that holds the second half
// of the layers. connect_stage() either starts that process (StageProcess: started by pid, its
// ready line read, stopped by pid — SIGTERM, then SIGKILL) or connects to one already running at
// PipelineOptions::stage1_address (a placer may put it on another host), then says hello over
// the activation link (pipeline::RemoteStage).
//
// Thread safety: StageProcess and connect_stage from the owner's thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/result.h"
#include "engine/engine_config.h"
#include "model/model.h"
#include "pipeline/remote_stage.h"
#include "proc/output_drain.h"

namespace keel::host {

struct PipelineOptions {
  int stages = 1;              // --pp: 1 (every layer here) or 2
  std::string stage1_address;  // --pp-stage1 HOST:PORT: a running `keel pp-stage`; "" = start one
  std::string stage1_host = "127.0.0.1";  // where a started stage listens
  int stage1_threads = 0;                 // a started stage's compute threads (0 = stage 0's)
  std::string program;         // the keel binary a started stage runs ("" = /proc/self/exe)
  double step_timeout_s = 60;  // --pp-step-timeout: one step's reply from stage 1
  // A started stage maps the weights (`--mmap`) instead of reading them: set when stage 0 maps
  // them (a model store entry: both stages then run from the same shared pages).
  bool stage1_mmap = false;
  // Stage 1 lost (its link broke or a step timed out): false — the steps fail, their requests
  // end with an error (`keel serve`: nobody else could serve them); true — this process stops a
  // stage it started (SIGKILL by pid) and exits with kStageLostExit before any request is failed
  // (`keel te`: its JEs count it dead and re-drive its jobs; its manager replaces it).
  bool exit_on_loss = false;

  [[nodiscard]] bool enabled() const { return stages > 1; }
  // InvalidArgument unless stages is 1 or 2 and the timeout is positive.
  [[nodiscard]] Status validate() const;
};

// The exit status of a TE that lost its stage 1 (exit_on_loss).
inline constexpr int kStageLostExit = 3;

// A started `keel pp-stage` child: its pid and address; destroying it stops it by pid.
class StageProcess {
 public:
  // Starts `program pp-stage -m model --listen host:0 -t threads -c n_ctx --exit-with-peer` and
  // waits for
  // its ready line (up to `timeout_s`). Errors: the launch's, or Unavailable when no ready line
  // came (the child is then stopped).
  static Result<std::unique_ptr<StageProcess>> start(const std::string& program,
                                                     const std::string& model_path,
                                                     const std::string& host, int threads,
                                                     int64_t n_ctx, double timeout_s,
                                                     bool use_mmap = false);
  ~StageProcess();  // SIGTERM; SIGKILL after 5 s; reaped
  StageProcess(const StageProcess&) = delete;
  StageProcess& operator=(const StageProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] const std::string& address() const { return address_; }

 private:
  StageProcess(pid_t pid, std::unique_ptr<proc::OutputDrain> drain)
      : pid_(pid), drain_(std::move(drain)) {}
  pid_t pid_;
  std::unique_ptr<proc::OutputDrain> drain_;  // forwards the child's lines to our log
  std::string address_;
};

// The split: stage 0 holds [0, pipeline_split(n_layer)), the larger half (stage 1 also runs
// the output head).
[[nodiscard]] int64_t pipeline_split(int64_t n_layer);

// Connects stage 0 (the engine about to start with `config`, over `model` loaded from
// `model_path`) to its stage 1: started as a child into *process when no stage1_address is
// given. The KV pool's block count is the one Engine::start will choose.
Result<std::unique_ptr<pipeline::RemoteStage>> connect_stage(
    const PipelineOptions& options, const std::string& model_path, const model::Model& model,
    const engine::EngineConfig& config, std::unique_ptr<StageProcess>* process);

}  // namespace keel::host
