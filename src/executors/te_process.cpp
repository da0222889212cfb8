// The `keel te` process (see te_process.h): the engine, its KV services and the TE-shell.
#include "executors/te_process.h"

#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>

#include "cluster/health/te_health_endpoint.h"
#include "cluster/kv/kv_handoff.h"
#include "cluster/kv/kv_handoff_streams.h"
#include "cluster/kv/kv_peer_fetch.h"
#include "cluster/kv/kv_peer_server.h"
#include "cluster/kv_events/kv_event_convert.h"
#include "cluster/kv_events/kv_event_publisher.h"
#include "cluster/task/bind_listener.h"
#include "cluster/task/task_executor.h"
#include "cluster/transfer/kv_transfer_server.h"
#include "cluster/weights/weights_receiver.h"
#include "cluster/weights/weights_server.h"
#include "control/manager/cluster_membership.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/model_identity.h"
#include "engine/named_lora.h"
#include "executors/te_warm.h"
#include "host/compute.h"
#include "host/engine_host.h"
#include "host/semi_pd_control_loop.h"
#include "kernels/kernels.h"
#include "proc/ready_line.h"

namespace keel::executors {
namespace {

// How often the TE reports its load to its JEs.
constexpr std::chrono::milliseconds kReportInterval{50};

std::string model_name(const TeProcessHooks& hooks, const std::string& path) {
  return hooks.model_name ? hooks.model_name(path) : std::filesystem::path(path).stem().string();
}

// The TE's KV services: the prefill handoff, the KV transfer server (a decode TE's, or where
// peers push T3 fetches), the T3 fetcher and fetch service. Destroyed in reverse order of
// declaration: the fetch service and handoff (they read from the engine) first, the fetcher (the
// transfer server's sink tells it of arrivals) last.
struct KvServices {
  std::unique_ptr<cluster::KvPeerFetcher> fetcher;      // T3: pulls from peers
  std::unique_ptr<cluster::KvTransferServer> transfer;  // decode role, or T3 fetching
  std::unique_ptr<cluster::KvHandoff> handoff;          // prefill role
  std::unique_ptr<cluster::KvPeerServer> peer_server;   // T3: serves peers
};

// The prefill handoff's settings (--kv-handoff, --kv-transfer-fault) and its watch list.
struct HandoffSetup {
  cluster::KvHandoffMode mode = cluster::KvHandoffMode::kStream;
  cluster::KvHandoffStreams* streams = nullptr;  // stream mode
  cluster::KvTransferFaults faults;
};

Result<KvServices> start_kv_services(const cluster::TeSpec& spec, cluster::TeRole role,
                                     engine::KvConnector* eng, const kv::BlockHash& key,
                                     const HandoffSetup& handoff) {
  const cluster::TeEngineSpec& e = spec.engine;
  const bool fetches_peers = spec.engine.peer_tier && role != cluster::TeRole::kDecode;
  KvServices svc;
  auto read_block = [eng](const kv::BlockHash& h, std::span<std::byte> out) {
    return eng->read_block(h, out);
  };
  if (role == cluster::TeRole::kPrefill) {
    cluster::KvHandoffConfig hc;
    hc.mode = handoff.mode;
    hc.streams = handoff.streams;
    hc.faults = handoff.faults;
    hc.model_key = key;
    hc.kv_identity = eng->kv_identity();
    hc.block_size = e.block_size;
    hc.block_bytes = eng->block_bytes();
    hc.read_block = read_block;
    svc.handoff = std::make_unique<cluster::KvHandoff>(std::move(hc));
  }
  // Set once the fetcher exists (it needs the transfer server's address); read by the sink.
  auto fetch_slot = std::make_shared<std::atomic<cluster::KvPeerFetcher*>>(nullptr);
  if (role == cluster::TeRole::kDecode || fetches_peers) {
    cluster::KvTransferServerOptions so;
    so.host = spec.host;
    so.kv_identity = eng->kv_identity();
    so.payload_bytes = eng->block_bytes();
    KEEL_ASSIGN_OR_RETURN(
        svc.transfer,
        cluster::KvTransferServer::start(
            so, [eng, fetch_slot](const cluster::KvFrameHeader& h, std::span<const std::byte> p) {
              cluster::KvPeerFetcher* f = fetch_slot->load();
              if (h.block_hash == cluster::kPeerProbeHash) {  // a link-cost probe: not KV
                if (f != nullptr) f->on_block_filed(h.block_hash);
                return;
              }
              const Status s = eng->accept_block(h.block_hash, p);
              if (!s.ok()) KEEL_LOG_WARN("te: received block dropped: {}", s.message());
              if (s.ok() && f != nullptr) f->on_block_filed(h.block_hash);
            }));
  }
  if (fetches_peers) {
    cluster::KvPeerFetchConfig fc;
    fc.model_key = key;
    fc.kv_identity = eng->kv_identity();
    fc.block_size = e.block_size;
    fc.block_bytes = eng->block_bytes();
    fc.reply_to = spec.host + ":" + std::to_string(svc.transfer->port());
    fc.prefill_seconds_per_token = [eng] { return eng->prefill_seconds_per_token(); };
    svc.fetcher = std::make_unique<cluster::KvPeerFetcher>(std::move(fc));
    fetch_slot->store(svc.fetcher.get());
  }
  if (spec.engine.peer_tier) {
    cluster::KvPeerServerConfig pc;
    pc.host = spec.host;
    pc.kv_identity = eng->kv_identity();
    pc.block_tokens = static_cast<uint32_t>(e.block_size);
    pc.block_bytes = eng->block_bytes();
    pc.read_block = read_block;
    pc.throttle_bytes_per_s = spec.engine.kv_transfer_throttle_bytes_per_s;
    KEEL_ASSIGN_OR_RETURN(svc.peer_server, cluster::KvPeerServer::start(std::move(pc)));
  }
  return svc;
}

// A TE's role-specific engine set-up: a prefill TE computes prompts in chunks of --prefill-chunk
// tokens, so a streamed handoff sends every chunk's blocks (caught by the engine's tap into
// `streams`) while the next one computes; a decode TE receives prefills' KV into its host tier
// (T1), and a peer-tier (T3) TE its peers' blocks: each needs one.
Result<HandoffSetup> prepare_role(const cluster::TeSpec& spec, cluster::TeRole role,
                                  host::StartOptions* start,
                                  std::unique_ptr<cluster::KvHandoffStreams>* streams) {
  HandoffSetup handoff;
  KEEL_ASSIGN_OR_RETURN(handoff.faults,
                        cluster::parse_kv_transfer_faults(spec.engine.handoff.fault));
  handoff.mode = cluster::parse_kv_handoff_mode(spec.engine.handoff.mode)
                     .value_or(cluster::KvHandoffMode::kStream);
  if (role == cluster::TeRole::kPrefill) {
    if (spec.engine.handoff.prefill_chunk > 0) {
      start->engine.scheduler.max_batched_tokens =
          std::min(start->engine.scheduler.max_batched_tokens, spec.engine.handoff.prefill_chunk);
    }
    if (handoff.mode == cluster::KvHandoffMode::kStream) {
      *streams = std::make_unique<cluster::KvHandoffStreams>();
      handoff.streams = streams->get();
      start->published_blocks = cluster::handoff_tap(streams->get());
    }
  }
  const bool fetches_peers = spec.engine.peer_tier && role != cluster::TeRole::kDecode;
  if ((role == cluster::TeRole::kDecode || fetches_peers) && start->engine.kv_host_bytes == 0) {
    start->engine.kv_host_bytes = int64_t{256} << 20;
  }
  return handoff;
}

// A semi-PD TE (`--mode semi-pd`) is a colocated TE: it runs whole requests on its own two
// workers, so it has no KV handoff, and its engine has no prefix cache or host tier to fetch peers'
// blocks into, and no LoRA.
Status check_semi_pd_te(const cluster::TeSpec& spec, cluster::TeRole role) {
  if (role != cluster::TeRole::kColocated) {
    return Status::invalid_argument(
        "--mode semi-pd needs --role colocated (a semi-PD TE runs "
        "whole requests; got --role " +
        std::string(cluster::te_role_name(role)) + ")");
  }
  if (spec.engine.peer_tier) return Status::invalid_argument("--mode semi-pd: no --kv-peer-tier");
  if (!spec.engine.loras.empty()) return Status::invalid_argument("--mode semi-pd: no --lora");
  if (spec.warm) return Status::invalid_argument("--mode semi-pd: a warm TE binds colocated");
  return {};
}

// What a TE serves and how it came to: the model (its path, and where its weights come from)
// and, for a warm TE, its binder and the scale-out's phase marks.
struct TeLaunch {
  std::string model_path;                   // the GGUF as named (the served name comes from it)
  store::ModelSource source;                // where the weights are loaded from
  std::string role;                         // colocated | prefill | decode
  cluster::BindListener* binder = nullptr;  // a warm TE's; null for a TE started with -m
  ForkOutcome fork;                         // a warm TE's fork of its entry, when asked
  cluster::ScaleOutPhases phases;
  int weights_port = 0;  // its weights service (peers fork from it); 0 = none
  cluster::TeHealthEndpoint* health = nullptr;  // --health-port; null = none
};

// Announces a warm TE's bind failure to its binder, then returns the error.
Status fail_bind(TeLaunch& launch, Status s) {
  if (launch.binder != nullptr) {
    cluster::BindReply r;
    r.status = s;
    launch.binder->reply(r);
  }
  return s;
}

// The cache-event publisher's sockets on the TE's --host (JEs on other hosts subscribe to them).
cluster::KvEventPublisherConfig publisher_config(const std::string& host) {
  cluster::KvEventPublisherConfig c;
  c.endpoint = "tcp://" + host + ":0";
  c.replay_endpoint = c.endpoint;
  return c;
}

// A bound endpoint as others reach it: a wildcard host replaced by `reach` (--advertise-host).
std::string announced_endpoint(const std::string& bound, const std::string& reach) {
  const std::string wildcard = "tcp://0.0.0.0:";
  if (bound.rfind(wildcard, 0) != 0 || reach.empty() || reach == "0.0.0.0") return bound;
  return "tcp://" + reach + ":" + bound.substr(wildcard.size());
}

// The TE-shell's settings: its id, role, KV services' addresses, served name and report cadence.
cluster::TaskExecutorConfig te_config(const cluster::TeSpec& spec, const TeProcessHooks& hooks,
                                      cluster::TeRole role, const KvServices& svc,
                                      const cluster::KvEventPublisher& events,
                                      const std::string& model_path) {
  cluster::TaskExecutorConfig config;
  config.id = spec.id;
  config.role = role;
  config.handoff = svc.handoff.get();
  if (svc.transfer && role == cluster::TeRole::kDecode) {
    config.kv_transfer = spec.host + ":" + std::to_string(svc.transfer->port());
  }
  config.peer_fetch = svc.fetcher.get();
  if (svc.peer_server) config.kv_fetch = svc.peer_server->address();
  config.model =
      spec.served_model_name.empty() ? model_name(hooks, model_path) : spec.served_model_name;
  config.host = spec.host;
  config.port = static_cast<uint16_t>(spec.port);
  config.report_interval = kReportInterval;
  const std::string reach = spec.advertise_host.empty() ? spec.host : spec.advertise_host;
  config.kv_events = announced_endpoint(events.endpoint(), reach);
  config.kv_events_replay = announced_endpoint(events.replay_endpoint(), reach);
  return config;
}

// A TE's engine, started: the host, its configuration, its role's KV hand-off and the chunk it
// prefills in.
struct StartedEngine {
  TeEngineSetup setup;
  std::unique_ptr<host::EngineHost> host;
  cluster::TeRole role = cluster::TeRole::kColocated;
  HandoffSetup handoff;
  int32_t chunk_tokens = 0;
  bool semi_pd = false;
};

// The pipeline's checks against the TE's role and peer tier.
Status check_pipelined_te(const cluster::TeSpec& spec, cluster::TeRole role) {
  if (role != cluster::TeRole::kColocated) {
    return Status::invalid_argument(
        "--pp needs --role colocated (a pipelined TE cannot hand off KV: its layers are split "
        "over two processes)");
  }
  if (spec.engine.peer_tier) return Status::invalid_argument("--pp: no --kv-peer-tier");
  return {};
}

// Opens the model, starts its engine (publishing cache events to `events`, a streamed hand-off's
// watch list into `streams`), loads the LoRA adapters and, for a warm TE, warms it with one token;
// marks the scale-out's phases on the way. A warm TE's binder hears of any failure.
Result<StartedEngine> start_engine(const cluster::TeSpec& spec, const TeProcessHooks& hooks,
                                   const host::ComputeSetup& compute, TeLaunch& launch,
                                   cluster::KvEventPublisher* events,
                                   std::unique_ptr<cluster::KvHandoffStreams>* streams) {
  const cluster::TeEngineSpec& e = spec.engine;
  StartedEngine out;
  Result<TeEngineSetup> setup = te_engine_setup(hooks.engine_defaults, spec);
  if (!setup.ok()) return fail_bind(launch, setup.status());
  out.setup = std::move(*setup);
  // The chat template is checked here as keel serve checks it (a TE renders no chat: its
  // gateway does), so one set of flags starts either.
  Result<std::unique_ptr<host::EngineHost>> opened =
      host::EngineHost::open(launch.source.path, {e.chat_template, e.chat_template_file});
  if (!opened.ok()) return fail_bind(launch, opened.status());
  out.host = std::move(*opened);
  host::StartOptions start;
  start.cache_events = cluster::publishing_sink(events, e.block_size);
  out.role = cluster::parse_te_role(launch.role).value_or(cluster::TeRole::kColocated);
  start.compute = compute;
  start.use_mmap = launch.source.from_store || e.use_mmap;  // an entry is mapped
  start.group_weights = e.weight_layout != "rows";
  start.n_ctx = e.ctx_size;
  start.engine = out.setup.engine;
  start.pipeline = out.setup.pipeline;
  start.pipeline.exit_on_loss = true;  // its JEs re-drive its jobs, its manager replaces it
  start.expert_parallel = out.setup.expert_parallel;
  start.expert_parallel.exit_on_loss = true;  // the gang: a lost member ends the TE
  if (start.pipeline.enabled()) {
    if (Status s = check_pipelined_te(spec, out.role); !s.ok()) return fail_bind(launch, s);
  }
  out.semi_pd = start.engine.semi_pd.has_value();
  if (out.semi_pd) KEEL_TRY(check_semi_pd_te(spec, out.role));
  KEEL_ASSIGN_OR_RETURN(out.handoff, prepare_role(spec, out.role, &start, streams));
  out.chunk_tokens = start.engine.scheduler.max_batched_tokens;
  const int64_t before_start_ns = cluster::steady_now_ns();
  if (Status s = out.host->start(std::move(start)); !s.ok()) return fail_bind(launch, s);
  launch.phases.preloaded_ns =
      before_start_ns + static_cast<int64_t>(out.host->weights_seconds() * 1e9);
  if (engine::Engine* eng = out.host->engine(); eng != nullptr) {  // null for a semi-PD TE
    if (Status s = engine::load_named_loras(*eng, e.loras); !s.ok()) return fail_bind(launch, s);
  }
  launch.phases.loaded_ns = cluster::steady_now_ns();
  if (launch.binder != nullptr) {  // post-load: one warm-up token
    const int32_t bos = out.host->tokenizer().bos_id();
    if (Status s = warm_up_token(out.host->client(), bos >= 0 ? bos : 0); !s.ok()) {
      return fail_bind(launch, s);
    }
  }
  launch.phases.first_token_ns = cluster::steady_now_ns();
  return out;
}

// This TE as the membership lists it: te/<id> at its advertised control address.
membership::Member te_member(const cluster::TeSpec& spec, const cluster::TaskExecutorConfig& config,
                             cluster::TeRole role, int port) {
  const std::string advertised =
      (spec.advertise_host.empty() ? spec.host : spec.advertise_host) + ":" + std::to_string(port);
  return {membership::MemberKind::kTaskExecutor,
          spec.id,
          advertised,
          {{"model", config.model},
           {"role", std::string(cluster::te_role_name(role))},
           {"pid", std::to_string(getpid())}}};
}

// Tells whoever started the TE that it serves: a warm TE's binder gets the bind's reply, a TE
// started with a model prints its ready line.
Status announce_ready(const cluster::TeSpec& spec, TeLaunch& launch, int port) {
  if (launch.binder != nullptr) {
    cluster::BindReply r;
    r.port = port;
    r.from_store = launch.source.from_store;
    r.store_note = launch.source.from_store ? "" : launch.source.store_error.message();
    r.forked = launch.fork.forked;
    r.fork_bytes = launch.fork.bytes;
    r.fork_seconds = launch.fork.seconds;
    r.fork_error = launch.fork.error;
    r.phases = launch.phases;
    launch.binder->reply(r);
    return {};
  }
  nlohmann::json ready = {{"role", "te"},
                          {"id", spec.id},
                          {"port", port},
                          {"pid", getpid()},
                          {"from_store", launch.source.from_store}};
  if (launch.weights_port > 0) ready["weights_port"] = launch.weights_port;
  if (launch.health != nullptr) ready["health_port"] = launch.health->port();
  return proc::print_ready_line(ready);
}

Status te_serve(const cluster::TeSpec& spec, const TeProcessHooks& hooks,
                const host::ComputeSetup& compute, TeLaunch launch, const sigset_t& stop_signals) {
  const cluster::TeEngineSpec& e = spec.engine;
  const std::string& path = launch.source.path;
  // The cache-event publisher and a streamed handoff's watch list (fed by the engine's tap)
  // outlive the engine (declared first).
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::KvEventPublisher> events,
                        cluster::KvEventPublisher::start(publisher_config(spec.host)));
  std::unique_ptr<cluster::KvHandoffStreams> streams;
  KEEL_ASSIGN_OR_RETURN(StartedEngine started,
                        start_engine(spec, hooks, compute, launch, events.get(), &streams));
  std::unique_ptr<host::EngineHost>& host = started.host;
  std::unique_ptr<host::SemiPdControlLoop> control;  // --semi-pd-dynamic; stopped before the drain
  if (started.semi_pd && started.setup.controller) {
    control = std::make_unique<host::SemiPdControlLoop>(host->semi_pd(), *started.setup.controller,
                                                        started.setup.controller_window);
  }
  KEEL_ASSIGN_OR_RETURN(kv::BlockHash key, engine::model_identity_of_file(path));
  KvServices svc;
  if (engine::Engine* eng = host->engine(); eng != nullptr) {  // a semi-PD TE has none
    KEEL_ASSIGN_OR_RETURN(
        svc, start_kv_services(spec, started.role, &eng->kv_connector(), key, started.handoff));
  }
  cluster::TaskExecutorConfig config =
      te_config(spec, hooks, started.role, svc, *events, launch.model_path);
  config.semi_pd = started.semi_pd;
  config.pp_stages = std::max(1, e.pp);
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::TaskExecutor> te,
                        cluster::TaskExecutor::start(config, host->client()));
  launch.phases.announced_ns = cluster::steady_now_ns();
  KEEL_LOG_INFO("te {}: {} on {}{} ({}), control at {}", spec.id, config.model, path,
                launch.source.from_store ? " (model store)" : "",
                started.semi_pd ? "semi-PD, split " + e.semi_pd.split
                                : std::to_string(compute.threads) + " threads",
                te->address());
  if (svc.handoff) {
    KEEL_LOG_INFO("te {}: KV handoff {}, prefill chunks of {} tokens", spec.id,
                  cluster::kv_handoff_mode_name(started.handoff.mode), started.chunk_tokens);
  }
  // With --membership etcd: te/<id> under this process's own lease, before anyone is told.
  const membership::Member self = te_member(spec, config, started.role, te->port());
  const control::MembershipConfig membership =
      control::MembershipConfig::from_spec(spec.membership);
  Result<std::unique_ptr<control::ClusterMembership>> registered =
      control::register_self(membership, self);
  if (!registered.ok()) return fail_bind(launch, registered.status());
  std::unique_ptr<control::ClusterMembership> member = std::move(*registered);
  const cluster::HealthServing health(
      launch.health, [c = host->client()] { return c->stats(); });  // ends before the engine does
  KEEL_TRY(announce_ready(spec, launch, te->port()));

