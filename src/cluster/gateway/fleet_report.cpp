// Fleet status document and metrics lines (see fleet_report.h).
#include "cluster/gateway/fleet_report.h"

#include <utility>

#include <fmt/format.h>

namespace keel::cluster {
namespace {

double ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

Json fleet_status_json(const FleetStatus& s) {
  Json tes = Json::array();
  for (size_t i = 0; i < s.fleet.tes.size(); ++i) {
    const TeInfo& te = s.fleet.tes[i];
    const engine::EngineStats stats = i < s.stats.size() ? s.stats[i] : engine::EngineStats{};
    Json entry =
        Json{{"id", te.id},
             {"address", te.address},
             {"role", std::string(te_role_name(te.role))},
             {"engine", te.semi_pd ? "semi-pd" : "colocated"},
             {"pipeline_stages", te.pp_stages},
             {"model", te.model},
             {"pid", te.pid},
             {"healthy", te.healthy},
             {"state", std::string(health::te_state_name(te.state))},
             {"waiting", te.load.num_waiting},
             {"running", te.load.num_running},
             {"pending_tokens", te.load.pending_tokens},
             {"kv_blocks_used", te.load.kv_blocks_used},
             {"kv_blocks_total", te.load.kv_blocks_total},
             {"kv_usage", ratio(te.load.kv_blocks_used, te.load.kv_blocks_total)},
             {"prefix_hit_rate", ratio(stats.prefix_hits_tokens, stats.prefix_queries_tokens)},
             {"prompt_tokens_total", stats.prompt_tokens_total},
             {"generation_tokens_total", stats.generation_tokens_total},
             {"peer_tier", Json{{"fetch", stats.peer_decisions_fetch},
                                {"recompute", stats.peer_decisions_recompute},
                                {"blocks_fetched", stats.peer_blocks_fetched},
                                {"hit_tokens", stats.peer_hit_tokens}}},
             // Bytes filed in its host tier (a decode TE: the KV handoffs it received) and the
             // tier-held blocks admission fetched instead of recomputing.
             {"host_tier", Json{{"bytes_in", stats.host_tier.bytes_in},
                                {"blocks_fetched", stats.tier_blocks_fetched}}}};
    if (i < s.metrics.size() && s.metrics[i].semi_pd) {  // a semi-PD TE's split, as it reports it
      const engine::SemiPdMetrics& p = *s.metrics[i].semi_pd;
      entry["semi_pd"] = Json{{"split", Json::array({p.split_prefill, p.split_decode})},
                              {"switches", p.num_switches},
                              {"decisions", p.decisions}};
    }
    tes.push_back(std::move(entry));
  }
  Json jes = Json::array();
  for (const JeSummary& je : s.job_executors) {
    Json entry{{"id", je.id}, {"address", je.address}, {"state", je.up ? "up" : "down"}};
    if (je.up) {
      entry["jobs"] = Json{{"active", je.jobs_active},
                           {"total", je.jobs_total},
                           {"redriven", je.jobs_redriven},
                           {"failed", je.jobs_failed},
                           {"resubmitted", je.jobs_resubmitted}};
      entry["router"] = je.router.is_object() ? je.router : Json::object();
    } else {
      entry["error"] = je.error;
    }
    jes.push_back(std::move(entry));
  }
  // "je", "jobs" and "router" are over every JE that answered (job_executors lists each).
  return Json{{"je", s.je_id},
              {"jobs", Json{{"active", s.jobs_active},
                            {"total", s.jobs_total},
                            {"redriven", s.jobs_redriven},
                            {"failed", s.jobs_failed},
                            {"resubmitted", s.jobs_resubmitted}}},
              {"router", s.router.is_object() ? s.router : Json::object()},
              {"predictor", s.predictor.is_object() ? s.predictor : Json::object()},
              {"job_executors", std::move(jes)},
              {"task_executors", std::move(tes)}};
}

std::string fleet_metrics_text(const FleetStatus& s, std::string_view model) {
  std::string out;
  out += "# HELP keel:cluster_router_decisions_total Routing decisions by branch (all JEs).\n";
  out += "# TYPE keel:cluster_router_decisions_total counter\n";
  if (s.router.is_object()) {
    for (const char* branch : {"sticky", "locality", "least_load", "round_robin", "no_capacity"}) {
      const auto it = s.router.find(branch);
      const int64_t n = it != s.router.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
      out +=
          fmt::format("keel:cluster_router_decisions_total{{model_name=\"{}\",branch=\"{}\"}} {}\n",
                      model, branch, n);
    }
  }
  out += "# HELP keel:cluster_jobs_redriven_total Jobs moved to another TE after theirs died.\n";
  out += "# TYPE keel:cluster_jobs_redriven_total counter\n";
  out += fmt::format("keel:cluster_jobs_redriven_total{{model_name=\"{}\"}} {}\n", model,
                     s.jobs_redriven);
  out += "# HELP keel:cluster_jobs_resubmitted_total Jobs submitted again after their JE died.\n";
  out += "# TYPE keel:cluster_jobs_resubmitted_total counter\n";
  out += fmt::format("keel:cluster_jobs_resubmitted_total{{model_name=\"{}\"}} {}\n", model,
                     s.jobs_resubmitted);
  out += "# HELP keel:cluster_job_executors Job executors by whether they answer the gateway.\n";
  out += "# TYPE keel:cluster_job_executors gauge\n";
  int64_t jes_up = 0;
  for (const JeSummary& je : s.job_executors) jes_up += je.up ? 1 : 0;
  for (const auto& [state, n] : {std::pair<const char*, int64_t>{"up", jes_up},
                                 {"down", static_cast<int64_t>(s.job_executors.size()) - jes_up}}) {
    out += fmt::format("keel:cluster_job_executors{{model_name=\"{}\",state=\"{}\"}} {}\n", model,
                       state, n);
  }
  out += "# HELP keel:cluster_jobs_failed_total Jobs no TE could finish.\n";
  out += "# TYPE keel:cluster_jobs_failed_total counter\n";
  out +=
      fmt::format("keel:cluster_jobs_failed_total{{model_name=\"{}\"}} {}\n", model, s.jobs_failed);
  if (s.predictor.is_object() && s.predictor.value("requests", 0) > 0) {
    out += "# HELP keel:cluster_predictor_requests_total Decode-length predictions (all JEs).\n";
    out += "# TYPE keel:cluster_predictor_requests_total counter\n";
    out += fmt::format("keel:cluster_predictor_requests_total{{model_name=\"{}\"}} {}\n", model,
                       s.predictor.value("requests", 0));
    out += "# HELP keel:cluster_predictor_seconds_total Time spent predicting (all JEs).\n";
    out += "# TYPE keel:cluster_predictor_seconds_total counter\n";
    out += fmt::format("keel:cluster_predictor_seconds_total{{model_name=\"{}\"}} {:.6f}\n", model,
                       s.predictor.value("seconds", 0.0));
    out +=
        "# HELP keel:cluster_predictor_buckets_total Finished requests by predicted and actual "
        "length bucket.\n";
    out += "# TYPE keel:cluster_predictor_buckets_total counter\n";
    for (const Json& b : s.predictor.value("buckets", Json::array())) {
      if (!b.is_array() || b.size() != 3) continue;
      out += fmt::format(
          "keel:cluster_predictor_buckets_total{{model_name=\"{}\",predicted=\"{}\",actual=\"{}\"}}"
          " "
          "{}\n",
          model, b[0].dump(), b[1].dump(), b[2].dump());
    }
  }
  out += "# HELP keel:cluster_task_executors Task executors by health.\n";
  out += "# TYPE keel:cluster_task_executors gauge\n";
  int64_t healthy = 0;
  for (const TeInfo& te : s.fleet.tes) healthy += te.healthy ? 1 : 0;
  out += fmt::format("keel:cluster_task_executors{{model_name=\"{}\",state=\"healthy\"}} {}\n",
                     model, healthy);
  out += fmt::format("keel:cluster_task_executors{{model_name=\"{}\",state=\"dead\"}} {}\n", model,
                     static_cast<int64_t>(s.fleet.tes.size()) - healthy);
  out += "# HELP keel:cluster_te_state Task executors by state from progress (te_health.h).\n";
  out += "# TYPE keel:cluster_te_state gauge\n";
  for (health::TeState st : {health::TeState::kHealthy, health::TeState::kBusy,
                             health::TeState::kHung, health::TeState::kDead}) {
    int64_t n = 0;
    for (const TeInfo& te : s.fleet.tes) n += te.state == st ? 1 : 0;
    out += fmt::format("keel:cluster_te_state{{model_name=\"{}\",state=\"{}\"}} {}\n", model,
                       health::te_state_name(st), n);
  }
  return out;
}

}  // namespace keel::cluster
