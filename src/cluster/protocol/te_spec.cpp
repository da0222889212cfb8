// TeSpec's codec; see te_spec.h.
#include "cluster/protocol/te_spec.h"

#include <fmt/format.h>

#include "cluster/kv/kv_handoff.h"
#include "cluster/weights/weights_server.h"
#include "net/spec_fields.h"

namespace keel::cluster {
namespace {

using Json = nlohmann::json;

Json encode_semi_pd(const TeSemiPdSpec& s) {
  return Json{{"split", s.split},
              {"dynamic", s.dynamic},
              {"ttft_slo_ms", s.ttft_slo_ms},
              {"tpot_slo_ms", s.tpot_slo_ms},
              {"window_ms", s.window_ms},
              {"step", s.step},
              {"max_step", s.max_step},
              {"percentile", s.percentile},
              {"max_cores", s.max_cores}};
}

Status decode_semi_pd(const Json& body, TeSemiPdSpec* s) {
  net::SpecFields f(body, "te spec: engine.semi_pd", kTeSpecVersion);
  KEEL_TRY(f.str("split", &s->split));
  KEEL_TRY(f.boolean("dynamic", &s->dynamic));
  KEEL_TRY(f.number("ttft_slo_ms", 0, &s->ttft_slo_ms));
  KEEL_TRY(f.number("tpot_slo_ms", 0, &s->tpot_slo_ms));
  KEEL_TRY(f.integer("window_ms", 1, net::kMaxI32, &s->window_ms));
  KEEL_TRY(f.integer("step", 1, net::kMaxI32, &s->step));
  KEEL_TRY(f.integer("max_step", 1, net::kMaxI32, &s->max_step));
  KEEL_TRY(f.number("percentile", 0, &s->percentile));
  KEEL_TRY(f.integer("max_cores", 0, net::kMaxI32, &s->max_cores));
  return f.finish();
}

Status decode_handoff(const Json& body, TeHandoffSpec* h) {
  net::SpecFields f(body, "te spec: engine.handoff", kTeSpecVersion);
  KEEL_TRY(f.one_of("mode", {"stream", "after"}, &h->mode));
  KEEL_TRY(f.integer("prefill_chunk", 0, net::kMaxI32, &h->prefill_chunk));
  KEEL_TRY(f.str("fault", &h->fault));
  if (Result<KvTransferFaults> faults = parse_kv_transfer_faults(h->fault); !faults.ok()) {
    return faults.status().with_prefix("te spec: engine.handoff: 'fault'");
  }
  return f.finish();
}

// The engine spec's fields, read from `f` (its "v" already checked).
Status read_engine(net::SpecFields& f, TeEngineSpec* e) {
  KEEL_TRY(f.integer("max_num_seqs", 1, net::kMaxI32, &e->max_num_seqs));
  KEEL_TRY(f.integer("max_batched_tokens", 1, net::kMaxI32, &e->max_batched_tokens));
  KEEL_TRY(f.integer("max_waiting", 0, net::kMaxI32, &e->max_waiting));
  KEEL_TRY(f.integer("block_size", 1, net::kMaxI32, &e->block_size));
  KEEL_TRY(f.integer("kv_cache_bytes", 0, net::kMaxI64, &e->kv_cache_bytes));
  KEEL_TRY(f.integer("kv_host_bytes", 0, net::kMaxI64, &e->kv_host_bytes));
  KEEL_TRY(f.one_of("kv_type", {"f32", "f16", "q8_0"}, &e->kv_type));
  KEEL_TRY(f.integer("ctx_size", 0, net::kMaxI64, &e->ctx_size));
  KEEL_TRY(f.one_of("weight_layout", {"grouped", "rows"}, &e->weight_layout));
  KEEL_TRY(f.boolean("use_mmap", &e->use_mmap));
  KEEL_TRY(f.boolean("prefix_cache", &e->prefix_cache));
  KEEL_TRY(f.str("chat_template", &e->chat_template));
  KEEL_TRY(f.str("chat_template_file", &e->chat_template_file));
  KEEL_TRY(f.strings("loras", &e->loras));
  for (const std::string& lora : e->loras) {
    const size_t eq = lora.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == lora.size()) {
      return Status::invalid_argument("te engine spec: 'loras' holds '" + lora +
                                      "', not NAME=PATH");
    }
  }
  KEEL_TRY(f.integer("pp", 1, 2, &e->pp));
  KEEL_TRY(f.str("pp_stage1", &e->pp_stage1));
  KEEL_TRY(f.number("pp_step_timeout_s", 0, &e->pp_step_timeout_s));
  KEEL_TRY(f.integer("ep", 1, 8, &e->ep));
  KEEL_TRY(f.boolean("ep_overlap", &e->ep_overlap));
  KEEL_TRY(f.boolean("ep_ping_pong", &e->ep_ping_pong));
  KEEL_TRY(f.integer("ep_replicas", 0, 64, &e->ep_replicas));
  KEEL_TRY(f.str("ep_counts", &e->ep_counts));
  KEEL_TRY(f.strings("ep_remote", &e->ep_remote));
  KEEL_TRY(f.integer("ep_member", 0, 7, &e->ep_member));
  if (static_cast<int32_t>(e->ep_remote.size()) > e->ep - 1 ||
      (e->ep_member > 0 && e->ep_member >= e->ep)) {
    return Status::invalid_argument(
        "te engine spec: 'ep_remote' names more than ep - 1 members, "
        "or 'ep_member' is not below 'ep'");
  }
  KEEL_TRY(f.one_of("mode", {"colocated", "semi-pd"}, &e->mode));
  KEEL_ASSIGN_OR_RETURN(const Json* semi, f.object("semi_pd"));
  if (semi != nullptr) {
    KEEL_TRY(decode_semi_pd(*semi, &e->semi_pd));
  }
  KEEL_ASSIGN_OR_RETURN(const Json* handoff, f.object("handoff"));
  if (handoff != nullptr) {
    KEEL_TRY(decode_handoff(*handoff, &e->handoff));
  }
  KEEL_TRY(f.boolean("peer_tier", &e->peer_tier));
  KEEL_TRY(f.number("kv_pin_ttl_s", 0, &e->kv_pin_ttl_s));
  KEEL_TRY(f.number("kv_pin_max_fraction", 0, &e->kv_pin_max_fraction));
  KEEL_TRY(f.number("kv_pin_tenant_max_fraction", 0, &e->kv_pin_tenant_max_fraction));
  if (e->kv_pin_ttl_s > 86400 || e->kv_pin_max_fraction > 1 || e->kv_pin_tenant_max_fraction > 1) {
    return Status::invalid_argument(
        "te engine spec: 'kv_pin_ttl_s' must be at most 86400 and the kv_pin fractions at most 1");
  }
  return f.number("kv_transfer_throttle_bytes_per_s", 0, &e->kv_transfer_throttle_bytes_per_s);
}

}  // namespace

