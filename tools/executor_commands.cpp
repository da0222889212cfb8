// `keel te` and `keel je`: one task executor (a model, an engine, the TE-shell) and one job
// executor, each a process that prints its KEEL_READY line once serving and drains on SIGTERM.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

#include "builtin_models.h"
#include "cluster/job_executor.h"
#include "cluster/kv_event_convert.h"
#include "cluster/kv_event_publisher.h"
#include "cluster/kv_handoff.h"
#include "cluster/kv_handoff_streams.h"
#include "cluster/kv_transfer_server.h"
#include "cluster/pd_heatmap.h"
#include "cluster/ready_line.h"
#include "cluster/task_executor.h"
#include "cluster_commands.h"
#include "core/file_system.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/model_identity.h"
#include "gguf/reader.h"
#include "host/compute.h"
#include "host/engine_host.h"
#include "predictor/length_predictor.h"
#include "stop_signals.h"

namespace keel::cli {
namespace {

Result<kv::BlockHash> model_key(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  return engine::model_identity(file);
}

Status te_main(const TeOptions& opts, const sigset_t& stop_signals) {
  const ServeOptions& o = opts.engine;
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(o.compute));
  std::string path = o.model_path;
  {
    ThreadPool pool(compute.threads);
    KEEL_ASSIGN_OR_RETURN(path, resolve_model_path(o.model_path, pool));
  }
  // The cache-event publisher outlives the engine that feeds it (declared first).
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::KvEventPublisher> events,
                        cluster::KvEventPublisher::start({}));
  // A streamed handoff's watch list, fed by the engine's tap: outlives the engine (declared first).
  std::unique_ptr<cluster::KvHandoffStreams> streams;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<host::EngineHost> host, host::EngineHost::open(path));
  host::StartOptions start;
  start.cache_events = cluster::publishing_sink(events.get(), o.block_size);
  const cluster::TeRole role =
      cluster::parse_te_role(opts.role).value_or(cluster::TeRole::kColocated);
  start.compute = compute;
  start.use_mmap = o.compute.use_mmap;
  start.group_weights = o.compute.weight_layout != "rows";
  start.n_ctx = o.ctx_size;
  start.engine = serve_engine_config(o);
  // A prefill TE computes prompts in chunks of --prefill-chunk tokens, so a streamed handoff
  // sends every chunk's blocks while the next one computes.
  KEEL_ASSIGN_OR_RETURN(cluster::KvTransferFaults faults,
                        cluster::parse_kv_transfer_faults(opts.handoff.fault));
  const cluster::KvHandoffMode handoff_mode =
      cluster::parse_kv_handoff_mode(opts.handoff.mode).value_or(cluster::KvHandoffMode::kStream);
  if (role == cluster::TeRole::kPrefill) {
    if (opts.handoff.prefill_chunk > 0) {
      start.engine.scheduler.max_batched_tokens =
          std::min(start.engine.scheduler.max_batched_tokens, opts.handoff.prefill_chunk);
    }
    if (handoff_mode == cluster::KvHandoffMode::kStream) {
      streams = std::make_unique<cluster::KvHandoffStreams>();
      start.published_blocks = cluster::handoff_tap(streams.get());
    }
  }
  // A decode TE receives prefills' KV into its host tier (T1): it needs one.
  if (role == cluster::TeRole::kDecode && start.engine.kv_host_bytes == 0) {
    start.engine.kv_host_bytes = int64_t{256} << 20;
  }
  const int32_t start_chunk_tokens = start.engine.scheduler.max_batched_tokens;
  KEEL_TRY(host->start(std::move(start)));
  engine::Engine* eng = host->engine();
  std::unique_ptr<cluster::KvHandoff> handoff;          // prefill role
  std::unique_ptr<cluster::KvTransferServer> transfer;  // decode role
  if (role == cluster::TeRole::kPrefill) {
    cluster::KvHandoffConfig hc;
    hc.mode = handoff_mode;
    hc.streams = streams.get();
    hc.faults = faults;
    KEEL_ASSIGN_OR_RETURN(hc.model_key, model_key(path));
    hc.kv_identity = eng->kv_identity();
    hc.block_size = o.block_size;
    hc.block_bytes = eng->kv_block_bytes();
    hc.read_block = [eng](const kv::BlockHash& h, std::span<std::byte> out) {
      return eng->read_kv_block(h, out);
    };
    handoff = std::make_unique<cluster::KvHandoff>(std::move(hc));
  } else if (role == cluster::TeRole::kDecode) {
    cluster::KvTransferServerOptions so;
    so.host = o.host;
    so.kv_identity = eng->kv_identity();
    so.payload_bytes = eng->kv_block_bytes();
    KEEL_ASSIGN_OR_RETURN(
        transfer, cluster::KvTransferServer::start(
                      so, [eng](const cluster::KvFrameHeader& h, std::span<const std::byte> p) {
                        const Status s = eng->accept_kv_block(h.block_hash, p);
                        if (!s.ok()) KEEL_LOG_WARN("te: received block dropped: {}", s.message());
                      }));
  }

  cluster::TaskExecutorConfig config;
  config.id = opts.id;
  config.role = role;
  config.handoff = handoff.get();
  if (transfer) config.kv_transfer = o.host + ":" + std::to_string(transfer->port());
  config.model = served_model_name(o.served_model_name, o.model_path, path);
  config.host = o.host;
  config.port = static_cast<uint16_t>(o.port);
  config.report_interval = std::chrono::milliseconds(opts.report_interval_ms);
  config.kv_events = events->endpoint();
  config.kv_events_replay = events->replay_endpoint();
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::TaskExecutor> te,
                        cluster::TaskExecutor::start(config, host->client()));
  KEEL_LOG_INFO("te {}: {} on {} ({} threads), control at {}", opts.id, config.model, path,
                compute.threads, te->address());
  if (handoff) {
    KEEL_LOG_INFO("te {}: KV handoff {}, prefill chunks of {} tokens", opts.id,
                  cluster::kv_handoff_mode_name(handoff_mode), start_chunk_tokens);
  }
  KEEL_TRY(cluster::print_ready_line(
      {{"role", "te"}, {"id", opts.id}, {"port", te->port()}, {"pid", getpid()}}));

  int sig = 0;
  sigwait(&stop_signals, &sig);
  KEEL_LOG_INFO("te {}: {}: draining", opts.id, signal_name(sig));
  host->engine()->drain(std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1000)));
  te->stop();
  handoff.reset();   // its thread reads from the engine
  transfer.reset();  // it writes into the engine
  host.reset();      // the engine stops before its publisher
  return {};
}

