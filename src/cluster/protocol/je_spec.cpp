// JeSpec's codec; see je_spec.h.
#include "cluster/protocol/je_spec.h"

#include "net/spec_fields.h"

namespace keel::cluster {

using Json = nlohmann::json;

Json encode_je_spec(const JeSpec& s) {
  return Json{{"v", kJeSpecVersion},
              {"id", s.id},
              {"host", s.host},
              {"port", s.port},
              {"tes", s.tes},
              {"model_path", s.model_path},
              {"served_model_name", s.served_model_name},
              {"block_size", s.block_size},
              {"router", s.router},
              {"balance_threshold", s.balance_threshold},
              {"balance_abs_tokens", s.balance_abs_tokens},
              {"pd_heatmap", s.pd_heatmap},
              {"stall_timeout_ms", s.stall_timeout_ms},
              {"predictor", s.predictor},
              {"predictor_model", s.predictor_model},
              {"loras", s.loras},
              {"te_connect_timeout_ms", s.te_connect_timeout_ms},
              {"submit_delay_ms", s.submit_delay_ms},
              {"max_jobs_per_te", s.max_jobs_per_te},
              {"admission_wait_ms", s.admission_wait_ms},
              {"kv_pin_ttl_s", s.kv_pin_ttl_s},
              {"membership", encode_membership_spec(s.membership)}};
}

Result<JeSpec> decode_je_spec(const Json& body) {
  if (!body.is_object()) return Status::invalid_argument("je spec: not an object");
  net::SpecFields f(body, "je spec", kJeSpecVersion);
  KEEL_TRY(f.check_version());
  JeSpec s;
  KEEL_TRY(f.str("id", &s.id));
  if (s.id.empty() || s.id.find('/') != std::string::npos) {
    return Status::invalid_argument("je spec: 'id' is not an id: '" + s.id + "'");
  }
  KEEL_TRY(f.str("host", &s.host));
  KEEL_TRY(f.integer("port", 0, 65535, &s.port));
  KEEL_TRY(f.strings("tes", &s.tes));
  KEEL_TRY(f.str("model_path", &s.model_path));
  if (s.model_path.empty()) return Status::invalid_argument("je spec: 'model_path' is empty");
  KEEL_TRY(f.str("served_model_name", &s.served_model_name));
  KEEL_TRY(f.integer("block_size", 1, 1024, &s.block_size));
  KEEL_TRY(f.one_of("router", {"deepserve", "round_robin", "least_load", "prefix"}, &s.router));
  KEEL_TRY(f.number("balance_threshold", 0, &s.balance_threshold));
  KEEL_TRY(f.number("balance_abs_tokens", 0, &s.balance_abs_tokens));
  KEEL_TRY(f.str("pd_heatmap", &s.pd_heatmap));
  KEEL_TRY(f.integer("stall_timeout_ms", 1, net::kMaxI64, &s.stall_timeout_ms));
  KEEL_TRY(f.str("predictor", &s.predictor));
  KEEL_TRY(f.str("predictor_model", &s.predictor_model));
  KEEL_TRY(f.strings("loras", &s.loras));
  for (const std::string& lora : s.loras) {
    const size_t eq = lora.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == lora.size()) {
      return Status::invalid_argument("je spec: 'loras' holds '" + lora + "', not NAME=PATH");
    }
  }
  KEEL_TRY(f.integer("te_connect_timeout_ms", 1, 3600000, &s.te_connect_timeout_ms));
  KEEL_TRY(f.integer("submit_delay_ms", 0, net::kMaxI64, &s.submit_delay_ms));
  KEEL_TRY(f.integer("max_jobs_per_te", 0, 1 << 20, &s.max_jobs_per_te));
  KEEL_TRY(f.integer("admission_wait_ms", 1, net::kMaxI64, &s.admission_wait_ms));
  KEEL_TRY(f.number("kv_pin_ttl_s", 0, &s.kv_pin_ttl_s));
  if (s.kv_pin_ttl_s > 86400) {
    return Status::invalid_argument("je spec: 'kv_pin_ttl_s' must be at most 86400");
  }
  KEEL_ASSIGN_OR_RETURN(const Json* membership, f.object("membership"));
  if (membership != nullptr) {
    KEEL_TRY(decode_membership_spec(*membership, "je spec", &s.membership));
  }
  KEEL_TRY(f.finish());
  return s;
}

std::string je_spec_text(const JeSpec& spec) { return encode_je_spec(spec).dump(); }

Result<JeSpec> parse_je_spec(std::string_view text) {
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Status::invalid_argument("je spec: not JSON");
  return decode_je_spec(body);
}

}  // namespace keel::cluster