Status decode_membership_spec(const Json& body, std::string_view what, MembershipSpec* m) {
  net::SpecFields f(body, std::string(what) + ": membership", kTeSpecVersion);
  KEEL_TRY(f.one_of("mode", {"embedded", "etcd"}, &m->mode));
  KEEL_TRY(f.strings("etcd_endpoints", &m->etcd_endpoints));
  KEEL_TRY(f.str("prefix", &m->prefix));
  KEEL_TRY(f.integer("ttl_s", 1, 3600, &m->ttl_s));
  return f.finish();
}

Json encode_membership_spec(const MembershipSpec& m) {
  return Json{{"mode", m.mode},
              {"etcd_endpoints", m.etcd_endpoints},
              {"prefix", m.prefix},
              {"ttl_s", m.ttl_s}};
}

Json encode_te_engine_spec(const TeEngineSpec& e) {
  Json j = {{"v", kTeSpecVersion},
            {"max_num_seqs", e.max_num_seqs},
            {"max_batched_tokens", e.max_batched_tokens},
            {"max_waiting", e.max_waiting},
            {"block_size", e.block_size},
            {"kv_cache_bytes", e.kv_cache_bytes},
            {"kv_host_bytes", e.kv_host_bytes},
            {"kv_type", e.kv_type},
            {"ctx_size", e.ctx_size},
            {"weight_layout", e.weight_layout},
            {"use_mmap", e.use_mmap},
            {"prefix_cache", e.prefix_cache},
            {"chat_template", e.chat_template},
            {"chat_template_file", e.chat_template_file},
            {"loras", e.loras},
            {"pp", e.pp},
            {"pp_stage1", e.pp_stage1},
            {"pp_step_timeout_s", e.pp_step_timeout_s},
            {"ep", e.ep},
            {"ep_overlap", e.ep_overlap},
            {"ep_ping_pong", e.ep_ping_pong},
            {"ep_replicas", e.ep_replicas},
            {"ep_counts", e.ep_counts},
            {"ep_remote", e.ep_remote},
            {"ep_member", e.ep_member},
            {"mode", e.mode},
            {"handoff",
             {{"mode", e.handoff.mode},
              {"prefill_chunk", e.handoff.prefill_chunk},
              {"fault", e.handoff.fault}}},
            {"peer_tier", e.peer_tier},
            {"kv_pin_ttl_s", e.kv_pin_ttl_s},
            {"kv_pin_max_fraction", e.kv_pin_max_fraction},
            {"kv_pin_tenant_max_fraction", e.kv_pin_tenant_max_fraction},
            {"kv_transfer_throttle_bytes_per_s", e.kv_transfer_throttle_bytes_per_s}};
  if (e.mode == "semi-pd") j["semi_pd"] = encode_semi_pd(e.semi_pd);
  return j;
}