Status je_main(const JeOptions& opts, const sigset_t& stop_signals) {
  cluster::JobExecutorConfig config;
  config.id = opts.id;
  config.host = opts.host;
  config.port = static_cast<uint16_t>(opts.port);
  config.te_addresses = opts.tes;
  config.stall_timeout = std::chrono::milliseconds(opts.stall_timeout_ms);
  config.model = served_model_name(opts.served_model_name, opts.model_path, opts.model_path);
  config.block_size = opts.block_size;
  config.router.policy =
      cluster::parse_route_policy(opts.router).value_or(cluster::RoutePolicy::kDeepServe);
  config.router.balance_threshold = opts.balance_threshold;
  config.router.balance_abs_tokens = opts.balance_abs_tokens;
  KEEL_TRY(config.router.validate());
  KEEL_ASSIGN_OR_RETURN(config.model_key, model_key(opts.model_path));
  if (!opts.pd_heatmap.empty()) {
    PosixFileSystem fs;
    KEEL_ASSIGN_OR_RETURN(cluster::PdHeatmap heatmap,
                          cluster::PdHeatmap::load(fs, opts.pd_heatmap));
    config.heatmap = std::move(heatmap);
  }
  std::shared_ptr<predictor::LengthPredictor> lengths;
  if (!opts.predictor.empty()) {
    KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute({.threads = 1}));
    KEEL_ASSIGN_OR_RETURN(
        lengths,
        predictor::LengthPredictor::load(
            opts.predictor, opts.predictor_model.empty() ? opts.model_path : opts.predictor_model,
            compute.isa));
    config.predict = [lengths](std::span<const int32_t> prompt)
        -> Result<cluster::JobExecutorConfig::DecodePrediction> {
      KEEL_ASSIGN_OR_RETURN(predictor::LengthPrediction p, lengths->predict(prompt));
      return cluster::JobExecutorConfig::DecodePrediction{p.bucket, p.predicted_tokens};
    };
    config.bucket_of = [lengths](int64_t generated) {
      return lengths->buckets().bucket_of(static_cast<int32_t>(generated));
    };
  }
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::JobExecutor> je,
                        cluster::JobExecutor::start(std::move(config)));
  KEEL_LOG_INFO("je {}: {} TEs, router {}, listening at {}", opts.id, opts.tes.size(), opts.router,
                je->address());
  KEEL_TRY(cluster::print_ready_line(
      {{"role", "je"}, {"id", opts.id}, {"port", je->port()}, {"pid", getpid()}}));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  KEEL_LOG_INFO("je {}: {}: stopping", opts.id, signal_name(sig));
  je->stop();
  return {};
}

}  // namespace

int run_te(const TeOptions& opts) {
  const sigset_t stop_signals = block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  const Status s = te_main(opts, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

int run_je(const JeOptions& opts) {
  const sigset_t stop_signals = block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  const Status s = je_main(opts, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
