// cluster up's plan; see up_plan.h.
#include "control/up/up_plan.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "tokenizer/builtin_chat_templates.h"

namespace keel::control {

namespace {

// --chat-template as a TE gets it: a built-in name or Jinja text as given, a file's path made
// absolute (the TE may run elsewhere in the tree).
std::string chat_template_arg(const std::string& v) {
  if (tokenizer::builtin_chat_template_source(v) || v.find("{{") != std::string::npos ||
      v.find("{%") != std::string::npos) {
    return v;
  }
  return std::filesystem::absolute(v).string();
}

}  // namespace

cluster::TeEngineSpec te_engine_spec(const ClusterUpOptions& o, const std::string& kind) {
  const host::ServeOptions& s = o.serve;
  const cluster::TeEngineSpec defaults;
  cluster::TeEngineSpec e = host::te_engine_spec_of(s);
  if (!s.chat_template.empty()) e.chat_template = chat_template_arg(s.chat_template);
  if (!s.chat_template_file.empty()) {
    e.chat_template_file = std::filesystem::absolute(s.chat_template_file).string();
  }
  e.pp_stage1 = defaults.pp_stage1;  // each pipelined TE starts its own stage 1
  if (kind != "colocated" || s.pp <= 1) {
    e.pp = defaults.pp;
    e.pp_step_timeout_s = defaults.pp_step_timeout_s;
  }
  if (kind != "colocated") {  // expert members belong to colocated TEs only
    e.ep = defaults.ep;
    e.ep_overlap = defaults.ep_overlap;
    e.ep_ping_pong = defaults.ep_ping_pong;
    e.ep_replicas = defaults.ep_replicas;
    e.ep_counts = defaults.ep_counts;
  } else if (!e.ep_counts.empty()) {
    e.ep_counts = std::filesystem::absolute(e.ep_counts).string();
  }
  e.mode = kind == "semi-pd" ? "semi-pd" : defaults.mode;
  if (kind != "semi-pd") e.semi_pd = defaults.semi_pd;
  if (kind == "prefill") e.handoff = {o.handoff.mode, o.handoff.prefill_chunk, o.handoff.fault};
  e.peer_tier = o.peer.enabled;
  e.kv_transfer_throttle_bytes_per_s = o.peer.throttle_bytes_per_s;
  return e;
}

cluster::TeSpec te_spec(const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        int i, int threads, const std::string& kind) {
  cluster::TeSpec spec;
  spec.id = "te-" + std::to_string(i);
  spec.role = kind == "semi-pd" ? "colocated" : kind;
  spec.model_path = path;
  spec.served_model_name = name;
  spec.threads = threads;
  spec.isa = o.serve.compute.isa;
  spec.engine = te_engine_spec(o, kind);
  spec.store_dir = o.store_dir;
  spec.membership = o.membership.spec();
  return spec;
}

// A JE's id: je-<i>; under --nodes auto <model>-je-<i>-<manager id> (several models' managers, and
// a leader's and its standbys' JEs, share the membership there).
std::string je_id(const ClusterUpOptions& o, const std::string& name, int i,
                  const std::string& manager) {
  const std::string base = "je-" + std::to_string(i);
  return o.nodes == "auto" ? name + "-" + base + "-" + manager : base;
}

cluster::JeSpec je_spec(const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        const std::string& id, const std::vector<std::string>& tes) {
  cluster::JeSpec spec;
  spec.id = id;
  spec.tes = tes;  // none: the autoscaler adds them
  spec.model_path = path;
  spec.served_model_name = name;
  spec.block_size = o.serve.block_size;
  spec.router = o.router;
  spec.balance_threshold = o.balance_threshold;
  spec.balance_abs_tokens = o.balance_abs_tokens;
  spec.stall_timeout_ms = o.stall_timeout_ms;
  spec.loras = o.serve.loras;
  spec.pd_heatmap = o.pd_heatmap;
  spec.predictor = o.predictor;
  spec.predictor_model = o.predictor_model;
  spec.submit_delay_ms = o.je_submit_delay_ms;
  spec.max_jobs_per_te = o.max_jobs_per_te;
  spec.kv_pin_ttl_s = o.serve.kv_pin_ttl_s;  // the TEs' pins live as long
  spec.membership = o.membership.spec();
  return spec;
}

bool autoscaling(const ClusterUpOptions& o) {
  return o.autoscale.max_replicas > 0 || role_autoscaling(o);
}

bool role_autoscaling(const ClusterUpOptions& o) {
  return o.autoscale.max_prefill > 0 || o.autoscale.max_decode > 0;
}

Status check_role_autoscaling(const ClusterUpOptions& o) {
  if (!role_autoscaling(o)) return {};
  const AutoscaleOptions& a = o.autoscale;
  if (o.prefill == 0 || o.decode == 0) {
    return Status::invalid_argument(
        "cluster up: --max-prefill/--max-decode scale a PD fleet: give --prefill and --decode");
  }
  if (a.scaler == "k8s") {
    return Status::invalid_argument(
        "cluster up: --scaler k8s scales one Deployment of colocated TEs, not prefill and decode "
        "apart");
  }
  const auto check = [](const char* role, int32_t min, int32_t max, int32_t start) -> Status {
    if (max == 0) return {};
    if (min > max || start > max) {
      return Status::invalid_argument(
          fmt::format("cluster up: --min-{0} {1} and --{0} {2} must not exceed --max-{0} {3}", role,
                      min, start, max));
    }
    return {};
  };
  KEEL_TRY(check("prefill", a.min_prefill, a.max_prefill, o.prefill));
  return check("decode", a.min_decode, a.max_decode, o.decode);
}

// Colocated TEs at start-up: --colocated, else 2 (0 with prefill/decode or semi-PD TEs; --min
// when autoscaling).
int colocated_tes(const ClusterUpOptions& o) {
  if (o.colocated >= 0) return o.colocated;
  if (o.autoscale.max_replicas > 0) return o.autoscale.min_replicas;
  return o.prefill + o.decode + o.semi_pd > 0 ? 0 : 2;
}

// TEs at start-up (colocated + semi-PD + prefill + decode).
int initial_tes(const ClusterUpOptions& o) {
  return colocated_tes(o) + o.semi_pd + o.prefill + o.decode;
}

// Each TE's compute threads: --threads-per-te, else the machine's threads / processes (a
// pipelined TE is --pp processes, an expert-parallel one --ep, each with these threads; an
// autoscaled group counts at its max).
int threads_per_te(const ClusterUpOptions& o) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const AutoscaleOptions& a = o.autoscale;
  // An autoscaled group counts at its max.
  const int tes = std::max(colocated_tes(o), a.max_replicas) + o.semi_pd +
                  std::max(o.prefill, a.max_prefill) + std::max(o.decode, a.max_decode);
  const int pipelined = std::max(colocated_tes(o), a.max_replicas);
  const int processes = tes + pipelined * (std::max(1, o.serve.pp) - 1) +
                        colocated_tes(o) * (std::max(1, o.serve.ep) - 1);
  return o.threads_per_te > 0 ? o.threads_per_te : std::max(1, hw / std::max(1, processes));
}