Result<TeEngineSpec> decode_te_engine_spec(const Json& body) {
  if (!body.is_object()) return Status::invalid_argument("te engine spec: not an object");
  net::SpecFields f(body, "te engine spec", kTeSpecVersion);
  KEEL_TRY(f.check_version());
  TeEngineSpec e;
  KEEL_TRY(read_engine(f, &e));
  KEEL_TRY(f.finish());
  return e;
}

Json encode_te_spec(const TeSpec& s) {
  return Json{{"v", kTeSpecVersion},
              {"id", s.id},
              {"role", s.role},
              {"model_path", s.model_path},
              {"served_model_name", s.served_model_name},
              {"host", s.host},
              {"port", s.port},
              {"advertise_host", s.advertise_host},
              {"threads", s.threads},
              {"isa", s.isa},
              {"warm", s.warm},
              {"store_dir", s.store_dir},
              {"health_port", s.health_port},
              {"health_hang_ms", s.health_hang_ms},
              {"weights_fault", s.weights_fault},
              {"engine", encode_te_engine_spec(s.engine)},
              {"membership", encode_membership_spec(s.membership)}};
}

Result<TeSpec> decode_te_spec(const Json& body) {
  if (!body.is_object()) return Status::invalid_argument("te spec: not an object");
  net::SpecFields f(body, "te spec", kTeSpecVersion);
  KEEL_TRY(f.check_version());
  TeSpec s;
  KEEL_TRY(f.str("id", &s.id));
  if (s.id.empty() || s.id.find('/') != std::string::npos) {
    return Status::invalid_argument("te spec: 'id' is not an id: '" + s.id + "'");
  }
  KEEL_TRY(f.one_of("role", {"colocated", "prefill", "decode"}, &s.role));
  KEEL_TRY(f.str("model_path", &s.model_path));
  KEEL_TRY(f.str("served_model_name", &s.served_model_name));
  KEEL_TRY(f.str("host", &s.host));
  KEEL_TRY(f.integer("port", 0, 65535, &s.port));
  KEEL_TRY(f.str("advertise_host", &s.advertise_host));
  KEEL_TRY(f.integer("threads", 0, 1024, &s.threads));
  KEEL_TRY(f.one_of("isa", {"", "scalar", "avx2", "avx512"}, &s.isa));
  KEEL_TRY(f.boolean("warm", &s.warm));
  KEEL_TRY(f.str("store_dir", &s.store_dir));
  KEEL_TRY(f.integer("health_port", -1, 65535, &s.health_port));
  KEEL_TRY(f.integer("health_hang_ms", 1, net::kMaxI64, &s.health_hang_ms));
  KEEL_TRY(f.str("weights_fault", &s.weights_fault));
  if (Result<WeightsFaults> faults = parse_weights_faults(s.weights_fault); !faults.ok()) {
    return faults.status().with_prefix("te spec: 'weights_fault'");
  }
  KEEL_ASSIGN_OR_RETURN(const Json* engine, f.object("engine"));
  if (engine != nullptr) {
    KEEL_ASSIGN_OR_RETURN(s.engine, decode_te_engine_spec(*engine));
  }
  KEEL_ASSIGN_OR_RETURN(const Json* membership, f.object("membership"));
  if (membership != nullptr) {
    KEEL_TRY(decode_membership_spec(*membership, "te spec", &s.membership));
  }
  KEEL_TRY(f.finish());
  if (s.model_path.empty() && !s.warm) {
    return Status::invalid_argument("te spec: 'model_path' is empty and the TE is not warm");
  }
  return s;
}

std::string te_spec_text(const TeSpec& spec) { return encode_te_spec(spec).dump(); }

Result<TeSpec> parse_te_spec(std::string_view text) {
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Status::invalid_argument("te spec: not JSON");
  return decode_te_spec(body);
}

}  // namespace keel::cluster
