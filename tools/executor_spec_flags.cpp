// TeSpec / JeSpec → a TE's / JE's options; see executor_spec_flags.h.
#include "executor_spec_flags.h"

namespace keel::cli {

void apply_engine_spec(const cluster::TeEngineSpec& e, TeOptions* te) {
  host::apply_engine_spec(e, &te->engine);
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
  spec.engine = host::te_engine_spec_of(s);
  cluster::TeEngineSpec& e = spec.engine;
  e.handoff = {te.handoff.mode, te.handoff.prefill_chunk, te.handoff.fault};
  e.peer_tier = te.peer.enabled;
  e.kv_transfer_throttle_bytes_per_s = te.peer.throttle_bytes_per_s;
  return spec;
}

}  // namespace keel::cli
