// JeSpec: everything a job executor is started with — its id and address, the TEs it routes to,
// the model (its prefix-cache identity and adapters), the router and its thresholds, the
// decode-length predictor, timeouts and membership — as one plain struct with a versioned codec
// (the same rules as te_spec.h: older versions read with defaults, a newer one refused naming both
// versions, unknown fields refused). `keel cluster up` starts a JE as `keel je --spec -` with the
// spec on its stdin (je_child, executor_launch.h), and a restarted JE reuses it with its address,
// the TEs as last seen and a short connect timeout (je_replacement.h).
// Version history: 1 = the first (keel 0.34).
//
// Thread safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/protocol/te_spec.h"
#include "core/result.h"

namespace keel::cluster {

inline constexpr int kJeSpecVersion = 1;

struct JeSpec {
  std::string id = "je-0";
  std::string host = "127.0.0.1";    // the address gateways reach it at
  int32_t port = 0;                  // 0 = a free one
  std::vector<std::string> tes;      // TE control addresses; none: the manager adds them (add_te)
  std::string model_path;            // the GGUF the TEs serve (its prefix-cache identity)
  std::string served_model_name;     // "" = the model file's stem
  int32_t block_size = 16;           // the TEs' tokens per KV block
  std::string router = "deepserve";  // deepserve | round_robin | least_load | prefix
  double balance_threshold = 0.25;
  double balance_abs_tokens = 4096;
  std::string pd_heatmap;  // `keel cluster profile-pd`'s file; "" = none
  int64_t stall_timeout_ms = 5000;
  std::string predictor;           // decode-length predictor file; "" = none
  std::string predictor_model;     // its side model; "" = model_path
  std::vector<std::string> loras;  // NAME=PATH: adapters the TEs serve (prefix keys)
  int64_t te_connect_timeout_ms = 30000;
  int64_t submit_delay_ms = 0;  // fault hook (tests): hold every submitted job this long
  // Admission (cluster/job/admission.h): jobs run at once per serving TE (0 = no limit: every job
  // is dispatched as it comes) and how long a held job may wait.
  int32_t max_jobs_per_te = 0;
  int64_t admission_wait_ms = 60000;
  // KV kept across tool calls: how long a program is routed to the TE holding its pin (the TEs'
  // --kv-pin-ttl; 0 = never).
  double kv_pin_ttl_s = 60.0;
  MembershipSpec membership;
  bool operator==(const JeSpec&) const = default;
};

[[nodiscard]] nlohmann::json encode_je_spec(const JeSpec& spec);
// InvalidArgument naming the field for a malformed spec; FailedPrecondition for a newer version.
[[nodiscard]] Result<JeSpec> decode_je_spec(const nlohmann::json& body);
[[nodiscard]] std::string je_spec_text(const JeSpec& spec);
[[nodiscard]] Result<JeSpec> parse_je_spec(std::string_view text);

}  // namespace keel::cluster
