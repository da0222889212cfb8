// Flags of `keel te`, `keel je` and `keel cluster up | status | profile-pd` (see
// cluster_commands.h).
#include "cluster_cli.h"

#include "cli_flags.h"
#include "cluster/protocol/spec_source.h"
#include "cluster/weights/weights_server.h"
#include "executor_spec_flags.h"
#include "http_front_flags.h"
#include "semi_pd_flags.h"
#include "state_flags.h"
#include "tenant_flags.h"

namespace keel::cli {
namespace {

// The engine flags a TE takes (a subset of serve's; the rest keep serve's defaults).
void add_engine_flags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("-m,--model", o->model_path,
                  "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model id in the API (default: the file's stem)");
  add_chat_template_flags(cmd, o);
  cmd->add_option("-c,--ctx-size", o->ctx_size, "Max model length (0 = the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences decoded together per TE")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-batched-tokens", o->max_batched_tokens, "Token budget per step")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-waiting", o->max_waiting, "Waiting requests per TE before 429")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-cache-bytes", o->kv_cache_bytes, "KV cache size per TE (0 = auto)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--kv-host-bytes", o->kv_host_bytes, "Host-DRAM tier (T1) per TE (0 = none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 44));
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type")
      ->check(CLI::IsMember(kv_type_names()));
  cmd->add_flag("--no-prefix-cache", o->no_prefix_cache, "Disable prefix caching");
  cmd->add_option("--kv-pin-ttl", o->kv_pin_ttl_s,
                  "Seconds a call that ended in a tool call keeps its KV pinned on its TE for the "
                  "next turn, routed there (docs/agent-kv.md; 0 = off)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--kv-pin-max-fraction", o->kv_pin_max_fraction,
                  "Most of each TE's KV pool pinned across tool calls (0 = none)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--kv-pin-tenant-max-fraction", o->kv_pin_tenant_max_fraction,
                  "Most of each TE's KV pool one API-key tenant's pins may hold (0 = no cap of "
                  "its own)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--lora", o->loras,
                  "LoRA adapter NAME=PATH served by every TE (repeatable); requests select it by "
                  "`model` = NAME")
      ->check(check_lora_spec);
}

void add_router_flags(CLI::App* cmd, std::string* router, double* balance, double* balance_abs,
                      std::string* heatmap, int64_t* stall_ms) {
  cmd->add_option("--router", *router, "Routing policy")
      ->check(CLI::IsMember({"deepserve", "round_robin", "least_load", "prefix"}));
  cmd->add_option("--balance-threshold", *balance,
                  "Loads count as balanced (locality decides) when (max-min)/max is at most this")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--balance-abs-tokens", *balance_abs,
                  "... or when max-min is at most this many pending tokens")
      ->check(CLI::Range(0.0, 1e12));
  cmd->add_option("--pd-heatmap", *heatmap, "PD heatmap file (keel cluster profile-pd)");
  cmd->add_option("--stall-timeout-ms", *stall_ms,
                  "A TE holding work with no engine step or token for this long counts as dead")
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}));
}

void add_predictor_flags(CLI::App* cmd, std::string* predictor, std::string* model) {
  cmd->add_option(
      "--predictor", *predictor,
      "Decode-length predictor file (keel train-predictor) the JE runs on every prompt");
  cmd->add_option("--predictor-model", *model, "The predictor's side model (default: -m)");
}

void add_handoff_flags(CLI::App* cmd, KvHandoffFlags* f) {
  cmd->add_option("--kv-handoff", f->mode,
                  "How a prefill TE hands its KV to the decode TE: stream (as chunks publish "
                  "blocks) or after (a copy after the prefill)")
      ->check(CLI::IsMember({"stream", "after"}));
  cmd->add_option("--prefill-chunk", f->prefill_chunk,
                  "Prompt tokens per step on a prefill TE (0 = --max-batched-tokens)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-transfer-fault", f->fault,
                  "Testing: faults in a prefill TE's KV transfers (drop:N, corrupt:N, stall:N)");
}

