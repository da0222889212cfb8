// The wire codec's stats and metrics bodies (see wire.h): EngineStats, its TierStats and the
// MetricsSnapshot ⇄ named-field maps. The EngineStats and TierStats fields go through tables, so a
// counter is named once for both directions.
#include <string>
#include <utility>

#include "engine/wire_json.h"

namespace keel::engine::wire::detail {
namespace {

// --- engine stats ---

template <typename Stats, typename T>
struct Field {
  const char* name;
  T Stats::*member;
};

constexpr Field<EngineStats, int32_t> kStatsI32[] = {
    {"num_running", &EngineStats::num_running},
    {"num_waiting", &EngineStats::num_waiting},
    {"num_tracked", &EngineStats::num_tracked},
    {"num_context_caches", &EngineStats::num_context_caches},
    {"num_kv_pins", &EngineStats::num_kv_pins},
};
constexpr Field<EngineStats, int64_t> kStatsI64[] = {
    {"kv_capacity_tokens", &EngineStats::kv_capacity_tokens},
    {"prefix_queries_tokens", &EngineStats::prefix_queries_tokens},
    {"prefix_hits_tokens", &EngineStats::prefix_hits_tokens},
    {"prompt_tokens_total", &EngineStats::prompt_tokens_total},
    {"generation_tokens_total", &EngineStats::generation_tokens_total},
    {"num_preemptions_total", &EngineStats::num_preemptions_total},
    {"steps_total", &EngineStats::steps_total},
    {"tier_blocks_fetched", &EngineStats::tier_blocks_fetched},
    {"tier_blocks_recomputed", &EngineStats::tier_blocks_recomputed},
    {"tier_transfers_pending", &EngineStats::tier_transfers_pending},
    {"tier_demotions_dropped", &EngineStats::tier_demotions_dropped},
    {"peer_decisions_fetch", &EngineStats::peer_decisions_fetch},
    {"peer_decisions_recompute", &EngineStats::peer_decisions_recompute},
    {"peer_blocks_fetched", &EngineStats::peer_blocks_fetched},
    {"peer_hit_tokens", &EngineStats::peer_hit_tokens},
    {"context_cache_blocks", &EngineStats::context_cache_blocks},
    {"pic_requests", &EngineStats::pic_requests},
    {"pic_tokens_linked", &EngineStats::pic_tokens_linked},
    {"pic_tokens_recomputed", &EngineStats::pic_tokens_recomputed},
    {"pic_chunks_compiled", &EngineStats::pic_chunks_compiled},
    {"pic_chunks_reused", &EngineStats::pic_chunks_reused},
    {"pic_index_blocks", &EngineStats::pic_index_blocks},
    {"sparse_requests", &EngineStats::sparse_requests},
    {"sparse_pages_released", &EngineStats::sparse_pages_released},
    {"sparse_max_pages_held", &EngineStats::sparse_max_pages_held},
    {"spec_verify_steps", &EngineStats::spec_verify_steps},
    {"spec_drafted_tokens", &EngineStats::spec_drafted_tokens},
    {"spec_accepted_tokens", &EngineStats::spec_accepted_tokens},
    {"spec_emitted_tokens", &EngineStats::spec_emitted_tokens},
    {"kv_pinned_blocks", &EngineStats::kv_pinned_blocks},
    {"kv_pins_total", &EngineStats::kv_pins_total},
    {"kv_pins_released_ttl", &EngineStats::kv_pins_released_ttl},
    {"kv_pins_released_cap", &EngineStats::kv_pins_released_cap},
    {"kv_pins_released_subsumed", &EngineStats::kv_pins_released_subsumed},
    {"kv_pins_released_unused", &EngineStats::kv_pins_released_unused},
    {"kv_pins_released_pressure", &EngineStats::kv_pins_released_pressure},
};
constexpr Field<kv::TierStats, int64_t> kTierFields[] = {
    {"blocks", &kv::TierStats::blocks},
    {"used_bytes", &kv::TierStats::used_bytes},
    {"capacity_bytes", &kv::TierStats::capacity_bytes},
    {"hits", &kv::TierStats::hits},
    {"misses", &kv::TierStats::misses},
    {"bytes_in", &kv::TierStats::bytes_in},
    {"bytes_out", &kv::TierStats::bytes_out},
    {"evictions", &kv::TierStats::evictions},
    {"corrupt", &kv::TierStats::corrupt},
    {"write_errors", &kv::TierStats::write_errors},
};

Json encode_tier(const kv::TierStats& t) {
  Json j = Json::object();
  for (const auto& f : kTierFields) j[f.name] = t.*f.member;
  return j;
}

}  // namespace

Json encode_stats_body(const EngineStats& s) {
  Json j = Json::object();
  for (const auto& f : kStatsI32) j[f.name] = s.*f.member;
  for (const auto& f : kStatsI64) j[f.name] = s.*f.member;
  j["kv_usage"] = s.kv_usage;
  if (s.host_tier_enabled) j["host_tier"] = encode_tier(s.host_tier);
  if (s.disk_tier_enabled) j["disk_tier"] = encode_tier(s.disk_tier);
  if (!s.tenant_vtc.empty()) j["tenant_vtc"] = s.tenant_vtc;
  if (!s.tenant_kv_pinned_blocks.empty()) j["tenant_kv_pinned_blocks"] = s.tenant_kv_pinned_blocks;
  return j;
}

namespace {

Status decode_tier(const Json& j, const char* name, kv::TierStats* t) {
  FieldReader r(j, std::string("engine_stats.") + name);
  for (const auto& f : kTierFields) r.i64(f.name, &(t->*f.member));
  return r.status();
}

}  // namespace

Status decode_stats_body(const Json& j, EngineStats* s) {
  FieldReader r(j, "engine_stats");
  for (const auto& f : kStatsI32) r.i32(f.name, &(s->*f.member));
  for (const auto& f : kStatsI64) r.i64(f.name, &(s->*f.member));
  r.f32("kv_usage", &s->kv_usage);
  if (const Json* t = r.object("host_tier")) {
    s->host_tier_enabled = true;
    KEEL_TRY(decode_tier(*t, "host_tier", &s->host_tier));
  }
  if (const Json* t = r.object("disk_tier")) {
    s->disk_tier_enabled = true;
    KEEL_TRY(decode_tier(*t, "disk_tier", &s->disk_tier));
  }
  if (const Json* t = r.object("tenant_vtc")) {
    for (const auto& [tenant, counter] : t->items()) {
      if (!counter.is_number())
        return Status::invalid_argument("engine_stats.tenant_vtc: not a number");
      s->tenant_vtc.emplace(tenant, counter.get<double>());
    }
  }
  if (const Json* t = r.object("tenant_kv_pinned_blocks")) {
    for (const auto& [tenant, blocks] : t->items()) {
      if (!blocks.is_number_integer() || blocks.get<int64_t>() < 0) {
        return Status::invalid_argument(
            "engine_stats.tenant_kv_pinned_blocks: not a non-negative integer");
      }
      s->tenant_kv_pinned_blocks.emplace(tenant, blocks.get<int64_t>());
    }
  }
  return r.status();
}

namespace {

// --- metrics ---

constexpr Field<MetricsSnapshot, HistogramSnapshot> kHistograms[] = {
    {"time_to_first_token_seconds", &MetricsSnapshot::time_to_first_token_seconds},
    {"inter_token_latency_seconds", &MetricsSnapshot::inter_token_latency_seconds},
    {"e2e_request_latency_seconds", &MetricsSnapshot::e2e_request_latency_seconds},
    {"request_queue_time_seconds", &MetricsSnapshot::request_queue_time_seconds},
    {"request_prompt_tokens", &MetricsSnapshot::request_prompt_tokens},
    {"request_generation_tokens", &MetricsSnapshot::request_generation_tokens},
    {"early_exit_layers", &MetricsSnapshot::early_exit_layers},
};

}  // namespace

Json encode_metrics_body(const MetricsSnapshot& m) {
  Json j = Json::object();
  for (const auto& f : kHistograms) {
    const HistogramSnapshot& h = m.*f.member;
    j[f.name] = Json{
        {"bounds", h.bounds}, {"cumulative", h.cumulative}, {"sum", h.sum}, {"count", h.count}};
  }
  Json finished = Json::object();
  for (FinishReason r : kFinishReasons) {
    finished[std::string(finish_reason_name(r))] = m.request_finished_total[static_cast<size_t>(r)];
  }
  j["request_finished_total"] = std::move(finished);
  if (m.semi_pd) {  // the split and the decisions; the switch histogram stays in the process
    const SemiPdMetrics& p = *m.semi_pd;
    j["semi_pd"] =
        Json{{"split_prefill", p.split_prefill},     {"split_decode", p.split_decode},
             {"prefill_threads", p.prefill_threads}, {"decode_threads", p.decode_threads},
             {"num_switches", p.num_switches},       {"decisions", p.decisions}};
  }
  if (m.moe_expert_tokens) {
    const ExpertTokens& e = *m.moe_expert_tokens;
    j["moe_expert_tokens"] =
        Json{{"n_layer", e.n_layer}, {"n_expert", e.n_expert}, {"tokens", e.tokens}};
  }
  return j;
}

namespace {

// An MoE model's counts: n_layer and n_expert in [1, 65536], n_layer · n_expert counts, none
// negative.
Status decode_expert_tokens(const Json& j, ExpertTokens* e) {
  FieldReader r(j, "metrics.moe_expert_tokens");
  r.i32("n_layer", &e->n_layer, 1, 65536);
  r.i32("n_expert", &e->n_expert, 1, 65536);
  std::vector<uint64_t> tokens;
  r.u64_list("tokens", &tokens);
  KEEL_TRY(r.status());
  if (tokens.size() != static_cast<size_t>(e->n_layer) * static_cast<size_t>(e->n_expert)) {
    return Status::invalid_argument("metrics.moe_expert_tokens.tokens: needs n_layer x n_expert");
  }
  e->tokens.reserve(tokens.size());
  for (const uint64_t t : tokens) {
    if (t > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::invalid_argument("metrics.moe_expert_tokens.tokens: out of range");
    }
    e->tokens.push_back(static_cast<int64_t>(t));
  }
  return {};
}

Status decode_semi_pd_metrics(const Json& j, SemiPdMetrics* p) {
  FieldReader r(j, "metrics.semi_pd");
  r.i32("split_prefill", &p->split_prefill, 0);
  r.i32("split_decode", &p->split_decode, 0);
  r.i32("prefill_threads", &p->prefill_threads, 0);
  r.i32("decode_threads", &p->decode_threads, 0);
  r.i64("num_switches", &p->num_switches, 0);
  if (const Json* d = r.object("decisions")) {
    for (const auto& [reason, n] : d->items()) {
      if (!n.is_number_integer()) return Status::invalid_argument("metrics.semi_pd.decisions");
      p->decisions[reason] = n.get<int64_t>();
    }
  }
  return r.status();
}

}  // namespace

Status decode_metrics_body(const Json& j, MetricsSnapshot* m) {
  FieldReader r(j, "metrics");
  for (const auto& f : kHistograms) {
    const Json* h = r.object(f.name);
    if (h == nullptr) continue;
    HistogramSnapshot& out = m->*f.member;
    FieldReader hr(*h, std::string("metrics.") + f.name);
    hr.f64_list("bounds", &out.bounds);
    hr.u64_list("cumulative", &out.cumulative);
    hr.f64("sum", &out.sum);
    hr.u64("count", &out.count);
    // Consumers index cumulative by bound; an empty histogram (no bounds, no counts) is allowed.
    const bool empty = out.bounds.empty() && out.cumulative.empty();
    if (hr.ok() && !empty && out.cumulative.size() != out.bounds.size() + 1) {
      hr.fail("cumulative", "needs one count per bound and one for +Inf");
    }
    KEEL_TRY(hr.status());
  }
  if (const Json* finished = r.object("request_finished_total")) {
    FieldReader fr(*finished, "metrics.request_finished_total");
    for (FinishReason reason : kFinishReasons) {
      fr.i64(std::string(finish_reason_name(reason)).c_str(),
             &m->request_finished_total[static_cast<size_t>(reason)], 0);
    }
    KEEL_TRY(fr.status());
  }
  if (const Json* p = r.object("semi_pd"))
    KEEL_TRY(decode_semi_pd_metrics(*p, &m->semi_pd.emplace()));
  if (const Json* e = r.object("moe_expert_tokens")) {
    KEEL_TRY(decode_expert_tokens(*e, &m->moe_expert_tokens.emplace()));
  }
  return r.status();
}

}  // namespace keel::engine::wire::detail