cluster::TeSpec warm_te_spec(const ClusterUpOptions& o, const std::string& path,
                             const std::string& name, int threads) {
  cluster::TeSpec spec = te_spec(o, path, name, 0, threads, "colocated");
  spec.warm = true;
  if (!o.te_stores.empty()) spec.store_dir.clear();  // the pool gives each its own store
  return spec;
}

// What each TE reserves on its host for gang placement: --te-memory-bytes, else the GGUF's size
// and the KV cache's bytes.
int64_t te_memory_bytes(const ClusterUpOptions& o, const std::string& path) {
  if (o.te_memory_bytes > 0) return o.te_memory_bytes;
  std::error_code ec;
  const auto file = std::filesystem::file_size(path, ec);
  return (ec ? 0 : static_cast<int64_t>(file)) + static_cast<int64_t>(o.serve.kv_cache_bytes);
}

// --pp 2: colocated TEs only, each two processes. A warm TE is one process until its bind, which
// starts its stage 1 (a warm TE's flags carry --pp 2); with a store both stages map the entry.
Status check_pipelined(const ClusterUpOptions& o) {
  if (o.serve.pp <= 1) return {};
  const auto refuse = [](const std::string& what) {
    return Status::invalid_argument("cluster up: --pp 2 does not go with " + what +
                                    " (pipelined TEs are colocated, started with their stage)");
  };
  if (o.prefill + o.decode > 0) return refuse("--prefill/--decode");
  if (o.semi_pd > 0) return refuse("--semi-pd");
  if (o.peer.enabled) return refuse("--kv-peer-tier");
  return {};
}

// The TE kinds asked for, in start order: colocated, semi-pd, prefill, decode.
std::vector<std::string> te_kinds(const ClusterUpOptions& o) {
  std::vector<std::string> kinds(static_cast<size_t>(colocated_tes(o)), "colocated");
  kinds.insert(kinds.end(), static_cast<size_t>(o.semi_pd), "semi-pd");
  kinds.insert(kinds.end(), static_cast<size_t>(o.prefill), "prefill");
  kinds.insert(kinds.end(), static_cast<size_t>(o.decode), "decode");
  return kinds;
}

}  // namespace keel::control
