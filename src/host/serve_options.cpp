// ServeOptions' mappings; see serve_options.h.
#include "host/serve_options.h"

#include <algorithm>

#include "engine/semi_pd_split.h"
#include "kv/pic.h"
#include "model/kv_type.h"

namespace keel::host {

PipelineOptions serve_pipeline_options(const ServeOptions& o) {
  PipelineOptions p;
  p.stages = o.pp;
  p.stage1_address = o.pp_stage1;
  p.stage1_host = o.host;
  p.step_timeout_s = o.pp_step_timeout_s;
  return p;
}

ExpertParallelOptions serve_expert_parallel_options(const ServeOptions& o) {
  ExpertParallelOptions e;
  e.shards = o.ep;
  e.overlap = o.ep_overlap;
  e.ping_pong = o.ep_ping_pong;
  e.remote_members = o.ep_remote;
  e.replicas = o.ep_replicas;
  e.counts_path = o.ep_counts;
  return e;
}

engine::EngineConfig serve_engine_config(const ServeOptions& o) {
  engine::EngineConfig c;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_batched_tokens = o.max_batched_tokens;
  c.scheduler.long_prefill_reserve = o.long_prefill_reserve;
  c.step_time_target_s = o.step_time_target_ms / 1000.0;
  c.scheduler.max_waiting = o.max_waiting;
  c.scheduler.programs.mode = o.program_scheduling == "fcfs" ? engine::ProgramScheduling::kFcfs
                                                             : engine::ProgramScheduling::kPlas;
  c.scheduler.max_model_len = static_cast<int32_t>(o.ctx_size);
  c.block_size = o.block_size;
  c.kv_cache_bytes = o.kv_cache_bytes;
  c.kv_host_bytes = o.kv_host_bytes;
  c.kv_disk_dir = o.kv_disk_dir;
  c.kv_disk_bytes = o.kv_disk_bytes;
  if (auto t = model::parse_kv_type(o.kv_type); t.ok()) c.kv_dtype = *t;  // checked by the CLI
  c.enable_prefix_cache = !o.no_prefix_cache;
  c.kv_pin_ttl_s = o.kv_pin_ttl_s;
  c.kv_pin_max_fraction = o.kv_pin_max_fraction;
  c.kv_pin_tenant_max_fraction = o.kv_pin_tenant_max_fraction;
  c.schedule_ahead = !o.no_schedule_ahead;
  if (auto v = kv::PicVariant::parse(o.pic_link); v.ok()) c.pic_link = *v;  // checked by the CLI
  c.sparse = engine::SparseParams{o.sparse_policy, o.sparse_budget};
  // --draft-model alone turns draft-model speculation on, as llama.cpp's -md does (the CLI
  // checked --speculative's name).
  const engine::SpecMethod implied =
      o.draft_model.empty() ? engine::SpecMethod::kNone : engine::SpecMethod::kDraftModel;
  c.speculative.method =
      o.speculative.empty() ? implied : engine::parse_spec_method(o.speculative).value_or(implied);
  c.speculative.k = o.spec_k;
  if (o.mode == "semi-pd") {
    if (auto split = engine::parse_semi_pd_split(o.semi_pd_split); split.ok()) {
      c.semi_pd = *split;  // checked by the CLI; its range by the engine
    }
  }
  c.draft_head_path = o.draft_head;
  c.draft_model_path = o.draft_model;
  c.early_exit.enabled = o.early_exit;
  c.exit_predictors_path = o.exit_predictors;
  return c;
}

Result<engine::ControllerConfig> semi_pd_controller_config(const ServeOptions& o,
                                                           int32_t num_cores) {
  const bool tuned = o.semi_pd_max_cores != 0;
  if (o.semi_pd_dynamic && o.mode != "semi-pd") {
    return Status::invalid_argument("--semi-pd-dynamic needs --mode semi-pd");
  }
  engine::ControllerConfig c;
  c.ttft_slo_s = o.semi_pd_ttft_slo_ms / 1000.0;
  c.tpot_slo_s = o.semi_pd_tpot_slo_ms / 1000.0;
  c.percentile = o.semi_pd_percentile;
  c.step = o.semi_pd_step;
  c.max_step = o.semi_pd_max_step;
  c.min_cores = 1;
  c.max_cores = num_cores;  // a worker's set never exceeds the cores (SemiPdSplit::validate)
  c.probe_unfitted = true;  // from one split there is no model: probe one step to get a second
  c.max_total_cores = tuned ? o.semi_pd_max_cores : std::max(2, num_cores);
  if (c.max_total_cores > std::max(2, 2 * num_cores)) {
    return Status::invalid_argument("--semi-pd-max-cores " + std::to_string(o.semi_pd_max_cores) +
                                    " exceeds twice the " + std::to_string(num_cores) +
                                    " cores this process may use");
  }
  KEEL_TRY(c.validate());
  return c;
}

cluster::TeEngineSpec te_engine_spec_of(const ServeOptions& s) {
  cluster::TeEngineSpec e;
  e.max_num_seqs = s.max_num_seqs;
  e.max_batched_tokens = s.max_batched_tokens;
  e.max_waiting = s.max_waiting;
  e.block_size = s.block_size;
  e.kv_cache_bytes = s.kv_cache_bytes;
  e.kv_host_bytes = s.kv_host_bytes;
  e.kv_type = s.kv_type;
  e.ctx_size = s.ctx_size;
  e.weight_layout = s.compute.weight_layout;
  e.use_mmap = s.compute.use_mmap;
  e.prefix_cache = !s.no_prefix_cache;
  e.chat_template = s.chat_template;
  e.chat_template_file = s.chat_template_file;
  e.loras = s.loras;
  e.pp = s.pp;
  e.pp_stage1 = s.pp_stage1;
  e.pp_step_timeout_s = s.pp_step_timeout_s;
  e.ep = s.ep;
  e.ep_overlap = s.ep_overlap;
  e.ep_ping_pong = s.ep_ping_pong;
  e.ep_replicas = s.ep_replicas;
  e.ep_counts = s.ep_counts;
  e.ep_remote = s.ep_remote;
  e.mode = s.mode;
  e.kv_pin_ttl_s = s.kv_pin_ttl_s;
  e.kv_pin_max_fraction = s.kv_pin_max_fraction;
  e.kv_pin_tenant_max_fraction = s.kv_pin_tenant_max_fraction;
  e.semi_pd = {s.semi_pd_split,       s.semi_pd_dynamic,    s.semi_pd_ttft_slo_ms,
               s.semi_pd_tpot_slo_ms, s.semi_pd_window_ms,  s.semi_pd_step,
               s.semi_pd_max_step,    s.semi_pd_percentile, s.semi_pd_max_cores};
  return e;
}

void apply_engine_spec(const cluster::TeEngineSpec& e, ServeOptions* o) {
  ServeOptions& s = *o;
  s.max_num_seqs = e.max_num_seqs;
  s.max_batched_tokens = e.max_batched_tokens;
  s.max_waiting = e.max_waiting;
  s.block_size = e.block_size;
  s.kv_cache_bytes = e.kv_cache_bytes;
  s.kv_host_bytes = e.kv_host_bytes;
  s.kv_type = e.kv_type;
  s.ctx_size = e.ctx_size;
  s.compute.weight_layout = e.weight_layout;
  s.compute.use_mmap = e.use_mmap;
  s.no_prefix_cache = !e.prefix_cache;
  s.chat_template = e.chat_template;
  s.chat_template_file = e.chat_template_file;
  s.loras = e.loras;
  s.pp = e.pp;
  s.pp_stage1 = e.pp_stage1;
  s.pp_step_timeout_s = e.pp_step_timeout_s;
  s.ep = e.ep;
  s.ep_overlap = e.ep_overlap;
  s.ep_ping_pong = e.ep_ping_pong;
  s.ep_replicas = e.ep_replicas;
  s.ep_counts = e.ep_counts;
  s.ep_remote = e.ep_remote;
  s.mode = e.mode;
  s.kv_pin_ttl_s = e.kv_pin_ttl_s;
  s.kv_pin_max_fraction = e.kv_pin_max_fraction;
  s.kv_pin_tenant_max_fraction = e.kv_pin_tenant_max_fraction;
  s.semi_pd_split = e.semi_pd.split;
  s.semi_pd_dynamic = e.semi_pd.dynamic;
  s.semi_pd_ttft_slo_ms = e.semi_pd.ttft_slo_ms;
  s.semi_pd_tpot_slo_ms = e.semi_pd.tpot_slo_ms;
  s.semi_pd_window_ms = e.semi_pd.window_ms;
  s.semi_pd_step = e.semi_pd.step;
  s.semi_pd_max_step = e.semi_pd.max_step;
  s.semi_pd_percentile = e.semi_pd.percentile;
  s.semi_pd_max_cores = e.semi_pd.max_cores;
}

}  // namespace keel::host