// Tier T3 for colocated and prefill TEs: `keel te` and `keel cluster up` (passed to every TE).
void add_peer_tier_flags(CLI::App* cmd, PeerTierOptions* o) {
  cmd->add_flag("--kv-peer-tier", o->enabled,
                "Tier T3: fetch cached KV from peer TEs when the cost model says it pays (and "
                "serve this TE's cache to them); gives the TE a host tier if it has none");
  cmd->add_option("--kv-transfer-throttle", o->throttle_bytes_per_s,
                  "Fault hook: pace this TE's peer-fetch replies to BYTES_PER_S (0 = off)")
      ->check(CLI::Range(0.0, 1e12));
}

// The autoscaler of `keel cluster up` (on when --max > 0).
void add_autoscale_flags(CLI::App* cmd, AutoscaleOptions* a) {
  cmd->add_option("--min", a->min_replicas, "Autoscaler: TEs kept when idle (0: scale to zero)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--max", a->max_replicas,
                  "Autoscaler: TEs at most; > 0 turns the autoscaler on (binds from --warm-pool)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--min-prefill", a->min_prefill,
                  "Autoscaler: prefill TEs kept when idle (with --max-prefill)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--max-prefill", a->max_prefill,
                  "Autoscaler: prefill TEs at most; > 0 scales the --prefill TEs on their own "
                  "signals (queue, KV use, TTFT SLO)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--min-decode", a->min_decode,
                  "Autoscaler: decode TEs kept when idle (with --max-decode)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--max-decode", a->max_decode,
                  "Autoscaler: decode TEs at most; > 0 scales the --decode TEs on their own "
                  "signals (running requests, KV use, TPOT SLO)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--prefill-target-concurrency", a->prefill_target_concurrency,
                  "Autoscaler: requests per prefill TE to aim at (0 = --target-concurrency)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--decode-target-concurrency", a->decode_target_concurrency,
                  "Autoscaler: requests per decode TE to aim at (0 = --target-concurrency)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--target-concurrency", a->target_concurrency,
                  "Autoscaler: requests in flight or queued per TE to aim at")
      ->check(CLI::Range(0.01, 1e6));
  cmd->add_option("--stable-window", a->stable_window_s,
                  "Autoscaler: seconds of concurrency averaged for normal decisions")
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--panic-window", a->panic_window_s,
                  "Autoscaler: seconds of the burst window (0 = 10 % of --stable-window); panic "
                  "when it wants 2x the TEs there are")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option(
         "--scale-down-delay", a->scale_down_delay_s,
         "Autoscaler: a scale-down follows the highest count wanted over this many seconds")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--scale-to-zero-grace", a->scale_to_zero_grace_s,
                  "Autoscaler: seconds after the last request before the last TE goes (--min 0)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--ttft-slo-ms", a->ttft_slo_ms,
                  "Autoscaler: TTFT objective; attainment under 90 % adds a TE (0 = none)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--tpot-slo-ms", a->tpot_slo_ms,
                  "Autoscaler: time-per-output-token objective, as --ttft-slo-ms (0 = none)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--activation-timeout", a->activation_timeout_s,
                  "Autoscaler: seconds the gateway holds a request while no TE is ready before "
                  "a 503 with Retry-After")
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--scale-in-drain-timeout", a->drain_timeout_s,
                  "Autoscaler: seconds a drained TE may finish its work before it is stopped (the "
                  "rest is re-driven)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--scaler", a->scaler,
                  "Autoscaler: warm-pool (bind and drain this machine's TEs) or k8s (set "
                  "spec.replicas of --k8s-deployment through the Kubernetes API)")
      ->check(CLI::IsMember({"warm-pool", "k8s"}));
  cmd->add_option("--k8s-deployment", a->k8s_deployment,
                  "With --scaler k8s: the TE Deployment whose scale subresource is set");
  cmd->add_option("--k8s-api", a->k8s_api,
                  "With --scaler k8s: the API server, http(s)://HOST:PORT (default: in-cluster)");
  cmd->add_option("--k8s-token-file", a->k8s_token_file,
                  "With --scaler k8s: bearer token file (default: the pod's service account)");
  cmd->add_option("--k8s-namespace", a->k8s_namespace,
                  "With --scaler k8s: the Deployment's namespace (default: the pod's)");
}

