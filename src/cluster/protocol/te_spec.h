// TeSpec: everything a task executor is started with — its identity, compute, engine, KV roles
// and membership — as one plain struct with a versioned codec. The cluster manager builds one
// per TE (control/up_plan), sends its engine part to a node agent in start_te and to a warm TE in
// bind_model, and a TE process reads the whole spec from its stdin (`keel te --spec -`). No
// engine configuration crosses a process boundary as command-line flags.
//
// The codec: a JSON object whose "v" is the spec's version. A reader accepts its own version and
// every older one (fields added since take their defaults) and refuses a newer one, naming both
// versions, so a node running an older keel says what to upgrade instead of dropping settings it
// does not know. Unknown fields are refused too: within one version the fields are exactly these.
// Version history: 1 = the first (keel 0.34).
//
// Thread safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::cluster {

inline constexpr int kTeSpecVersion = 1;

// --mode semi-pd: a prefill and a decode worker on their own cores over one KV pool.
struct TeSemiPdSpec {
  std::string split = "1,1";  // cores for prefill, decode ("X,Y")
  bool dynamic = false;       // the SLO-aware split controller
  double ttft_slo_ms = 1000.0;
  double tpot_slo_ms = 100.0;
  int32_t window_ms = 1000;
  int32_t step = 1;
  int32_t max_step = 4;
  double percentile = 90.0;
  int32_t max_cores = 0;  // 0 = the cores the process may use
  bool operator==(const TeSemiPdSpec&) const = default;
};

// A prefill TE's KV hand-off to decode TEs.
struct TeHandoffSpec {
  std::string mode = "stream";  // stream | after
  int32_t prefill_chunk = 256;  // prompt tokens per step; 0 = max_batched_tokens
  std::string fault;            // cluster::parse_kv_transfer_faults (tests); "" = none
  bool operator==(const TeHandoffSpec&) const = default;
};

// The engine part: what a TE serves its model with. A warm TE started without a model takes its
// bind's engine spec over its own, all but the kernels and threads (set when it started).
struct TeEngineSpec {
  int32_t max_num_seqs = 16;
  int32_t max_batched_tokens = 512;
  int32_t max_waiting = 256;
  int32_t block_size = 16;
  int64_t kv_cache_bytes = 0;  // 0 = enough for max_num_seqs full contexts (capped)
  int64_t kv_host_bytes = 0;   // T1 host tier; 0 = none
  std::string kv_type = "f32";
  int64_t ctx_size = 0;  // 0 = the model's context length
  std::string weight_layout = "grouped";
  bool use_mmap = false;
  bool prefix_cache = true;
  std::string chat_template;       // a built-in name or Jinja text; "" = the model's
  std::string chat_template_file;  // an absolute path; "" = none
  std::vector<std::string> loras;  // NAME=PATH
  int32_t pp = 1;                  // pipeline stages (the TE starts its stage 1)
  std::string pp_stage1;           // with pp 2: a running `keel pp-stage` HOST:PORT; "" = start one
  double pp_step_timeout_s = 60.0;
  int32_t ep = 1;             // expert-parallel processes (the TE starts its ep - 1 members)
  bool ep_overlap = true;     // its experts computed while the members compute theirs
  bool ep_ping_pong = false;  // two micro-batches alternate (model/context.h)
  int32_t ep_replicas = 0;    // hot-expert copies per process and layer (host/expert_parallel)
  std::string ep_counts;      // with ep_replicas: an absolute path to the expert counts
  // Listening members (`keel ep-expert --listen`, placed by the manager on other hosts): HOST:PORT
  // of shards 1, 2, … in order; the TE starts only the rest (none when there are ep - 1).
  std::vector<std::string> ep_remote;
  // The spec of an expert member a node agent starts (StartTe role ep-expert): the shard it holds,
  // 1 ≤ ep_member < ep; 0 = not a member (a TE, a leader).
  int32_t ep_member = 0;
  std::string mode = "colocated";  // colocated | semi-pd
  TeSemiPdSpec semi_pd;            // with mode semi-pd (encoded only then)
  TeHandoffSpec handoff;           // a prefill TE's
  bool peer_tier = false;          // T3: fetch KV blocks from peer TEs
  // KV kept across tool calls (docs/agent-kv.md): --kv-pin-ttl and the pin caps; absent: the
  // defaults (keel serve's).
  double kv_pin_ttl_s = 60.0;
  double kv_pin_max_fraction = 0.25;
  double kv_pin_tenant_max_fraction = 0.125;
  double kv_transfer_throttle_bytes_per_s = 0;  // fault hook: throttle the T3 link; 0 = none
  bool operator==(const TeEngineSpec&) const = default;
};

// Where a TE or JE registers itself: "embedded" (its manager registers it) or etcd under its own
// lease.
struct MembershipSpec {
  std::string mode = "embedded";  // embedded | etcd
  std::vector<std::string> etcd_endpoints;
  std::string prefix = "/keel/default";
  int32_t ttl_s = 10;
  bool operator==(const MembershipSpec&) const = default;
};

struct TeSpec {
  std::string id = "te-0";
  std::string role = "colocated";  // colocated | prefill | decode
  std::string model_path;          // "" only for a warm TE (its bind names the model)
  std::string served_model_name;   // "" = the model file's stem
  std::string host = "127.0.0.1";  // the control port's address
  int32_t port = 0;                // 0 = a free one
  std::string advertise_host;      // registered in the membership; "" = host
  int32_t threads = 0;             // 0 = all hardware threads
  std::string isa;                 // "" = the best this CPU runs
  bool warm = false;               // start without a model and serve what a bind names
  std::string store_dir;           // the model store to map from; "" = none
  int32_t health_port = -1;        // HTTP /health; 0 = a free port, -1 = none
  int64_t health_hang_ms = 5000;
  std::string weights_fault;  // the weights service's fault hook (tests): flip:N | stop:N
  TeEngineSpec engine;
  MembershipSpec membership;
  bool operator==(const TeSpec&) const = default;
};

[[nodiscard]] nlohmann::json encode_te_spec(const TeSpec& spec);
// InvalidArgument naming the field for a malformed spec; FailedPrecondition for a newer version.
[[nodiscard]] Result<TeSpec> decode_te_spec(const nlohmann::json& body);
// The spec as one line of JSON (a TE's stdin), and back (InvalidArgument for text that is not
// JSON).
[[nodiscard]] std::string te_spec_text(const TeSpec& spec);
[[nodiscard]] Result<TeSpec> parse_te_spec(std::string_view text);

// The membership part (a TE's, a JE's: je_spec.h); `what` names the spec in errors.
[[nodiscard]] nlohmann::json encode_membership_spec(const MembershipSpec& m);
[[nodiscard]] Status decode_membership_spec(const nlohmann::json& body, std::string_view what,
                                            MembershipSpec* m);

// The engine part alone (start_te, bind_model): versioned the same way.
[[nodiscard]] nlohmann::json encode_te_engine_spec(const TeEngineSpec& spec);
[[nodiscard]] Result<TeEngineSpec> decode_te_engine_spec(const nlohmann::json& body);

}  // namespace keel::cluster
