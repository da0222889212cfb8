// Flag groups several keel subcommands share (defined in keel_main.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "engine/named_lora.h"
#include "model/kv_type.h"

// The values --kv-type accepts (model::kKvTypeNames).
inline std::vector<std::string> kv_type_names() {
  return {keel::model::kKvTypeNames.begin(), keel::model::kKvTypeNames.end()};
}

// --lora's check: "NAME=PATH" with both parts non-empty ("" when it is, else the message).
inline std::string check_lora_spec(const std::string& v) {
  return keel::engine::parse_named_lora(v).ok() ? std::string() : std::string("expected NAME=PATH");
}

// The first option given on `cmd`'s command line other than those named in `allowed` (their
// long names, "--spec"); "" when none. What goes with a --spec that holds the whole
// configuration (keel te, keel pp-stage).
inline std::string first_option_besides(const CLI::App& cmd,
                                        std::initializer_list<std::string_view> allowed) {
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() == 0) continue;
    const std::string name = opt->get_name();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) return name;
  }
  return "";
}

// -t/--threads, --isa, --mmap, --weight-layout, --verbose.
void add_compute_options(CLI::App* cmd, keel::cli::ComputeOptions* o);

// --chat-template, --chat-template-file (serve, te, cluster up).
inline void add_chat_template_flags(CLI::App* cmd, keel::cli::ServeOptions* o) {
  cmd->add_option("--chat-template", o->chat_template,
                  "Chat template instead of the model's: a built-in name (chatml, llama2, llama3, "
                  "mistral, gemma, qwen2, qwen3, deepseek-r1), a Jinja file, or Jinja text");
  cmd->add_option("--chat-template-file", o->chat_template_file,
                  "Chat template instead of the model's, from a Jinja file");
}

// --reasoning-parser (serve, cluster up).
inline void add_reasoning_parser_flag(CLI::App* cmd, keel::cli::ServeOptions* o) {
  cmd->add_option("--reasoning-parser", o->reasoning_parser,
                  "Split a reasoning model's <think> text out of chat output into "
                  "reasoning_content / reasoning: none, qwen3 or deepseek-r1")
      ->check(CLI::IsMember({"none", "qwen3", "deepseek-r1"}));
}

// --pp, --pp-stage1, --pp-step-timeout (serve and te).
inline void add_pipeline_flags(CLI::App* cmd, keel::cli::ServeOptions* o) {
  cmd->add_option("--pp", o->pp,
                  "Pipeline-parallel stages: 2 = this process runs the first half of the layers "
                  "and the scheduler, a `keel pp-stage` process the rest")
      ->check(CLI::Range(1, 2));
  cmd->add_option("--pp-stage1", o->pp_stage1,
                  "--pp 2: HOST:PORT of a running `keel pp-stage` (default: start one here)");
  cmd->add_option("--pp-step-timeout", o->pp_step_timeout_s,
                  "--pp 2: seconds to wait for stage 1's reply to one step")
      ->check(CLI::Range(0.001, 3600.0));
}

// --ep, --ep-overlap, --ep-remote, --ep-replicas, --ep-counts (serve, te, cluster up).
inline void add_expert_parallel_flags(CLI::App* cmd, keel::cli::ServeOptions* o) {
  cmd->add_option("--ep", o->ep,
                  "Expert-parallel processes for an MoE model: N = this process holds attention, "
                  "the routers and 1/N of the experts, N-1 `keel ep-expert` children the rest")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--ep-overlap", o->ep_overlap,
                  "--ep: compute this process's experts while the members compute theirs "
                  "(false: wait for the members first; for measuring the overlap)");
  cmd->add_option("--ep-ping-pong", o->ep_ping_pong,
                  "--ep: run a batch of two or more tokens as two micro-batches, one's attention "
                  "while the other's experts compute in the members (default false: measured no "
                  "faster on one host or over a veth link, docs/moe.md)");
  cmd->add_option("--ep-remote", o->ep_remote,
                  "--ep: HOST:PORT of running `keel ep-expert --listen` members on other hosts "
                  "(over UCX), shards 1, 2, ... in order; the remaining members start here")
      ->delimiter(',');
  cmd->add_option("--ep-replicas", o->ep_replicas,
                  "--ep: copies of hot experts each process holds per layer beyond its own range "
                  "(EPLB), chosen from --ep-counts; each layer's tokens are spread over the copies")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--ep-counts", o->ep_counts,
                  "--ep-replicas: a Prometheus scrape (curl HOST/metrics) of a representative run "
                  "holding keel:moe_expert_tokens_total{layer,expert}, which experts are hot");
}