void add_membership_flags(CLI::App* cmd, MembershipOptions* m) {
  cmd->add_option("--membership", m->mode,
                  "Where members register and the manager is elected: embedded (this process) "
                  "or etcd (--etcd-endpoints)")
      ->check(CLI::IsMember({"embedded", "etcd"}));
  cmd->add_option("--etcd-endpoints", m->etcd_endpoints,
                  "etcd v3 client URLs, http://HOST:PORT (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--membership-prefix", m->prefix,
                  "The cluster's key prefix in the membership store");
  cmd->add_option("--membership-ttl", m->ttl_s,
                  "Lease TTL in seconds: a dead process's members vanish, and a standby "
                  "manager takes over, within it")
      ->check(CLI::Range(2, 3600));
}

void add_preload_command(CLI::App* cluster, ClusterCli* cli) {
  ClusterPreloadOptions& p = *cli->preload;
  cli->preload_cmd = cluster->add_subcommand(
      "preload", "Put a model's run-time image into this host's model store (shared memory)");
  cli->preload_cmd->add_option("-m,--model", p.model_path, "GGUF model file");
  cli->preload_cmd->add_option("--store-dir", p.store_dir, "Model store directory (a tmpfs)");
  cli->preload_cmd->add_option("--store-budget", p.store_budget,
                               "Bytes of entries the store may hold (0 = no limit); least "
                               "recently used entries are evicted to make room");
  cli->preload_cmd->add_option("--isa", p.isa, "Kernel table the entry is for")
      ->check(CLI::IsMember({"scalar", "avx2", "avx512"}));
  cli->preload_cmd->add_flag("--drop", p.drop, "Remove the model's entry instead");
  cli->preload_cmd->add_flag("--list", p.list, "List the store's entries");
}

void add_scale_command(CLI::App* cluster, ClusterCli* cli) {
  ClusterScaleOptions& c = *cli->scale;
  cli->scale_cmd = cluster->add_subcommand(
      "scale", "Bind warm-pool TEs of a running cluster (keel cluster up --warm-pool N)");
  cli->scale_cmd->add_option("--control", c.control, "The cluster's control address host:port")
      ->required();
  cli->scale_cmd->add_option("--tes", c.tes, "TEs to add")->check(CLI::Range(1, 64));
  cli->scale_cmd->add_option("--role", c.role, "What the added TEs compute")
      ->check(CLI::IsMember({"colocated", "prefill", "decode"}));
  cli->scale_cmd->add_flag("--json", c.json, "Print the reply as JSON");
}

void add_bench_scale_command(CLI::App* cluster, ClusterCli* cli) {
  control::ScaleBenchConfig& b = cli->bench_scale->bench;
  CLI::App* cmd = cli->bench_scale_cmd = cluster->add_subcommand(
      "bench-scale",
      "Measure scale-outs: time to N ready TEs and decision -> first token: cold, store, fork");
  cmd->add_option("-m,--model", b.model_path, "GGUF model file")->required();
  cmd->add_option("--tes", b.tes, "TEs per scale-out")->check(CLI::Range(1, 64));
  cmd->add_option("--threads-per-te", b.threads_per_te, "Compute threads of each TE")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("-c,--ctx-size", b.ctx_size, "Each TE's max model length")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 24));
  cmd->add_option("--kv-cache-bytes", b.kv_cache_bytes, "Each TE's KV cache")
      ->check(CLI::Range(int64_t{1} << 20, int64_t{1} << 40));
  cmd->add_option("--store-dir", b.store_dir, "Model store directory (a tmpfs)");
  cmd->add_option("--modes", b.modes,
                  "Scale-out paths to measure: cold,store,fork (fork: chain relay "
                  "from a running TE, each target with its own store directory)");
  cmd->add_option("--isa", b.isa, "Kernel table of the TEs")
      ->check(CLI::IsMember({"scalar", "avx2", "avx512"}));
  cmd->add_option("--event-log", b.event_log, "Append one JSON line per bound TE to FILE");
  cmd->add_flag("--json", cli->bench_scale->json, "Print the report as JSON");
  cmd->add_flag("--keep-entry", b.keep_entry, "Keep the store entry the bench built");
  cmd->add_option("--start-timeout", b.start_timeout_s, "Seconds a warm TE may take to start")
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_flag("--verbose", b.verbose, "Forward the TEs' output");
  cmd->add_option("--host", b.host, "Address the TEs listen on and the probe is received at");
  cmd->add_option("--source-netns", b.source_netns,
                  "Run the fork's source TE in this network namespace (another host; "
                  "bench/fork_hosts.sh)");
  cmd->add_option("--source-host", b.source_host, "The fork source's address (default: --host)");
}

