// The `keel serve` command's flag table: every flag of ServeOptions (serve_options.h), its help
// text, default and range check. keel_main.cpp adds the command through add_serve_command.
#include <CLI/CLI.hpp>

#include "cli_flags.h"
#include "http_front_flags.h"
#include "kv/pic.h"
#include "semi_pd_flags.h"
#include "serve_flags.h"
#include "state_flags.h"
#include "tenant_flags.h"

namespace keel::cli {

namespace {

// The model, the listening address, keys, chat template.
void add_front_flags(CLI::App* serve_cmd, ServeOptions& serve) {
  serve_cmd->add_option("-m,--model", serve.model_path,
                        "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  serve_cmd->add_option("--host", serve.host, "Address to listen on");
  serve_cmd->add_option("--port", serve.port, "Port (0 = pick a free one)")
      ->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--served-model-name", serve.served_model_name,
                        "Model id in the API (default: the file's stem)");
  serve_cmd->add_option("--api-key", serve.api_key, "Require 'Authorization: Bearer KEY'");
  add_tenant_flags(serve_cmd, &serve);
  add_chat_template_flags(serve_cmd, &serve);
  add_reasoning_parser_flag(serve_cmd, &serve);
}

// Batching, admission and the KV cache.
void add_scheduling_flags(CLI::App* serve_cmd, ServeOptions& serve) {
  serve_cmd->add_option("-c,--ctx-size", serve.ctx_size, "Max model length (0 = the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  serve_cmd->add_option("--max-num-seqs", serve.max_num_seqs, "Sequences decoded together")
      ->check(CLI::Range(1, 4096));
  serve_cmd
      ->add_option("--max-batched-tokens", serve.max_batched_tokens,
                   "Token budget per step (chunked prefill)")
      ->check(CLI::Range(1, 1 << 20));
  serve_cmd
      ->add_option("--long-prefill-reserve", serve.long_prefill_reserve,
                   "Tokens of each step a long prefill leaves to arriving requests (-1 = a "
                   "quarter of --max-batched-tokens, 0 = none)")
      ->check(CLI::Range(-1, 1 << 20));
  serve_cmd
      ->add_option("--step-time-target-ms", serve.step_time_target_ms,
                   "Time a decoding step may take with its prefill chunk (0 = auto, -1 = no "
                   "limit)")
      ->check(CLI::Range(-1.0, 1e6));
  serve_cmd->add_option("--max-waiting", serve.max_waiting, "Waiting requests before 429")
      ->check(CLI::Range(0, 1 << 20));
  serve_cmd
      ->add_option("--program-scheduling", serve.program_scheduling,
                   "Order of waiting calls within a tenant: plas (least service received by the "
                   "call's agent program first; docs/agents.md) or fcfs")
      ->check(CLI::IsMember({"plas", "fcfs"}));
  serve_cmd->add_option("--block-size", serve.block_size, "Tokens per KV block")
      ->check(CLI::Range(1, 1024));
  serve_cmd
      ->add_option("--kv-cache-bytes", serve.kv_cache_bytes,
                   "KV cache size (0 = room for max-num-seqs full contexts, capped)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  serve_cmd
      ->add_option("--kv-host-bytes", serve.kv_host_bytes,
                   "Host-DRAM tier (T1) for KV blocks evicted from the cache (0 = none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 44));
  serve_cmd->add_option("--kv-disk-dir", serve.kv_disk_dir,
                        "Disk tier (T2) directory for KV blocks; persists across restarts");
  serve_cmd->add_option("--kv-disk-bytes", serve.kv_disk_bytes, "Disk tier capacity")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
  serve_cmd->add_option("--kv-type", serve.kv_type, "KV cache element type")
      ->check(CLI::IsMember(kv_type_names()));
  serve_cmd->add_flag("--no-prefix-cache", serve.no_prefix_cache, "Disable prefix caching");
  serve_cmd
      ->add_option("--kv-pin-ttl", serve.kv_pin_ttl_s,
                   "Seconds a call that ended in a tool call keeps its KV pinned for the next turn "
                   "(docs/agent-kv.md; 0 = off)")
      ->check(CLI::Range(0.0, 86400.0));
  serve_cmd
      ->add_option("--kv-pin-max-fraction", serve.kv_pin_max_fraction,
                   "Most of the KV pool pinned across tool calls (0 = none)")
      ->check(CLI::Range(0.0, 1.0));
  serve_cmd
      ->add_option("--kv-pin-tenant-max-fraction", serve.kv_pin_tenant_max_fraction,
                   "Most of the KV pool one API-key tenant's pins may hold (0 = no cap of its own)")
      ->check(CLI::Range(0.0, 1.0));
  serve_cmd->add_flag("--no-schedule-ahead", serve.no_schedule_ahead,
                      "Plan each step only after the previous one finished");
}

// Position-independent chunks, sparse decode, speculation, early exit.
void add_feature_flags(CLI::App* serve_cmd, ServeOptions& serve) {
  serve_cmd
      ->add_option("--pic", serve.pic,
                   "Position-independent chunks in chat prompts: off, marked (parts with "
                   "cache_control position_independent) or auto (also every message before the "
                   "last user message)")
      ->check(CLI::IsMember({"off", "marked", "auto"}));
  serve_cmd
      ->add_option("--pic-link", serve.pic_link,
                   "How PIC chunks are linked: full, naive, legolink-K or cacheblend-R")
      ->check([](const std::string& text) -> std::string {
        if (keel::kv::PicVariant::parse(text).ok()) return {};
        return "expected full, naive, legolink-K (K in [0, 4096]) or cacheblend-R (R in [0, 100])";
      });
  serve_cmd
      ->add_option("--sparse-policy", serve.sparse_policy,
                   "Sparse decode for requests that do not say (`sparse` in the body): dense, "
                   "streaming, h2o, quest or raas")
      ->check(CLI::IsMember({"dense", "streaming", "h2o", "quest", "raas"}));
  serve_cmd
      ->add_option("--sparse-budget", serve.sparse_budget,
                   "Sparse decode budget L: tokens attended per decode step (at least one KV "
                   "block)")
      ->check(CLI::Range(1, 1 << 20));
  serve_cmd
      ->add_option("--speculative", serve.speculative,
                   "Speculative decoding for requests that do not say (`speculative` in the "
                   "body): none, ngram (prompt lookup), draft-head (keel train-draft) or "
                   "draft-model (--draft-model) [default: none, draft-model with --draft-model]. "
                   "Pays off on weight-bound models at low concurrency (TinyLlama-size fixture, "
                   "one client: ngram 1.1x, a good draft model 2-2.6x); at 4 concurrent streams "
                   "every method measured slower (docs/benchmarks.md)")
      ->check(CLI::IsMember({"none", "ngram", "draft-head", "draft-model"}));
  serve_cmd->add_option("--draft-head", serve.draft_head,
                        "Draft head file for draft-head speculation (default: <model>.draft.gguf "
                        "beside the model, when it exists)");
  serve_cmd->add_option("--draft-model,--model-draft", serve.draft_model,
                        "Draft model (GGUF, the same vocabulary) for draft-model speculation; "
                        "turns it on unless --speculative says otherwise");
  serve_cmd->add_flag("--early-exit", serve.early_exit,
                      "SpecEE early exit for requests that do not say (`early_exit` in the body; "
                      "needs the draft head and keel train-exit's predictors)");
  serve_cmd->add_option("--exit-predictors", serve.exit_predictors,
                        "Exit predictor file for early exit (default: <model>.exit.gguf beside "
                        "the model, when it exists)");
  serve_cmd
      ->add_option("--spec-k,--draft-max", serve.spec_k,
                   "Speculative decoding: tokens drafted per step")
      ->check(CLI::Range(1, 16));
  serve_cmd
      ->add_option("--mode", serve.mode,
                   "colocated (one engine thread) or semi-pd (a prefill and a decode worker on "
                   "their own cores over one KV pool; no prefix cache)")
      ->check(CLI::IsMember({"colocated", "semi-pd"}));
}

// Semi-PD, the HTTP front, LoRA, fine-tuning, parallelism, compute, state.
void add_process_flags(CLI::App* serve_cmd, ServeOptions& serve) {
  add_semi_pd_flags(serve_cmd, &serve);
  serve_cmd
      ->add_option("--drain-timeout", serve.drain_timeout_s,
                   "Seconds to finish in-flight requests on SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));
  add_http_front_flags(serve_cmd, &serve);
  serve_cmd
      ->add_option("--lora", serve.loras,
                   "LoRA adapter NAME=PATH (GGUF adapter; repeatable); requests select it by "
                   "`model` = NAME")
      ->check(check_lora_spec);
  serve_cmd->add_flag("--allow-runtime-lora", serve.allow_runtime_lora,
                      "Enable POST /v1/load_lora_adapter and /v1/unload_lora_adapter");
  serve_cmd->add_flag("--no-fine-tuning", serve.no_fine_tuning,
                      "Turn off the fine-tuning API (/v1/fine_tuning/jobs; docs/finetune.md)");
  serve_cmd
      ->add_option("--fine-tuning-threads", serve.fine_tuning_threads,
                   "Threads that train fine-tuning jobs, at idle priority (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  serve_cmd->add_option("--fine-tuning-yield", serve.fine_tuning_yield,
                        "Pause fine-tuning while requests run or wait (false: train beside them at "
                        "idle priority only)");
  serve_cmd
      ->add_option("--cors-origins", serve.cors_origins,
                   "Origins allowed by CORS, comma-separated ('*' = any); default: CORS off")
      ->delimiter(',');
  add_pipeline_flags(serve_cmd, &serve);
  add_expert_parallel_flags(serve_cmd, &serve);
  add_compute_options(serve_cmd, &serve.compute);
  add_state_flags(serve_cmd, &serve);
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app, ServeOptions* o) {
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve a model over the OpenAI HTTP API");
  add_front_flags(serve_cmd, *o);
  add_scheduling_flags(serve_cmd, *o);
  add_feature_flags(serve_cmd, *o);
  add_process_flags(serve_cmd, *o);
  return serve_cmd;
}

}  // namespace keel::cli
