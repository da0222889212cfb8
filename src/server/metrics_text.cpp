// render_metrics (see metrics_text.h). Numbers are written with fmt's shortest round-trip form;
// label values are escaped as the exposition format requires (\\, \", \n).
#include "server/metrics_text.h"

#include <fmt/format.h>

#include <cmath>

namespace keel::server {
namespace {

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

class Writer {
 public:
  explicit Writer(std::string_view model)
      : label_(fmt::format("model_name=\"{}\"", escape_label(model))) {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP keel:{} {}\n# TYPE keel:{} {}\n", name, help,
                   name, type);
  }
  void sample(std::string_view name, double value, std::string_view extra_labels = {}) {
    fmt::format_to(std::back_inserter(out_), "keel:{}{{{}{}{}}} {}\n", name, label_,
                   extra_labels.empty() ? "" : ",", extra_labels, number(value));
  }
  void gauge(std::string_view name, std::string_view help, double value) {
    header(name, "gauge", help);
    sample(name, value);
  }
  void counter(std::string_view name, std::string_view help, double value) {
    header(name, "counter", help);
    sample(name, value);
  }
  void histogram(std::string_view name, std::string_view help, const engine::HistogramSnapshot& s) {
    header(name, "histogram", help);
    const std::string bucket = fmt::format("{}_bucket", name);
    for (size_t i = 0; i < s.bounds.size(); ++i) {
      sample(bucket, static_cast<double>(s.cumulative[i]),
             fmt::format("le=\"{}\"", number(s.bounds[i])));
    }
    sample(bucket, static_cast<double>(s.count), "le=\"+Inf\"");
    sample(fmt::format("{}_sum", name), s.sum);
    sample(fmt::format("{}_count", name), static_cast<double>(s.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string label_;
  std::string out_;
};

// A Prometheus series read from an int64_t field of a stats struct.
template <typename Stats>
struct Series {
  const char* name;
  const char* type;  // "gauge" or "counter"
  const char* help;
  int64_t Stats::*field;
};

// Per-tier series of the KV tiers below the cache (label tier="host" | "disk"), and tier T3's
// counters (a TE fetching from peers always has a host tier).
void render_tier_metrics(Writer& w, const engine::EngineStats& stats) {
  std::vector<std::pair<std::string_view, const kv::TierStats*>> tiers;
  if (stats.host_tier_enabled) tiers.emplace_back("host", &stats.host_tier);
  if (stats.disk_tier_enabled) tiers.emplace_back("disk", &stats.disk_tier);
  if (tiers.empty()) return;
  static constexpr Series<kv::TierStats> kSeries[] = {
      {"kv_tier_blocks", "gauge", "KV blocks held by a tier below the cache.",
       &kv::TierStats::blocks},
      {"kv_tier_used_bytes", "gauge", "Bytes held by a KV tier.", &kv::TierStats::used_bytes},
      {"kv_tier_capacity_bytes", "gauge", "Capacity of a KV tier.", &kv::TierStats::capacity_bytes},
      {"kv_tier_hits_total", "counter", "Blocks read from a KV tier.", &kv::TierStats::hits},
      {"kv_tier_misses_total", "counter", "Reads of blocks a KV tier did not hold.",
       &kv::TierStats::misses},
      {"kv_tier_bytes_in_total", "counter", "Payload bytes stored into a KV tier.",
       &kv::TierStats::bytes_in},
      {"kv_tier_bytes_out_total", "counter", "Payload bytes read from a KV tier.",
       &kv::TierStats::bytes_out},
      {"kv_tier_evictions_total", "counter", "Blocks a KV tier dropped to make room.",
       &kv::TierStats::evictions},
      {"kv_tier_corrupt_total", "counter", "Damaged KV tier entries found and dropped.",
       &kv::TierStats::corrupt},
      {"kv_tier_write_errors_total", "counter",
       "Blocks a KV tier failed to store (e.g. an unwritable disk-tier directory).",
       &kv::TierStats::write_errors},
  };
  w.gauge("kv_tier_transfers_pending", "Tier reads and demotions queued or running.",
          static_cast<double>(stats.tier_transfers_pending));
  w.counter("kv_tier_demotions_dropped_total",
            "Evicted KV blocks not cached because the demotion queue was full.",
            static_cast<double>(stats.tier_demotions_dropped));
  w.header("kv_tier_decisions_total", "counter",
           "Tier-held KV blocks by the fetch-vs-recompute decision at admission.");
  w.sample("kv_tier_decisions_total", static_cast<double>(stats.tier_blocks_fetched),
           "decision=\"fetch\"");
  w.sample("kv_tier_decisions_total", static_cast<double>(stats.tier_blocks_recomputed),
           "decision=\"recompute\"");
  w.header("kv_peer_decisions_total", "counter",
           "Requests hinted at a peer TE's cache (tier T3) by the fetch-vs-recompute decision.");
  w.sample("kv_peer_decisions_total", static_cast<double>(stats.peer_decisions_fetch),
           "decision=\"fetch\"");
  w.sample("kv_peer_decisions_total", static_cast<double>(stats.peer_decisions_recompute),
           "decision=\"recompute\"");
  w.counter("kv_peer_blocks_fetched_total", "KV blocks fetched from peer TEs into the host tier.",
            static_cast<double>(stats.peer_blocks_fetched));
  w.counter("kv_peer_hit_tokens_total", "Prompt tokens of the KV blocks fetched from peer TEs.",
            static_cast<double>(stats.peer_hit_tokens));
  for (const Series<kv::TierStats>& s : kSeries) {
    w.header(s.name, s.type, s.help);
    for (const auto& [tier, st] : tiers) {
      w.sample(s.name, static_cast<double>(st->*s.field), fmt::format("tier=\"{}\"", tier));
    }
  }
}

// KV kept across tool calls (kv/kv_pins.h): pins held, the blocks they pin (per named tenant too),
// pins made and released by why.
void render_kv_pin_metrics(Writer& w, const engine::EngineStats& stats) {
  w.gauge("kv_pins", "Session pins held (KV kept across tool calls).", stats.num_kv_pins);
  w.gauge("kv_pinned_blocks", "Distinct KV blocks held by session pins.",
          static_cast<double>(stats.kv_pinned_blocks));
  w.header("kv_tenant_pinned_blocks", "gauge", "Distinct KV blocks pinned for each named tenant.");
  for (const auto& [tenant, blocks] : stats.tenant_kv_pinned_blocks) {
    w.sample("kv_tenant_pinned_blocks", static_cast<double>(blocks),
             fmt::format("tenant=\"{}\"", escape_label(tenant)));
  }
  w.counter("kv_pins_total", "Session pins made (calls that ended in a tool call).",
            static_cast<double>(stats.kv_pins_total));
  w.header(
      "kv_pins_released_total", "counter",
      "Session pins released: ttl (expired), cap (oldest over a cap), subsumed (a newer pin "
      "held all its blocks), unused (the call did not end in a tool call), pressure (a request "
      "could not be admitted while nothing ran).");
  const std::pair<std::string_view, int64_t> reasons[] = {
      {"ttl", stats.kv_pins_released_ttl},
      {"cap", stats.kv_pins_released_cap},
      {"subsumed", stats.kv_pins_released_subsumed},
      {"unused", stats.kv_pins_released_unused},
      {"pressure", stats.kv_pins_released_pressure}};
  for (const auto& [reason, n] : reasons) {
    w.sample("kv_pins_released_total", static_cast<double>(n),
             fmt::format("reason=\"{}\"", reason));
  }
}

// An MoE model's routing: one series per (layer, expert), zeros included (a rate over an expert
// that got no tokens is 0, not absent).
void render_expert_tokens(Writer& w, const engine::ExpertTokens& e) {
  w.header("moe_expert_tokens_total", "counter",
           "Tokens the router sent to each expert of each MoE layer (top-k: k per token).");
  for (int32_t layer = 0; layer < e.n_layer; ++layer) {
    for (int32_t expert = 0; expert < e.n_expert; ++expert) {
      const size_t i = static_cast<size_t>(layer) * static_cast<size_t>(e.n_expert) +
                       static_cast<size_t>(expert);
      if (i >= e.tokens.size()) return;  // a grid shorter than its shape (the codec refuses one)
      w.sample("moe_expert_tokens_total", static_cast<double>(e.tokens[i]),
               fmt::format("layer=\"{}\",expert=\"{}\"", layer, expert));
    }
  }
}

// A semi-PD engine's split (engine/semi_pd_engine.h): gauges and the re-split downtime.
void render_semi_pd_metrics(Writer& w, const engine::SemiPdMetrics& p) {
  w.gauge("semi_pd_split_prefill_cores", "Cores the semi-PD prefill worker is set to.",
          p.split_prefill);
  w.gauge("semi_pd_split_decode_cores", "Cores the semi-PD decode worker is set to.",
          p.split_decode);
  w.gauge("semi_pd_prefill_threads", "Compute threads the prefill worker runs with now.",
          p.prefill_threads);
  w.gauge("semi_pd_decode_threads", "Compute threads the decode worker runs with now.",
          p.decode_threads);
  w.counter("semi_pd_switches_total", "Re-splits asked.", static_cast<double>(p.num_switches));
  w.histogram("semi_pd_switch_seconds",
              "Per worker and re-split: seconds it did not compute because of the switch.",
              p.switch_seconds);
  if (!p.decisions.empty()) {  // --semi-pd-dynamic: the split controller's windows
    w.header("semi_pd_decisions_total", "counter",
             "Split controller decisions (one per window), by reason.");
    for (const auto& [reason, n] : p.decisions) {
      w.sample("semi_pd_decisions_total", static_cast<double>(n),
               fmt::format("reason=\"{}\"", reason));
    }
  }
  if (p.predicted_ttft_s.has_value()) {
    w.gauge("semi_pd_predicted_ttft_seconds",
            "The controller's TTFT model at the split it chose last (percentile p).",
            *p.predicted_ttft_s);
  }
  if (p.predicted_tpot_s.has_value()) {
    w.gauge("semi_pd_predicted_tpot_seconds",
            "The controller's TPOT model at the split it chose last (percentile p).",
            *p.predicted_tpot_s);
  }
}

}  // namespace

std::string render_metrics(const engine::EngineStats& stats, const engine::MetricsSnapshot& m,
                           std::string_view model_name) {
  Writer w(model_name);
  w.gauge("num_requests_running", "Requests currently scheduled (prefilling or decoding).",
          stats.num_running);
  w.gauge("num_requests_waiting", "Requests admitted but not yet scheduled.", stats.num_waiting);
  w.gauge("kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0..1).", stats.kv_usage);
  w.gauge("context_caches", "Context caches pinned (POST /v1/caches).", stats.num_context_caches);
  // The PIC, sparse-decode and context-cache series: one sample each.
  static constexpr Series<engine::EngineStats> kEngineSeries[] = {
      {"kv_blocks_used", "gauge",
       "KV-cache blocks referenced (requests, context caches, PIC chunk index).",
       &engine::EngineStats::kv_blocks_used},
      {"kv_blocks_total", "gauge", "KV-cache blocks in the pool.",
       &engine::EngineStats::kv_blocks_total},
      {"pic_index_blocks", "gauge", "KV blocks held by the PIC chunk index.",
       &engine::EngineStats::pic_index_blocks},
      {"pic_requests_total", "counter", "Requests linked from position-independent chunk caches.",
       &engine::EngineStats::pic_requests},
      {"pic_tokens_linked_total", "counter", "Prompt tokens copied from PIC chunk caches.",
       &engine::EngineStats::pic_tokens_linked},
      {"pic_tokens_recomputed_total", "counter", "Prompt tokens PIC-linked requests computed.",
       &engine::EngineStats::pic_tokens_recomputed},
      {"pic_chunks_compiled_total", "counter", "PIC chunks computed alone.",
       &engine::EngineStats::pic_chunks_compiled},
      {"pic_chunks_reused_total", "counter", "PIC chunks taken from the chunk index.",
       &engine::EngineStats::pic_chunks_reused},
      {"sparse_requests_total", "counter", "Requests decoded with a sparse attention policy.",
       &engine::EngineStats::sparse_requests},
      {"sparse_pages_released_total", "counter",
       "KV pages sparse-decode requests gave back to the pool while decoding.",
       &engine::EngineStats::sparse_pages_released},
      {"sparse_max_pages_held", "gauge",
       "The most KV pages one sparse-decode request held at once.",
       &engine::EngineStats::sparse_max_pages_held},
      {"context_cache_blocks", "gauge", "KV blocks pinned by context caches.",
       &engine::EngineStats::context_cache_blocks},
      {"spec_verify_steps_total", "counter",
       "Speculative decoding: decode steps of a sequence that verified drafted tokens.",
       &engine::EngineStats::spec_verify_steps},
      {"spec_draft_tokens_total", "counter", "Speculative decoding: tokens drafted.",
       &engine::EngineStats::spec_drafted_tokens},
      {"spec_accepted_tokens_total", "counter", "Speculative decoding: drafted tokens accepted.",
       &engine::EngineStats::spec_accepted_tokens},
      {"spec_emitted_tokens_total", "counter",
       "Speculative decoding: tokens emitted by verification steps (accepted + 1 each).",
       &engine::EngineStats::spec_emitted_tokens},
  };
  for (const Series<engine::EngineStats>& e : kEngineSeries) {
    w.header(e.name, e.type, e.help);
    w.sample(e.name, static_cast<double>(stats.*e.field));
  }
  w.gauge("spec_acceptance_rate", "Speculative decoding: accepted / drafted tokens (0 if none).",
          stats.spec_drafted_tokens > 0 ? static_cast<double>(stats.spec_accepted_tokens) /
                                              static_cast<double>(stats.spec_drafted_tokens)
                                        : 0.0);
  w.gauge("spec_tokens_per_step",
          "Speculative decoding: tokens emitted per verification step (0 if none).",
          stats.spec_verify_steps > 0 ? static_cast<double>(stats.spec_emitted_tokens) /
                                            static_cast<double>(stats.spec_verify_steps)
                                      : 0.0);
  w.counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            static_cast<double>(stats.prefix_queries_tokens));
  w.counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
            static_cast<double>(stats.prefix_hits_tokens));
  render_tier_metrics(w, stats);
  render_kv_pin_metrics(w, stats);
  w.counter("prompt_tokens_total", "Prompt tokens computed by the engine.",
            static_cast<double>(stats.prompt_tokens_total));
  w.counter("generation_tokens_total", "Tokens generated by the engine.",
            static_cast<double>(stats.generation_tokens_total));
  w.counter("num_preemptions_total", "Requests preempted (recomputed later) by the scheduler.",
            static_cast<double>(stats.num_preemptions_total));
  w.header("request_success_total", "counter", "Finished requests, by why they finished.");
  for (engine::FinishReason r : {engine::FinishReason::kStop, engine::FinishReason::kLength,
                                 engine::FinishReason::kAbort, engine::FinishReason::kError}) {
    const int64_t v = m.request_finished_total[static_cast<size_t>(r)];
    w.sample("request_success_total", static_cast<double>(v),
             fmt::format("finished_reason=\"{}\"", engine::finish_reason_name(r)));
  }
  w.histogram("time_to_first_token_seconds", "Seconds from arrival to the first generated token.",
              m.time_to_first_token_seconds);
  w.histogram("inter_token_latency_seconds", "Seconds between consecutive generated tokens.",
              m.inter_token_latency_seconds);
  w.histogram("e2e_request_latency_seconds", "Seconds from arrival to the last token.",
              m.e2e_request_latency_seconds);
  w.histogram("request_queue_time_seconds", "Seconds spent waiting before the first schedule.",
              m.request_queue_time_seconds);
  w.histogram("request_prompt_tokens", "Prompt length of finished requests, in tokens.",
              m.request_prompt_tokens);
  w.histogram("request_generation_tokens", "Generated tokens of finished requests.",
              m.request_generation_tokens);
  w.histogram("early_exit_layers",
              "Layers executed per decode token that could exit early (SpecEE early exit).",
              m.early_exit_layers);
  if (m.semi_pd.has_value()) render_semi_pd_metrics(w, *m.semi_pd);
  if (m.moe_expert_tokens.has_value()) render_expert_tokens(w, *m.moe_expert_tokens);
  return w.take();
}

}  // namespace keel::server
