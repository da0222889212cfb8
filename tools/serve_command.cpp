// `keel serve`: listens at once (503 on /health while the weights load), then loads the model and
// starts the engine (host::EngineHost: that composition lives in src/host, where a task executor
// reuses it) and serves the OpenAI-compatible API until SIGTERM, SIGINT or SIGHUP, when it stops
// accepting, lets in-flight requests finish for --drain-timeout, cancels the rest and exits 0.
// SIGPIPE is ignored, so a closed log pipe or socket is an error return, never a kill. At start-up
// the soft descriptor limit is raised to the hard one and --max-connections is kept below it.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "builtin_models.h"
#include "commands.h"
#include "core/cpu_features.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/named_lora.h"
#include "host/compute.h"
#include "host/engine_host.h"
#include "host/finetune_backend.h"
#include "host/progress_reporter.h"
#include "host/semi_pd_control_loop.h"
#include "http_front_flags.h"
#include "model/kv_type.h"
#include "proc/stop_signals.h"
#include "server/chat_formatter.h"
#include "server/server.h"
#include "state_flags.h"

namespace keel::cli {

std::string served_model_name(const std::string& given, const std::string& model_path,
                              const std::string& resolved_path) {
  if (!given.empty()) return given;
  if (is_builtin_model(model_path)) return builtin_model_name(model_path);
  return std::filesystem::path(resolved_path).stem().string();
}

namespace {

server::ServerConfig server_config(const ServeOptions& o, const std::string& name,
                                   bool random_weights, int64_t descriptor_limit) {
  server::ServerConfig c;
  c.host = o.host;
  c.port = o.port;
  c.api_key = o.api_key;
  c.api_keys_file = o.api_keys_file;
  c.quota_dir = o.quota_dir;
  c.served_model_name = name;
  if (random_weights) c.model_description = "random weights (keel's built-in default model)";
  apply_http_front(o, descriptor_limit, &c);
  c.cors_allowed_origins = o.cors_origins;
  c.pic_mode = o.pic;
  c.allow_runtime_lora = o.allow_runtime_lora;
  c.state_dir = serve_state_dir(o);
  c.responses_dir = o.responses_dir;
  return c;
}

Status serve(const ServeOptions& opts, const sigset_t& stop_signals) {
  KEEL_ASSIGN_OR_RETURN(
      const engine::ControllerConfig controller,
      semi_pd_controller_config(opts, static_cast<int32_t>(engine::allowed_cores().size())));
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(opts.compute));
  const CpuFeatures cpu = detect_cpu_features();
  std::string path = opts.model_path;
  {
    ThreadPool pool(compute.threads);
    KEEL_ASSIGN_OR_RETURN(path, resolve_model_path(opts.model_path, pool));
  }
  // Metadata first: the tokenizer and chat template, so the server can listen during the load.
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<host::EngineHost> host,
      host::EngineHost::open(path, {opts.chat_template, opts.chat_template_file}));
  const std::string name = served_model_name(opts.served_model_name, opts.model_path, path);

