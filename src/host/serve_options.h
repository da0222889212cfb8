// ServeOptions: the configuration of a process that serves one model — `keel serve`'s flags, and
// the base a task executor applies its spec's engine part over (executors/te_process.h) — and its
// mappings: onto the engine's configuration, the pipeline's options, semi-PD's split controller,
// and to and from the engine part of a TE's spec (cluster/protocol/te_spec.h). The flag table that
// fills it is the CLI's (tools/); every default lives here.
//
// Thread safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/protocol/te_spec.h"
#include "core/result.h"
#include "engine/engine_config.h"
#include "engine/semi_pd_controller.h"
#include "host/compute.h"
#include "host/expert_parallel.h"
#include "host/pipeline_stage.h"

namespace keel::host {

struct ServeOptions {
  ComputeOptions compute;
  std::string model_path;  // "" = the built-in default (stories260K); builtin:NAME
  std::string host = "127.0.0.1";
  int port = 8080;                // 0 = an ephemeral port (logged)
  std::string served_model_name;  // "" = the model file's stem
  // --chat-template NAME|FILE|TEXT and --chat-template-file FILE: the chat template instead of the
  // GGUF's (tokenizer/chat_template_choice.h); "" = the model's.
  std::string chat_template;
  std::string chat_template_file;
  // --reasoning-parser none | qwen3 | deepseek-r1 (server/reasoning_split.h): thinking split out
  // of chat output into reasoning_content / reasoning. keel serve and cluster up's gateway.
  std::string reasoning_parser = "none";
  std::string api_key;        // "" = no authentication
  std::string api_keys_file;  // --api-keys-file: tenants' keys, weights, quotas (docs/tenants.md)
  std::string quota_dir;      // --quota-dir: quota windows shared by a cluster's gateways
  int64_t max_body_bytes = int64_t{8} << 20;
  int64_t ctx_size = 0;  // max model length; 0 = the model's context length
  int32_t max_num_seqs = 16;
  int32_t max_batched_tokens = 512;
  int32_t long_prefill_reserve = -1;  // engine::SchedulerConfig::long_prefill_reserve
  double step_time_target_ms = 0;     // --step-time-target-ms (0 = auto, < 0 = no limit)
  int32_t max_waiting = 256;
  std::string program_scheduling = "plas";  // --program-scheduling: plas | fcfs
  int32_t block_size = 16;
  int64_t kv_cache_bytes = 0;   // 0 = enough for max_num_seqs full contexts (capped)
  int64_t kv_host_bytes = 0;    // T1 host-DRAM tier; 0 = none
  std::string kv_disk_dir;      // T2 disk tier directory; empty = none
  int64_t kv_disk_bytes = 0;    // T2 capacity
  std::string kv_type = "f32";  // f32 | f16 | q8_0
  bool no_prefix_cache = false;
  // KV kept across tool calls (docs/agent-kv.md): pin TTL in seconds (0 = off) and the caps on
  // pinned KV as fractions of the pool, in total and per named tenant.
  double kv_pin_ttl_s = 60.0;
  double kv_pin_max_fraction = 0.25;
  double kv_pin_tenant_max_fraction = 0.125;
  bool no_schedule_ahead = false;
  std::string pic = "marked";            // off | marked | auto: PIC chunks in chat prompts
  std::string pic_link = "legolink-16";  // full | naive | legolink-K
  std::string sparse_policy = "dense";   // dense | streaming | h2o | quest | raas
  int32_t sparse_budget = 1024;          // L, tokens attended per decode step
  // none | ngram | draft-head | draft-model: speculative decoding by default; "" = none, or
  // draft-model when --draft-model is given
  std::string speculative;
  std::string mode = "colocated";     // colocated | semi-pd (engine/semi_pd_engine.h)
  std::string semi_pd_split = "1,1";  // semi-pd: cores for prefill, decode ("X,Y")
  // semi-pd --semi-pd-dynamic: the SLO-aware split controller (host/semi_pd_control_loop.h).
  bool semi_pd_dynamic = false;
  double semi_pd_ttft_slo_ms = 1000.0;
  double semi_pd_tpot_slo_ms = 100.0;
  int32_t semi_pd_window_ms = 1000;
  int32_t semi_pd_step = 1;
  int32_t semi_pd_max_step = 4;
  double semi_pd_percentile = 90.0;
  int32_t semi_pd_max_cores = 0;  // bound on x + y; 0 = the cores the process may use
  int32_t spec_k = 4;             // drafted tokens per step at most
  std::string draft_head;         // --draft-head FILE; "" = <model>.draft.gguf if it exists
  std::string draft_model;        // --draft-model FILE: draft-model speculation's model; "" = none
  bool early_exit = false;        // --early-exit: SpecEE early exit for requests that do not say
  std::string exit_predictors;    // --exit-predictors FILE; "" = <model>.exit.gguf if it exists
  double drain_timeout_s = 30.0;  // SIGTERM: finish in-flight requests for this long, then cancel
  int32_t io_threads = 2;
  int32_t max_connections = 1024;            // open connections (idle ones shed first)
  int32_t max_connections_per_client = 256;  // of one client address; 0 = no cap
  double header_timeout_s = 10.0;            // a request's line and headers, from its first byte
  int64_t max_inflight_body_bytes = int64_t{128} << 20;  // request bodies buffered at once
  std::vector<std::string> cors_origins;                 // CORS allow-list; empty = CORS off
  int32_t batch_concurrency = 8;       // batch (/v1/batches) lines in flight at once
  std::string state_dir;               // --state-dir: files and batches on disk; "" = the default
  bool no_state = false;               // --no-state: files and batches in memory only
  std::string responses_dir;           // --responses-dir: stored responses shared by gateways
  std::vector<std::string> loras;      // --lora NAME=PATH, loaded at start (repeatable)
  bool allow_runtime_lora = false;     // --allow-runtime-lora: POST /v1/{load,unload}_lora_adapter
  bool no_fine_tuning = false;         // --no-fine-tuning: no /v1/fine_tuning/jobs trainer
  int32_t fine_tuning_threads = 0;     // --fine-tuning-threads (idle priority); 0 = all cores
  bool fine_tuning_yield = true;       // --fine-tuning-yield: pause training while requests run
  int32_t pp = 1;                      // --pp: pipeline stages (1 or 2; host/pipeline_stage.h)
  std::string pp_stage1;               // --pp-stage1 HOST:PORT: a running `keel pp-stage`
  double pp_step_timeout_s = 60.0;     // --pp-step-timeout: one step's reply from stage 1
  int32_t ep = 1;                      // --ep: expert-parallel processes (host/expert_parallel.h)
  bool ep_overlap = true;              // --ep-overlap: local experts run while the members compute
  bool ep_ping_pong = false;           // --ep-ping-pong: two micro-batches alternate
  std::vector<std::string> ep_remote;  // --ep-remote: listening members on other hosts
  int32_t ep_replicas = 0;             // --ep-replicas: hot-expert copies per process and layer
  std::string ep_counts;               // --ep-counts: a /metrics scrape with the expert counts
};
// The pipeline part of host::StartOptions.
[[nodiscard]] PipelineOptions serve_pipeline_options(const ServeOptions& o);
// The expert-parallel part of host::StartOptions.
[[nodiscard]] ExpertParallelOptions serve_expert_parallel_options(const ServeOptions& o);

// The engine's configuration (EngineHost::start adds the kernel table, threads and the model's
// end-of-generation ids). Values the CLI checked (KV type, PIC link, speculation method, semi-PD
// split) are taken as valid; an unparsable one leaves the engine's default.
[[nodiscard]] engine::EngineConfig serve_engine_config(const ServeOptions& o);

// --semi-pd-dynamic's controller configuration over `num_cores` (the cores the process may use):
// each side at most num_cores; x + y at most --semi-pd-max-cores, by default max(2, num_cores),
// never above max(2, 2·num_cores) (overlapping sets, as MPS). InvalidArgument naming the flag.
Result<engine::ControllerConfig> semi_pd_controller_config(const ServeOptions& o,
                                                           int32_t num_cores);

// The engine part of `o`, as given (paths not made absolute, every field kept); the KV hand-off
// and peer-tier parts are a TE's, left at their defaults.
[[nodiscard]] cluster::TeEngineSpec te_engine_spec_of(const ServeOptions& o);

// Sets `o`'s engine options from `e` (te_engine_spec_of's inverse); its compute threads and
// kernels, its HTTP front and everything the spec does not carry stay.
void apply_engine_spec(const cluster::TeEngineSpec& e, ServeOptions* o);

}  // namespace keel::host