  const int sig = control::wait_registered(stop_signals, membership, self, &member);
  KEEL_LOG_INFO("te {}: {}: draining", spec.id, strsignal(sig));
  if (launch.health != nullptr) launch.health->draining();  // 503 while it drains
  control.reset();  // the split stays as it is while the engine drains
  host->client()->drain(started.setup.drain_timeout);
  te->stop();
  // They read from and write into the engine: readers first, the fetcher after the transfer
  // server whose sink tells it of arrivals.
  svc.peer_server.reset();
  svc.handoff.reset();
  svc.transfer.reset();
  svc.fetcher.reset();
  host.reset();                       // the engine stops before its publisher
  if (member) (void)member->close();  // drained: leave the membership now, not at the TTL
  return {};
}

}  // namespace

Status run_task_executor(const cluster::TeSpec& spec, const TeProcessHooks& hooks,
                         const sigset_t& stop_signals) {
  // The engine part's own checks, before anything starts.
  KEEL_TRY(te_engine_setup(hooks.engine_defaults, spec).status());
  host::ComputeOptions compute_options;
  compute_options.threads = spec.threads;
  compute_options.isa = spec.isa;
  compute_options.use_mmap = spec.engine.use_mmap;
  compute_options.weight_layout = spec.engine.weight_layout;
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(compute_options));
  const std::string isa(kernels::isa_name(compute.isa));
  TeLaunch launch;
  launch.role = spec.role;
  cluster::TeSpec bound = spec;  // a warm TE's spec with its bind's engine part
  std::unique_ptr<cluster::BindListener> binder;
  std::string store_entry;
  bool use_store = true;  // false: the binder asked for the file (--bind-source disk)
  // With a store: the weights service (peers fork from it) and the receiver (forks into it).
  // Declared before the TE serves, so they outlive it.
  std::unique_ptr<cluster::WeightsReceiver> receiver;
  std::unique_ptr<cluster::WeightsServer> weights;
  std::unique_ptr<cluster::TeHealthEndpoint> health;  // up from the start: a warm TE answers "warm"
  if (spec.health_port >= 0) {
    KEEL_ASSIGN_OR_RETURN(
        health, cluster::TeHealthEndpoint::start(spec.host, spec.health_port,
                                                 std::chrono::milliseconds(spec.health_hang_ms)));
    launch.health = health.get();
    KEEL_LOG_INFO("te {}: health from progress at http://{}:{}/health", spec.id, spec.host,
                  health->port());
  }
  if (!spec.store_dir.empty()) {
    KEEL_ASSIGN_OR_RETURN(receiver, cluster::WeightsReceiver::start(spec.host, spec.store_dir));
    cluster::WeightsServerConfig wc;
    wc.host = spec.host;
    wc.store_dir = spec.store_dir;
    wc.receiver = receiver.get();
    KEEL_ASSIGN_OR_RETURN(wc.faults, cluster::parse_weights_faults(spec.weights_fault));
    KEEL_ASSIGN_OR_RETURN(weights, cluster::WeightsServer::start(std::move(wc)));
  }
  if (spec.warm) {
    KEEL_ASSIGN_OR_RETURN(binder, cluster::BindListener::start(spec.host));
    KEEL_LOG_INFO("te {}: warm ({} kernels, {} threads), bind port {}", spec.id, isa,
                  compute.threads, binder->port());
    nlohmann::json ready = {{"role", "te"},
                            {"id", spec.id},
                            {"state", "warm"},
                            {"port", binder->port()},
                            {"pid", getpid()}};
    if (weights) ready["weights_port"] = weights->port();
    if (health) ready["health_port"] = health->port();
    KEEL_TRY(proc::print_ready_line(ready));
    std::optional<cluster::BindModel> bind = wait_for_bind(*binder, stop_signals);
    if (!bind) return {};  // stopped while warm
    launch.phases.bound_ns = cluster::steady_now_ns();
    launch.phases.decision_ns = bind->decision_ns;
    launch.binder = binder.get();
    launch.model_path = bind->model_path;
    launch.role = bind->role;
    store_entry = bind->store_entry;
    use_store = bind->use_store;
    if (!bind->isa.empty() && bind->isa != isa) {
      return fail_bind(
          launch, Status::invalid_argument("bind: this warm TE runs the " + isa + " kernels, not " +
                                           bind->isa + " (they were chosen when it started)"));
    }
    if (bind->engine) bound.engine = *bind->engine;
    if (use_store) launch.fork = fork_for_bind(*bind, receiver.get());
  } else {
    launch.model_path = spec.model_path;
  }
  {
    ThreadPool pool(compute.threads);
    Result<std::string> resolved = hooks.resolve_model
                                       ? hooks.resolve_model(launch.model_path, pool)
                                       : Result<std::string>(launch.model_path);
    if (!resolved.ok()) return fail_bind(launch, resolved.status());
    launch.model_path = *resolved;
  }
  launch.source =
      choose_model_source(use_store ? spec.store_dir : "", launch.model_path, store_entry, isa);
  launch.weights_port = weights ? weights->port() : 0;
  if (weights && launch.source.from_store) {  // peers may fork it: have its hash ready
    weights->precompute_hash(std::filesystem::path(launch.source.path).filename().string());
  }
  return te_serve(bound, hooks, compute, std::move(launch), stop_signals);
}

}  // namespace keel::executors
