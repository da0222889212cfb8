// TeSpec / JeSpec → a TE's / JE's options; see executor_spec_flags.h.
#include "executor_spec_flags.h"

namespace keel::cli {

void apply_engine_spec(const cluster::TeEngineSpec& e, TeOptions* te) {
  ServeOptions& s = te->engine;
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
  s.mode = e.mode;
  s.semi_pd_split = e.semi_pd.split;
  s.semi_pd_dynamic = e.semi_pd.dynamic;
  s.semi_pd_ttft_slo_ms = e.semi_pd.ttft_slo_ms;
  s.semi_pd_tpot_slo_ms = e.semi_pd.tpot_slo_ms;
  s.semi_pd_window_ms = e.semi_pd.window_ms;
  s.semi_pd_step = e.semi_pd.step;
  s.semi_pd_max_step = e.semi_pd.max_step;
  s.semi_pd_percentile = e.semi_pd.percentile;
  s.semi_pd_max_cores = e.semi_pd.max_cores;
  te->handoff = {e.handoff.mode, e.handoff.prefill_chunk, e.handoff.fault};
  te->peer = {e.peer_tier, e.kv_transfer_throttle_bytes_per_s};
}

TeOptions te_options(const cluster::TeSpec& spec) {
  TeOptions te;
  te.id = spec.id;
  te.role = spec.role;
  te.engine.model_path = spec.model_path;
  te.engine.served_model_name = spec.served_model_name;
  te.engine.host = spec.host;
  te.engine.port = spec.port;
  te.advertise_host = spec.advertise_host;
  te.engine.compute.threads = spec.threads;
  te.engine.compute.isa = spec.isa;
  te.warm = spec.warm;
  te.store_dir = spec.store_dir;
  te.health_port = spec.health_port;
  te.health_hang_ms = spec.health_hang_ms;
  te.weights_fault = spec.weights_fault;
  te.membership = control::MembershipConfig::from_spec(spec.membership);
  apply_engine_spec(spec.engine, &te);
  return te;
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
  e.mode = s.mode;
  e.semi_pd = {s.semi_pd_split,       s.semi_pd_dynamic,    s.semi_pd_ttft_slo_ms,
               s.semi_pd_tpot_slo_ms, s.semi_pd_window_ms,  s.semi_pd_step,
               s.semi_pd_max_step,    s.semi_pd_percentile, s.semi_pd_max_cores};
  return e;
}

cluster::TeSpec te_spec_of(const TeOptions& te) {
  const ServeOptions& s = te.engine;
  cluster::TeSpec spec;
  spec.id = te.id;
  spec.role = te.role;
  spec.model_path = s.model_path;
  spec.served_model_name = s.served_model_name;
  spec.host = s.host;
  spec.port = s.port;
  spec.advertise_host = te.advertise_host;
  spec.threads = s.compute.threads;
  spec.isa = s.compute.isa;
  spec.warm = te.warm;
  spec.store_dir = te.store_dir;
  spec.health_port = te.health_port;
  spec.health_hang_ms = te.health_hang_ms;
  spec.weights_fault = te.weights_fault;
  spec.membership = te.membership.spec();
  spec.engine = te_engine_spec_of(s);
  cluster::TeEngineSpec& e = spec.engine;
  e.handoff = {te.handoff.mode, te.handoff.prefill_chunk, te.handoff.fault};
  e.peer_tier = te.peer.enabled;
  e.kv_transfer_throttle_bytes_per_s = te.peer.throttle_bytes_per_s;
  return spec;
}

}  // namespace keel::cli
