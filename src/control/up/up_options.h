// keel cluster up's configuration (docs/cluster.md): the gateway's HTTP front and the TEs'
// engine (host::ServeOptions), how many TEs of each kind and JEs, the router, the KV hand-off and
// peer tier of the TEs, elasticity (store, warm pool), the autoscaler, repair, the membership and
// placement through node agents. The CLI's flag table fills it (tools/cluster_cli.cpp); every
// default lives here. up_plan.h works out what it starts; cluster_up.h starts it.
//
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>

#include "control/manager/cluster_membership.h"
#include "host/serve_options.h"

namespace keel::control {

// The prefill side of the KV handoff (keel te, keel cluster up): a prefill TE's spec carries it.
struct KvHandoffOptions {
  std::string mode = "stream";  // --kv-handoff: stream | after (cluster::KvHandoffMode)
  // --prefill-chunk: a prefill TE's prompt tokens per step (caps --max-batched-tokens), so a
  // streamed handoff overlaps all but the last chunk's blocks; 0 = --max-batched-tokens.
  int32_t prefill_chunk = 256;
  std::string fault;  // --kv-transfer-fault (cluster::parse_kv_transfer_faults); tests only
};

// Tier T3 (docs/cluster.md): peer fetching between TEs, and its link throttle (a fault hook).
struct PeerTierOptions {
  bool enabled = false;
  double throttle_bytes_per_s = 0;
};

// The autoscaler of `keel cluster up` (docs/cluster.md, "Autoscaling"); off while max_replicas is
// 0.
struct AutoscaleOptions {
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;         // 0 = no autoscaler of colocated TEs
  double target_concurrency = 4.0;  // requests in flight or queued per TE
  // Prefill and decode TEs scaled apart (--prefill/--decode fleets): a group per role whose max
  // is > 0, from the start-up counts. Targets 0 = --target-concurrency. The TTFT objective is the
  // prefill group's signal, the TPOT one the decode group's.
  int32_t min_prefill = 1;
  int32_t max_prefill = 0;
  int32_t min_decode = 1;
  int32_t max_decode = 0;
  double prefill_target_concurrency = 0.0;
  double decode_target_concurrency = 0.0;
  double stable_window_s = 60.0;
  double panic_window_s = 0.0;  // 0 = 10 % of the stable window
  double scale_down_delay_s = 0.0;
  double scale_to_zero_grace_s = 30.0;
  double ttft_slo_ms = 0.0;            // 0 = no TTFT objective
  double tpot_slo_ms = 0.0;            // 0 = no TPOT objective
  double activation_timeout_s = 30.0;  // a request held at zero TEs gets a 503 after this
  double drain_timeout_s = 30.0;       // a drained TE is stopped after this even with work left
  // What carries the decisions out: "warm-pool" binds warm TEs and drains them (this machine);
  // "k8s" sets spec.replicas of a Deployment through the Kubernetes API (docs/deploy.md).
  std::string scaler = "warm-pool";
  std::string k8s_deployment;  // --k8s-deployment: the TE Deployment scaled (with --scaler k8s)
  std::string k8s_api;         // --k8s-api URL ("" = in-cluster: KUBERNETES_SERVICE_HOST/PORT)
  std::string k8s_token_file;  // --k8s-token-file ("" = the pod's service-account token)
  std::string k8s_namespace;   // --k8s-namespace ("" = the pod's namespace)
};

struct ClusterUpOptions {
  host::ServeOptions serve;  // the gateway's HTTP flags and the TEs' engine flags
  int32_t colocated = -1;    // -1: 2, or 0 when prefill/decode TEs are asked for
  int32_t prefill = 0;
  int32_t decode = 0;
  int32_t semi_pd = 0;  // colocated TEs with the semi-PD engine (serve.semi_pd_split)
  int32_t jes = 1;
  int32_t threads_per_te = 0;  // 0 = the machine's threads / TEs (at least 1)
  std::string router = "deepserve";
  double balance_threshold = 0.25;
  double balance_abs_tokens = 4096;
  std::string pd_heatmap;
  int64_t stall_timeout_ms = 5000;
  std::string predictor;
  std::string predictor_model;
  double start_timeout_s = 120.0;
  int64_t je_submit_delay_ms = 0;  // fault hook passed to every JE (--submit-delay-ms)
  // Admission at every JE (cluster/job/admission.h): jobs run at once per TE; 0 = no limit.
  int32_t max_jobs_per_te = 0;
  KvHandoffOptions handoff;  // passed to the prefill TEs
  PeerTierOptions peer;      // passed to every TE
  // Elasticity (docs/cluster.md): --store-dir preloads the model into the host's model store and
  // every TE maps it from there; --warm-pool N keeps N model-agnostic TEs to bind on demand
  // (`keel cluster scale`), their phases in /metrics and the --event-log JSON lines.
  std::string store_dir;
  uint64_t store_budget = 0;
  // The preload forecast under --store-budget (store/preload_plan.h): the request rate's EWMA
  // half-life and the rate worth an entry.
  double forecast_half_life_s = 30.0;
  double forecast_min_rate = 0.05;
  int32_t warm_pool = 0;
  std::string bind_source = "auto";  // auto | store | fork | disk (cluster/weights/bind_source.h)
  std::string te_stores;             // a store per warm TE under this root ("" = the shared one)
  std::string event_log;
  AutoscaleOptions autoscale;
  // Health (control/repair/te_replacer.h): a TE a JE finds hung or dead is killed (SIGKILL) and
  // replaced (warm pool or cold start); --no-replace leaves it out of service.
  bool no_replace = false;
  MembershipConfig membership;
  // --nodes: "local" forks the TEs here; "auto" places them through the node agents registered
  // in the membership (needs --membership etcd; cluster/policy/placement.h), and stops them through
  // the agents at shutdown.
  std::string nodes = "local";
  // With --nodes auto, each instance (a colocated TE, or a prefill + decode pair) is placed as a
  // gang (cluster/policy/gang_placement.h): `priority` is its instance's (as a Kubernetes
  // PriorityClass value: idle instances of lower priority are evicted to make room),
  // `te_memory_bytes` what each TE reserves (0 = the GGUF's size + --kv-cache-bytes).
  int32_t priority = 0;
  int64_t te_memory_bytes = 0;
};

}  // namespace keel::control