// A TE's engine flags (a TE started from a spec gets them from its engine part instead).
void add_te_engine_flags(CLI::App* cmd, TeOptions* te) {
  add_engine_flags(cmd, &te->engine);
  add_pipeline_flags(cmd, &te->engine);
  add_expert_parallel_flags(cmd, &te->engine);
  add_compute_options(cmd, &te->engine.compute);
  cmd->add_option("--mode", te->engine.mode,
                  "The engine of a colocated TE: colocated, or semi-pd (a prefill and a decode "
                  "worker on their own cores over one KV pool; no prefix cache, KV tiers, LoRA)")
      ->check(CLI::IsMember({"colocated", "semi-pd"}));
  add_semi_pd_flags(cmd, &te->engine);
  add_handoff_flags(cmd, &te->handoff);
  add_peer_tier_flags(cmd, &te->peer);
}

}  // namespace

ClusterCli add_cluster_commands(CLI::App& app) {
  ClusterCli cli;
  TeOptions& te = *cli.te;
  cli.te_cmd = app.add_subcommand("te", "Run one task executor (used by keel cluster up)");
  add_te_engine_flags(cli.te_cmd, &te);
  cli.te_cmd->add_option("--spec", te.spec_source,
                         "Read the whole configuration from a versioned TE spec (JSON; - = stdin): "
                         "how cluster up and node agents start TEs. No other flag goes with it");
  cli.te_cmd->add_option("--id", te.id, "This TE's id in the fleet");
  cli.te_cmd->add_option("--role", te.role, "What it computes")
      ->check(CLI::IsMember({"colocated", "prefill", "decode"}));
  cli.te_cmd->add_option("--host", te.engine.host, "Control address to listen on");
  te.engine.port = 0;
  cli.te_cmd->add_option("--port", te.engine.port, "Control port (0 = a free one)")
      ->check(CLI::Range(0, 65535));
  cli.te_cmd->add_flag("--warm", te.warm,
                       "Warm pool: start without a model and serve what a bind names");
  cli.te_cmd->add_option("--store-dir", te.store_dir,
                         "Model store directory to map the model from (e.g. /dev/shm)");
  cli.te_cmd
      ->add_option("--weights-fault", te.weights_fault,
                   "Fault hook of the weights service (tests): flip:N flips a byte of chunk N, "
                   "stop:N sends only N chunks")
      ->check([](const std::string& v) {
        auto f = cluster::parse_weights_faults(v);
        return f.ok() ? std::string() : f.status().message();
      });
  cli.te_cmd
      ->add_option("--health-port", te.health_port,
                   "Serve HTTP GET /health (progress-based: 503 when hung or draining) on this "
                   "port of --host (0 = a free one; default: none)")
      ->check(CLI::Range(0, 65535));
  cli.te_cmd
      ->add_option("--health-hang-ms", te.health_hang_ms,
                   "/health: work held and no engine step for this long is hung")
      ->check(CLI::PositiveNumber);
  cli.te_cmd->add_option("--advertise-host", te.advertise_host,
                         "Host the TE is registered at in the membership (default: --host)");
  add_membership_flags(cli.te_cmd, &te.membership);

  JeOptions& je = *cli.je;
  cli.je_cmd = app.add_subcommand("je", "Run one job executor (used by keel cluster up)");
  cli.je_cmd->add_option("--spec", je.spec_source,
                         "Read the whole configuration from a versioned JE spec (JSON; - = stdin): "
                         "how cluster up starts JEs. No other flag goes with it");
  cli.je_cmd->add_option("--id", je.spec.id, "This JE's id");
  cli.je_cmd->add_option("--host", je.spec.host, "Address to listen on for gateways");
  cli.je_cmd->add_option("--port", je.spec.port, "Port (0 = a free one)")
      ->check(CLI::Range(0, 65535));
  cli.je_cmd
      ->add_option("--te", je.spec.tes,
                   "TE control addresses host:port (comma-separated; none: the cluster manager "
                   "adds them, add_te)")
      ->delimiter(',');
  cli.je_cmd->add_option("-m,--model", je.spec.model_path, "The GGUF the TEs serve (or --spec)");
  cli.je_cmd->add_option("--served-model-name", je.spec.served_model_name, "The TEs' model id");
  cli.je_cmd
      ->add_option("--lora", je.spec.loras,
                   "A LoRA adapter NAME=PATH the TEs serve (repeatable): its prompts are routed "
                   "by prefix under the adapter's cache key")
      ->check(check_lora_spec);
  cli.je_cmd->add_option("--block-size", je.spec.block_size, "The TEs' tokens per KV block")
      ->check(CLI::Range(1, 1024));
  cli.je_cmd
      ->add_option("--te-connect-timeout-ms", je.spec.te_connect_timeout_ms,
                   "How long connecting to a TE may take; one that does not connect is left out "
                   "(the start fails only when none does)")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  add_router_flags(cli.je_cmd, &je.spec.router, &je.spec.balance_threshold,
                   &je.spec.balance_abs_tokens, &je.spec.pd_heatmap, &je.spec.stall_timeout_ms);
  cli.je_cmd
      ->add_option("--submit-delay-ms", je.spec.submit_delay_ms,
                   "Fault hook for tests: hold every submitted job this long before handling it")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}));
  cli.je_cmd
      ->add_option("--max-jobs-per-te", je.spec.max_jobs_per_te,
                   "Admission: jobs run at once per serving TE; the rest wait at the JE, let in "
                   "by class (interactive, batch, training), `priority` and tenant share (0 = no "
                   "limit)")
      ->check(CLI::Range(0, 1 << 20));
  cli.je_cmd
      ->add_option("--admission-wait-ms", je.spec.admission_wait_ms,
                   "Admission: a job waiting longer than this fails")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  cli.je_cmd
      ->add_option("--kv-pin-ttl", je.spec.kv_pin_ttl_s,
                   "Seconds a program is routed to the TE holding its KV pin (the TEs' "
                   "--kv-pin-ttl; 0 = never)")
      ->check(CLI::Range(0.0, 86400.0));
  add_predictor_flags(cli.je_cmd, &je.spec.predictor, &je.spec.predictor_model);
  add_membership_flags(cli.je_cmd, &je.membership);

  NodeAgentOptions& agent = *cli.agent;
  cli.agent_cmd = app.add_subcommand(
      "node-agent", "Run a host's node agent: register its capacity, start/stop TEs on request");
  add_membership_flags(cli.agent_cmd, &agent.membership);
  cli.agent_cmd->add_option("--host-id", agent.host_id, "This host's id in the cluster")
      ->required();
  cli.agent_cmd->add_option("--listen", agent.listen,
                            "Control endpoint HOST:PORT (TEs started here listen on HOST)");
  cli.agent_cmd->add_option("--store-dir", agent.store_dir,
                            "The host's model store (reported; TEs map models from it)");
  cli.agent_cmd->add_option("--warm", agent.warm, "Warm TEs to keep idle on this host")
      ->check(CLI::Range(0, 64));
  cli.agent_cmd->add_option("--max-tes", agent.max_tes, "Most TEs started here (0 = the cores)")
      ->check(CLI::Range(0, 4096));
  cli.agent_cmd->add_option("--cores", agent.cores, "Cores reported (0 = this machine's)")
      ->check(CLI::Range(0, 1 << 20));
  cli.agent_cmd
      ->add_option("--memory-bytes", agent.memory_bytes,
                   "Memory reported for placement: the smaller of this and MemTotal (0 = MemTotal)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
  cli.agent_cmd->add_option("--threads-per-te", agent.threads_per_te, "A warm TE's threads")
      ->check(CLI::Range(1, 1024));
  cli.agent_cmd
      ->add_option("--start-timeout", agent.start_timeout_s, "Seconds a TE may take to start")
      ->check(CLI::Range(1.0, 3600.0));

  CLI::App* cluster = app.add_subcommand("cluster", "Run or inspect a keel cluster");
  cluster->require_subcommand(1);
  ClusterUpOptions& up = *cli.up;
  cli.up_cmd = cluster->add_subcommand(
      "up", "Start gateway, job executors and task executors on this machine");
  add_engine_flags(cli.up_cmd, &up.serve);
  add_compute_options(cli.up_cmd, &up.serve.compute);
  cli.up_cmd->add_option("--host", up.serve.host, "Gateway address to listen on");
  cli.up_cmd->add_option("--port", up.serve.port, "Gateway port (0 = a free one)")
      ->check(CLI::Range(0, 65535));
  cli.up_cmd->add_option("--api-key", up.serve.api_key, "Require 'Authorization: Bearer KEY'");
  add_tenant_flags(cli.up_cmd, &up.serve);
  add_http_front_flags(cli.up_cmd, &up.serve);
  add_reasoning_parser_flag(cli.up_cmd, &up.serve);
  cli.up_cmd
      ->add_option("--colocated", up.colocated,
                   "Colocated task executors (default 2, or 0 with --prefill/--decode)")
      ->check(CLI::Range(0, 256));
  cli.up_cmd->add_option("--prefill", up.prefill, "Prefill task executors (PD-disaggregated)")
      ->check(CLI::Range(0, 256));
  cli.up_cmd->add_option("--decode", up.decode, "Decode task executors (PD-disaggregated)")
      ->check(CLI::Range(0, 256));
  cli.up_cmd
      ->add_option(
          "--semi-pd", up.semi_pd,
          "Semi-PD task executors (colocated TEs whose engine is semi-PD, --semi-pd-split)")
      ->check(CLI::Range(0, 256));
  add_semi_pd_flags(cli.up_cmd, &up.serve);
  add_state_flags(cli.up_cmd, &up.serve);
  cli.up_cmd
      ->add_option("--pp", up.serve.pp,
                   "Pipeline-parallel colocated TEs: 2 = each is two processes (`keel te --pp 2` "
                   "and its `keel pp-stage`), placed together as one gang under --nodes auto")
      ->check(CLI::Range(1, 2));
  add_expert_parallel_flags(cli.up_cmd, &up.serve);
  cli.up_cmd
      ->add_option("--pp-step-timeout", up.serve.pp_step_timeout_s,
                   "--pp 2: seconds a TE waits for its stage 1's reply to one step")
      ->check(CLI::Range(0.001, 3600.0));
  cli.up_cmd->add_option("--jes", up.jes, "Job executors")->check(CLI::Range(1, 64));
  cli.up_cmd
      ->add_option("--threads-per-te", up.threads_per_te,
                   "Compute threads of each TE (0 = the machine's threads / TEs)")
      ->check(CLI::Range(0, 1024));
  cli.up_cmd
      ->add_option("--drain-timeout", up.serve.drain_timeout_s,
                   "Seconds to finish in-flight requests on SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));
  cli.up_cmd
      ->add_option("--start-timeout", up.start_timeout_s, "Seconds each process may take to start")
      ->check(CLI::Range(1.0, 3600.0));
  add_router_flags(cli.up_cmd, &up.router, &up.balance_threshold, &up.balance_abs_tokens,
                   &up.pd_heatmap, &up.stall_timeout_ms);
  cli.up_cmd
      ->add_option("--je-submit-delay-ms", up.je_submit_delay_ms,
                   "Fault hook for tests: every JE holds each submitted job this long first")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}));
  cli.up_cmd
      ->add_option("--max-jobs-per-te", up.max_jobs_per_te,
                   "Admission at every JE: jobs run at once per serving TE; the rest wait there, "
                   "let in by class, `priority` and tenant share (0 = no limit)")
      ->check(CLI::Range(0, 1 << 20));
  add_predictor_flags(cli.up_cmd, &up.predictor, &up.predictor_model);
  add_handoff_flags(cli.up_cmd, &up.handoff);
  add_peer_tier_flags(cli.up_cmd, &up.peer);
  cli.up_cmd->add_option("--store-dir", up.store_dir,
                         "Model store (a tmpfs, e.g. /dev/shm): preload the model there and map "
                         "it in every TE");
  cli.up_cmd->add_option("--store-budget", up.store_budget,
                         "Bytes of entries the store may hold (0 = no limit); with a budget the "
                         "model's entry follows its demand forecast");
  cli.up_cmd
      ->add_option("--forecast-half-life", up.forecast_half_life_s,
                   "Seconds: the half-life of the request rate's moving average (--store-budget)")
      ->check(CLI::Range(0.1, 86400.0));
  cli.up_cmd
      ->add_option("--forecast-min-rate", up.forecast_min_rate,
                   "Requests per second worth a store entry (--store-budget)")
      ->check(CLI::Range(0.0, 1e6));
  cli.up_cmd
      ->add_option("--bind-source", up.bind_source,
                   "Where a bound TE gets its weights: auto (its host store, else a fork from a "
                   "running TE that serves the entry, else the file), store, fork or disk")
      ->check(CLI::IsMember({"auto", "store", "fork", "disk"}));
  cli.up_cmd->add_option("--te-stores", up.te_stores,
                         "Give each warm TE its own model store under DIR (as if each ran on a "
                         "host of its own; nothing is preloaded there)");
  cli.up_cmd
      ->add_option("--warm-pool", up.warm_pool,
                   "Warm, model-agnostic TEs kept ready to bind (keel cluster scale)")
      ->check(CLI::Range(0, 64));
  cli.up_cmd->add_option("--event-log", up.event_log,
                         "Append one JSON line per scale-out (its phases), autoscaler decision, "
                         "drain, TE found hung, dead or replaced, and gang placement or eviction "
                         "to FILE");
  add_autoscale_flags(cli.up_cmd, &up.autoscale);
  cli.up_cmd->add_flag(
      "--no-replace", up.no_replace,
      "Leave hung or dead TEs (and dead JEs) out of service instead of replacing them");
  add_membership_flags(cli.up_cmd, &up.membership);
  cli.up_cmd
      ->add_option("--nodes", up.nodes,
                   "Where TEs run: local (forked here) or auto (placed through the node agents "
                   "in the membership; needs --membership etcd)")
      ->check(CLI::IsMember({"local", "auto"}));
  cli.up_cmd
      ->add_option("--priority", up.priority,
                   "With --nodes auto: this model's instances' priority (as a Kubernetes "
                   "PriorityClass value); idle instances of lower priority are evicted to make "
                   "room")
      ->check(CLI::Range(-(1 << 30), 1 << 30));
  cli.up_cmd
      ->add_option("--te-memory-bytes", up.te_memory_bytes,
                   "With --nodes auto: memory each TE reserves on its host (0 = the GGUF's size "
                   "+ --kv-cache-bytes)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
  cli.up_cmd->add_option("--manager-election", up.membership.election,
                         "The manager election to campaign in (one per model when several "
                         "models' managers share the node agents)");

  ClusterStatusOptions& st = *cli.status;
  cli.status_cmd = cluster->add_subcommand("status", "Print the fleet: TEs, roles, load, KV use");
  cli.status_cmd->add_option("--url", st.url, "The gateway's base URL");
  cli.status_cmd->add_flag("--json", st.json, "Print the raw JSON document");

  ClusterProfilePdOptions& pd = *cli.profile_pd;
  cli.profile_pd_cmd = cluster->add_subcommand(
      "profile-pd", "Measure the PD heatmap: colocated vs prefill/decode fleets on equal cores");
  cli.profile_pd_cmd->add_option("-m,--model", pd.model_path,
                                 "GGUF model file (default: the built-in random-weight model)");
  cli.profile_pd_cmd->add_option("-o,--output", pd.output, "Heatmap file to write");
  cli.profile_pd_cmd->add_option("--prefill-lengths", pd.prefill_lengths,
                                 "Prompt lengths in tokens, increasing (comma-separated)");
  cli.profile_pd_cmd->add_option("--ratios", pd.ratios,
                                 "Decode/prefill ratios, increasing (comma-separated)");
  cli.profile_pd_cmd
      ->add_option("--threads-per-te", pd.threads_per_te,
                   "Compute threads of each TE (both fleets have 2 TEs)")
      ->check(CLI::Range(1, 1024));
  cli.profile_pd_cmd
      ->add_option("--requests-per-cell", pd.requests_per_cell, "Requests per cell and fleet")
      ->check(CLI::Range(1, 100000));
  cli.profile_pd_cmd
      ->add_option("--concurrency", pd.concurrency, "Requests in flight during a cell")
      ->check(CLI::Range(1, 4096));
  cli.profile_pd_cmd->add_option("-c,--ctx-size", pd.ctx_size, "The TEs' max model length")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cli.profile_pd_cmd
      ->add_option("--start-timeout", pd.start_timeout_s, "Seconds each process may take to start")
      ->check(CLI::Range(1.0, 3600.0));
  cli.profile_pd_cmd->add_flag("--verbose", pd.verbose, "Forward the fleets' output");
  add_preload_command(cluster, &cli);
  add_scale_command(cluster, &cli);
  add_bench_scale_command(cluster, &cli);
  add_gateway_command(cluster, &cli);
  return cli;
}

