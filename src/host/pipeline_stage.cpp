// Stage 1 of a pipelined engine: started by pid or reached by address (see pipeline_stage.h).
#include "host/pipeline_stage.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "cluster/protocol/te_spec.h"
#include "core/log.h"
#include "engine/model_identity.h"
#include "model/kv_storage.h"
#include "proc/child_launch.h"
#include "proc/ready_line.h"

namespace keel::host {
namespace {

// Waits up to `timeout` for `pid` to exit; true when it was reaped.
bool reap_within(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || r < 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// exit_on_loss: no request of this process is failed; its JEs re-drive them once it is gone.
std::function<void(const Status&)> exit_on_stage_loss(pid_t started_stage) {
  return [started_stage](const Status& why) {
    KEEL_LOG_ERROR(
        "pipeline: stage 1 lost ({}): exiting (status {}) so that this TE's requests "
        "are re-driven and the TE replaced",
        why.to_string(), kStageLostExit);
    if (started_stage > 0) ::kill(started_stage, SIGKILL);  // ours, maybe hung: stopped by pid
    spdlog::default_logger()->flush();
    std::_Exit(kStageLostExit);
  };
}

}  // namespace

Status PipelineOptions::validate() const {
  if (stages != 1 && stages != 2) {
    return Status::invalid_argument("--pp must be 1 or 2, got " + std::to_string(stages));
  }
  if (!(step_timeout_s > 0)) return Status::invalid_argument("--pp-step-timeout must be > 0");
  return Status();
}

int64_t pipeline_split(int64_t n_layer) { return (n_layer + 1) / 2; }

Result<std::unique_ptr<StageProcess>> StageProcess::start(const std::string& program,
                                                          const std::string& model_path,
                                                          const std::string& host, int threads,
                                                          int64_t n_ctx, double timeout_s,
                                                          bool use_mmap) {
  cluster::TeSpec stage;  // what a stage reads of a TE spec (keel pp-stage --spec -)
  stage.model_path = model_path;
  stage.host = host;
  stage.threads = threads;
  stage.engine.ctx_size = n_ctx;
  stage.engine.use_mmap = use_mmap;
  proc::LaunchSpec spec;
  spec.argv = {program.empty() ? proc::self_exe() : program, "pp-stage", "--spec", "-",
               "--exit-with-peer"};
  spec.stdin_bytes = cluster::te_spec_text(stage);
  KEEL_ASSIGN_OR_RETURN(const proc::LaunchedChild child, proc::launch_child(spec));
  auto drain = std::make_unique<proc::OutputDrain>(
      child.stdout_fd, child.stderr_fd,
      [](std::string_view line) { KEEL_LOG_INFO("pp-stage: {}", line); });
  std::unique_ptr<StageProcess> p(new StageProcess(child.pid, std::move(drain)));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  const std::optional<std::string> line = p->drain_->wait_ready_line(deadline);
  if (!line.has_value()) {
    return Status::unavailable("pipeline stage 1 (pid " + std::to_string(child.pid) +
                               ") did not become ready");
  }
  KEEL_ASSIGN_OR_RETURN(const nlohmann::json ready, proc::parse_ready_line(*line));
  const int port = ready.value("port", 0);
  if (port <= 0) return Status::internal("pipeline stage 1's ready line has no port: " + *line);
  p->address_ = host + ":" + std::to_string(port);
  return p;
}

StageProcess::~StageProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    if (!reap_within(pid_, std::chrono::seconds(5))) {
      ::kill(pid_, SIGKILL);
      reap_within(pid_, std::chrono::seconds(5));
    }
  }
  if (drain_) drain_->finish();
}

Result<std::unique_ptr<pipeline::RemoteStage>> connect_stage(
    const PipelineOptions& options, const std::string& model_path, const model::Model& model,
    const engine::EngineConfig& config, std::unique_ptr<StageProcess>* process) {
  KEEL_TRY(options.validate());
  // A step's residual rows and its reply's logits rows (one per sampling sequence) must each
  // fit one link frame (with room for the batch's other fields).
  const uint64_t reply_bytes = static_cast<uint64_t>(config.scheduler.max_num_seqs) *
                               static_cast<uint64_t>(model.hparams().n_vocab) * sizeof(float);
  const uint64_t step_bytes = static_cast<uint64_t>(config.scheduler.max_batched_tokens) *
                              static_cast<uint64_t>(model.hparams().n_embd + 4) * sizeof(float);
  if (reply_bytes + (1 << 20) > net::kMaxFrameBytes ||
      step_bytes + (4 << 20) > net::kMaxFrameBytes) {
    return Status::invalid_argument(
        "--pp: a step of --max-batched-tokens " +
        std::to_string(config.scheduler.max_batched_tokens) + " or the logits of --max-num-seqs " +
        std::to_string(config.scheduler.max_num_seqs) + " rows exceed one activation frame (" +
        std::to_string(net::kMaxFrameBytes >> 20) + " MiB); lower them");
  }
  std::string address = options.stage1_address;
  if (address.empty()) {
    const int threads = options.stage1_threads > 0 ? options.stage1_threads : config.threads;
    KEEL_ASSIGN_OR_RETURN(
        *process, StageProcess::start(options.program, model_path, options.stage1_host, threads,
                                      model.n_ctx(), 120.0, options.stage1_mmap));
    address = (*process)->address();
  }
  const int64_t n_ctx = model.n_ctx();
  const int64_t max_len = config.scheduler.max_model_len > 0
                              ? std::min<int64_t>(config.scheduler.max_model_len, n_ctx)
                              : n_ctx;
  pipeline::StageSpec spec;
  spec.first_layer = pipeline_split(model.hparams().n_layer);
  KEEL_ASSIGN_OR_RETURN(
      spec.num_blocks,
      engine::kv_pool_blocks(
          config, max_len,
          model::KvLayout::for_model(model.hparams(), config.block_size, config.kv_dtype)));
  spec.block_size = config.block_size;
  spec.kv_dtype = config.kv_dtype;
  spec.max_batch_tokens = config.scheduler.max_batched_tokens;
  KEEL_ASSIGN_OR_RETURN(const kv::BlockHash key, engine::model_identity(model.file()));
  pipeline::RemoteStageOptions ro;
  ro.address = address;
  ro.step_timeout = std::chrono::milliseconds(static_cast<int64_t>(options.step_timeout_s * 1000));
  if (options.exit_on_loss) ro.on_lost = exit_on_stage_loss(*process ? (*process)->pid() : 0);
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::RemoteStage> stage,
                        pipeline::RemoteStage::connect(ro, spec, key));
  KEEL_LOG_INFO("pipeline: stage 0 layers [0, {}), stage 1 layers [{}, {}) at {}{}",
                spec.first_layer, spec.first_layer, model.hparams().n_layer, address,
                *process ? " (pid " + std::to_string((*process)->pid()) + ")" : std::string());
  return stage;
}

}  // namespace keel::host
