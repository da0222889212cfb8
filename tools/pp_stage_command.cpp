// `keel pp-stage`: a later stage of a pipeline-parallel engine (pipeline/stage_server.h). Loads
// the model, listens on --listen, prints its ready line (proc/ready_line.h) and serves stage 0
// until a stop signal — or, with --exit-with-peer (how a stage 0 starts it), until its stage-0
// link closes, so a stage never outlives the engine that used it.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "cluster/protocol/spec_source.h"
#include "commands.h"
#include "core/log.h"
#include "host/compute.h"
#include "host/model_loading.h"
#include "net/host_port.h"
#include "pipeline/stage_server.h"
#include "proc/ready_line.h"
#include "proc/stop_signals.h"

namespace keel::cli {
namespace {

Status pp_stage(const PpStageOptions& opts, const sigset_t& stop_signals) {
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(opts.compute));
  std::string host_name = "127.0.0.1";
  uint16_t port = 0;
  if (!opts.listen.empty()) {
    // "host:0" is allowed (a free port): parse the host part ourselves for port 0.
    const size_t colon = opts.listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Status::invalid_argument("--listen expects HOST:PORT, got " + opts.listen);
    }
    host_name = opts.listen.substr(0, colon);
    const std::string p = opts.listen.substr(colon + 1);
    if (p != "0") {
      KEEL_ASSIGN_OR_RETURN(const net::HostPort hp, net::parse_host_port(opts.listen));
      port = hp.port;
    }
  }
  model::ModelOptions mopts;
  mopts.n_ctx = opts.ctx_size;
  KEEL_ASSIGN_OR_RETURN(host::LoadedModel loaded,
                        host::load_model(opts.model_path, opts.compute, mopts));
  pipeline::StageServerConfig config;
  config.host = host_name;
  config.port = port;
  config.isa = compute.isa;
  config.threads = compute.threads;
  if (opts.exit_with_peer) config.on_link_closed = [] { ::kill(::getpid(), SIGTERM); };
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::StageServer> server,
                        pipeline::StageServer::start(*loaded.model, config));
  KEEL_LOG_INFO("pp-stage: {} ({} layers), listening on {}:{}, {} threads", loaded.path,
                loaded.model->hparams().n_layer, host_name, server->port(), compute.threads);
  std::printf("%s\n", proc::format_ready_line({{"role", "pp-stage"},
                                               {"port", server->port()},
                                               {"pid", static_cast<int64_t>(::getpid())}})
                          .c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  KEEL_LOG_INFO("pp-stage: received {} after {} steps: stopping", proc::signal_name(sig),
                server->num_steps());
  server->stop();
  return {};
}

}  // namespace

int run_pp_stage(const PpStageOptions& given) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  PpStageOptions opts = given;
  if (!given.spec_source.empty()) {
    Result<cluster::TeSpec> spec = cluster::read_te_spec(given.spec_source);
    if (!spec.ok()) return report_error(spec.status());
    opts.model_path = spec->model_path;
    opts.listen = spec->host + ":" + std::to_string(spec->port);
    opts.ctx_size = spec->engine.ctx_size;
    opts.compute.threads = spec->threads;
    opts.compute.isa = spec->isa;
    opts.compute.weight_layout = spec->engine.weight_layout;
    opts.compute.use_mmap = spec->engine.use_mmap;
  }
  const Status s = pp_stage(opts, stop_signals);
  if (!s.ok()) return report_error(s);
  return 0;
}

}  // namespace keel::cli