namespace {

// Beside --spec only --id goes, and only the spec's own id: the label `ps` shows of a started
// executor (cluster/protocol/executor_launch.h).
Status check_spec_flags(const CLI::App& cmd, const char* what, const std::string& id,
                        const std::string& spec_id) {
  if (const std::string other = first_option_besides(cmd, {"--spec", "--id"}); !other.empty()) {
    return Status::invalid_argument(std::string(what) + ": --spec holds the whole configuration; " +
                                    other + " goes without it");
  }
  if (cmd.count("--id") > 0 && id != spec_id) {
    return Status::invalid_argument(std::string(what) + ": --id " + id + " is not the spec's id " +
                                    spec_id);
  }
  return {};
}

// `keel te`: its flags, or (--spec) the spec.
int run_te_command(const ClusterCli& cli) {
  const TeOptions& te = *cli.te;
  if (te.spec_source.empty()) return run_te(te, te_spec_of(te));
  Result<cluster::TeSpec> spec = cluster::read_te_spec(te.spec_source);
  if (!spec.ok()) return report_error(spec.status());
  if (Status s = check_spec_flags(*cli.te_cmd, "te", te.id, spec->id); !s.ok()) {
    return report_error(s);
  }
  return run_te(te_options(*spec), *spec);
}

// `keel je`: its flags, or (--spec) the spec.
int run_je_command(const ClusterCli& cli) {
  const JeOptions& je = *cli.je;
  if (je.spec_source.empty()) {
    if (je.spec.model_path.empty()) {
      return report_error(Status::invalid_argument("je: -m or --spec is required"));
    }
    cluster::JeSpec spec = je.spec;
    spec.membership = je.membership.spec();
    Result<cluster::JeSpec> checked = cluster::decode_je_spec(cluster::encode_je_spec(spec));
    return checked.ok() ? run_je(*checked) : report_error(checked.status());
  }
  Result<cluster::JeSpec> spec = cluster::read_je_spec(je.spec_source);
  if (!spec.ok()) return report_error(spec.status());
  if (Status s = check_spec_flags(*cli.je_cmd, "je", je.spec.id, spec->id); !s.ok()) {
    return report_error(s);
  }
  return run_je(*spec);
}

}  // namespace

std::optional<int> run_cluster_commands(const ClusterCli& cli) {
  if (cli.te_cmd->parsed()) return run_te_command(cli);
  if (cli.je_cmd->parsed()) return run_je_command(cli);
  if (cli.up_cmd->parsed()) return run_cluster_up(*cli.up);
  if (cli.agent_cmd->parsed()) return run_node_agent(*cli.agent);
  if (cli.status_cmd->parsed()) return run_cluster_status(*cli.status);
  if (cli.profile_pd_cmd->parsed()) return run_cluster_profile_pd(*cli.profile_pd);
  if (cli.preload_cmd->parsed()) return run_cluster_preload(*cli.preload);
  if (cli.scale_cmd->parsed()) return run_cluster_scale(*cli.scale);
  if (cli.bench_scale_cmd->parsed()) return run_cluster_bench_scale(*cli.bench_scale);
  if (cli.gateway_cmd->parsed()) return run_cluster_gateway(*cli.gateway);
  return std::nullopt;
}

}  // namespace keel::cli