  const int64_t descriptor_limit = raise_descriptor_limit();
  server::ServerDeps deps{
      host->client(), &host->tokenizer(),
      server::template_chat_formatter(host->chat_template(), &host->tokenizer()), host->ready()};
  deps.tool_format = server::detect_tool_format(host->chat_template()->source());
  KEEL_ASSIGN_OR_RETURN(deps.reasoning_parser,
                        server::parse_reasoning_parser(opts.reasoning_parser));
  // The fine-tuning API's trainer, where finished adapters can be served (a colocated engine);
  // declared before the server, which uses it until it is destroyed.
  std::unique_ptr<host::FinetuneBackend> tuner;
  if (!opts.no_fine_tuning && opts.mode == "colocated" && opts.pp == 1 && opts.ep == 1) {
    host::FinetuneBackend::Options tune{
        path, &host->tokenizer(), host->chat_template(), opts.fine_tuning_threads, {}};
    if (opts.fine_tuning_yield) {  // requests running or waiting: the trainer waits
      tune.interactive_busy = [client = host->client()] {
        const engine::EngineStats s = client->stats();
        return s.num_running + s.num_waiting > 0;
      };
    }
    tuner = std::make_unique<host::FinetuneBackend>(std::move(tune));
    deps.fine_tuner = tuner.get();
  }
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<server::Server> srv,
      server::Server::start(server_config(opts, name, host->random_weights(), descriptor_limit),
                            std::move(deps)));
  KEEL_LOG_INFO("listening on http://{}:{} (model '{}' loading)", opts.host, srv->port(), name);
  KEEL_LOG_INFO("connections: at most {} (descriptor limit {})",
                connection_cap(opts.max_connections, descriptor_limit), descriptor_limit);

  host::StartOptions start;
  start.compute = compute;
  start.use_mmap = opts.compute.use_mmap;
  start.group_weights = opts.compute.weight_layout != "rows";
  start.n_ctx = opts.ctx_size;
  start.engine = serve_engine_config(opts);
  start.pipeline = serve_pipeline_options(opts);
  start.expert_parallel = serve_expert_parallel_options(opts);
  {
    host::ProgressReporter progress("loading " + path, "B");
    KEEL_TRY(host->start(std::move(start), [&progress](uint64_t done, uint64_t total) {
      progress.update(done, total);
    }));
    progress.finish();
  }
  engine::EngineClient& eng = *host->client();
  std::unique_ptr<host::SemiPdControlLoop> control;  // before the host goes: stopped first
  int32_t num_kv_blocks = 0;
  size_t kv_block_bytes = 0;
  if (engine::SemiPdEngine* semi = host->semi_pd(); semi != nullptr) {
    if (!opts.loras.empty()) return Status::invalid_argument("--lora needs --mode colocated");
    num_kv_blocks = semi->num_kv_blocks();
    kv_block_bytes = semi->kv_block_bytes();
    const engine::SemiPdSplit split = semi->split();
    KEEL_LOG_INFO("mode semi-pd: prefill {} cores, decode {} cores (of {}), no prefix cache",
                  split.prefill, split.decode, engine::allowed_cores().size());
    if (opts.semi_pd_dynamic) {
      control = std::make_unique<host::SemiPdControlLoop>(
          semi, controller, std::chrono::milliseconds(opts.semi_pd_window_ms));
      KEEL_LOG_INFO(
          "semi-pd dynamic: TTFT SLO {} ms, TPOT SLO {} ms at p{}, window {} ms, x + y <= {}",
          opts.semi_pd_ttft_slo_ms, opts.semi_pd_tpot_slo_ms, opts.semi_pd_percentile,
          opts.semi_pd_window_ms, controller.max_total_cores);
    }
  } else {
    if (opts.pp > 1 && !opts.loras.empty()) {
      return Status::invalid_argument("--lora is not supported with pipeline parallelism (--pp)");
    }
    num_kv_blocks = host->engine()->num_kv_blocks();
    kv_block_bytes = host->engine()->kv_block_bytes();
    KEEL_TRY(engine::load_named_loras(eng, opts.loras));
  }
  KEEL_LOG_INFO("model '{}' from {}{}", name, path,
                host->random_weights() ? " — RANDOM WEIGHTS: its text is noise" : "");
  KEEL_LOG_INFO("cpu: {} ({}); kernels: {}; threads: {}", cpu.model_name, cpu.to_string(),
                kernels::isa_name(compute.isa), compute.threads);
  KEEL_LOG_INFO(
      "KV cache: {} blocks of {} tokens = {} tokens ({}, {} bytes per token), max model length {}",
      num_kv_blocks, opts.block_size, int64_t{num_kv_blocks} * opts.block_size, opts.kv_type,
      kv_block_bytes / static_cast<size_t>(opts.block_size), eng.max_model_len());
  KEEL_LOG_INFO("ready: listening on http://{}:{}", opts.host, srv->port());

  int sig = 0;
  sigwait(&stop_signals, &sig);
  KEEL_LOG_INFO("received {}: draining (up to {:.1f} s)", proc::signal_name(sig),
                opts.drain_timeout_s);
  srv->stop_accepting();
  control.reset();  // the split stays as it is while the engine drains
  eng.drain(std::chrono::milliseconds(static_cast<int64_t>(opts.drain_timeout_s * 1000)));
  srv->shutdown();
  KEEL_LOG_INFO("stopped");
  return {};
}

}  // namespace

int run_serve(const ServeOptions& opts) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  const Status s = serve(opts, stop_signals);
  if (!s.ok()) return report_error(s);
  return 0;
}

}  // namespace keel::cli
