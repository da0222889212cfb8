// Sums of engine stats and metrics over a fleet (see fleet_metrics.h).
#include "cluster/gateway/fleet_metrics.h"

#include <algorithm>

namespace keel::cluster {
namespace {

void add_tier(const kv::TierStats& from, kv::TierStats* to) {
  to->blocks += from.blocks;
  to->used_bytes += from.used_bytes;
  to->capacity_bytes += from.capacity_bytes;
  to->hits += from.hits;
  to->misses += from.misses;
  to->bytes_in += from.bytes_in;
  to->bytes_out += from.bytes_out;
  to->evictions += from.evictions;
  to->corrupt += from.corrupt;
  to->write_errors += from.write_errors;
}

// Adds `from` into `to` when their buckets agree (or `to` is still empty).
void add_histogram(const engine::HistogramSnapshot& from, engine::HistogramSnapshot* to) {
  if (from.cumulative.empty()) return;
  if (to->cumulative.empty()) {
    *to = from;
    return;
  }
  if (to->bounds != from.bounds || to->cumulative.size() != from.cumulative.size()) return;
  for (size_t i = 0; i < to->cumulative.size(); ++i) to->cumulative[i] += from.cumulative[i];
  to->sum += from.sum;
  to->count += from.count;
}

// The TEs of one model share its shape: counts of another shape (another model) are left out.
void add_expert_tokens(const std::optional<engine::ExpertTokens>& from,
                       std::optional<engine::ExpertTokens>* to) {
  if (!from) return;
  if (!*to) {
    *to = *from;
    return;
  }
  if ((*to)->n_layer != from->n_layer || (*to)->n_expert != from->n_expert) return;
  const size_t n = std::min(from->tokens.size(), (*to)->tokens.size());
  for (size_t i = 0; i < n; ++i) (*to)->tokens[i] += from->tokens[i];
}

}  // namespace

engine::EngineStats merge_stats(const std::vector<engine::EngineStats>& all) {
  engine::EngineStats t;
  for (const engine::EngineStats& s : all) {
    t.num_running += s.num_running;
    t.num_waiting += s.num_waiting;
    t.num_tracked += s.num_tracked;
    t.kv_blocks_used += s.kv_blocks_used;
    t.kv_blocks_total += s.kv_blocks_total;
    t.kv_capacity_tokens += s.kv_capacity_tokens;
    t.prefix_queries_tokens += s.prefix_queries_tokens;
    t.prefix_hits_tokens += s.prefix_hits_tokens;
    t.prompt_tokens_total += s.prompt_tokens_total;
    t.generation_tokens_total += s.generation_tokens_total;
    t.num_preemptions_total += s.num_preemptions_total;
    t.steps_total += s.steps_total;
    t.host_tier_enabled = t.host_tier_enabled || s.host_tier_enabled;
    t.disk_tier_enabled = t.disk_tier_enabled || s.disk_tier_enabled;
    add_tier(s.host_tier, &t.host_tier);
    add_tier(s.disk_tier, &t.disk_tier);
    t.tier_blocks_fetched += s.tier_blocks_fetched;
    t.tier_blocks_recomputed += s.tier_blocks_recomputed;
    t.tier_transfers_pending += s.tier_transfers_pending;
    t.tier_demotions_dropped += s.tier_demotions_dropped;
    t.peer_decisions_fetch += s.peer_decisions_fetch;
    t.peer_decisions_recompute += s.peer_decisions_recompute;
    t.peer_blocks_fetched += s.peer_blocks_fetched;
    t.peer_hit_tokens += s.peer_hit_tokens;
    t.num_context_caches += s.num_context_caches;
    t.context_cache_blocks += s.context_cache_blocks;
    t.pic_requests += s.pic_requests;
    t.pic_tokens_linked += s.pic_tokens_linked;
    t.pic_tokens_recomputed += s.pic_tokens_recomputed;
    t.pic_chunks_compiled += s.pic_chunks_compiled;
    t.pic_chunks_reused += s.pic_chunks_reused;
    t.pic_index_blocks += s.pic_index_blocks;
    t.sparse_requests += s.sparse_requests;
    t.sparse_pages_released += s.sparse_pages_released;
    t.sparse_max_pages_held = std::max(t.sparse_max_pages_held, s.sparse_max_pages_held);
    // KV kept across tool calls (docs/agent-kv.md): every TE's pins.
    t.num_kv_pins += s.num_kv_pins;
    t.kv_pinned_blocks += s.kv_pinned_blocks;
    for (const auto& [tenant, blocks] : s.tenant_kv_pinned_blocks) {
      t.tenant_kv_pinned_blocks[tenant] += blocks;
    }
    // Fair admission (engine/vtc.h): a tenant's service over its weight on every TE together.
    for (const auto& [tenant, counter] : s.tenant_vtc) t.tenant_vtc[tenant] += counter;
    t.kv_pins_total += s.kv_pins_total;
    t.kv_pins_released_ttl += s.kv_pins_released_ttl;
    t.kv_pins_released_cap += s.kv_pins_released_cap;
    t.kv_pins_released_subsumed += s.kv_pins_released_subsumed;
    t.kv_pins_released_unused += s.kv_pins_released_unused;
    t.kv_pins_released_pressure += s.kv_pins_released_pressure;
  }
  t.kv_usage = t.kv_blocks_total > 0 ? static_cast<float>(static_cast<double>(t.kv_blocks_used) /
                                                          static_cast<double>(t.kv_blocks_total))
                                     : 0.0f;
  return t;
}

engine::MetricsSnapshot merge_metrics(const std::vector<engine::MetricsSnapshot>& all) {
  engine::MetricsSnapshot t;
  for (const engine::MetricsSnapshot& m : all) {
    add_histogram(m.time_to_first_token_seconds, &t.time_to_first_token_seconds);
    add_histogram(m.inter_token_latency_seconds, &t.inter_token_latency_seconds);
    add_histogram(m.e2e_request_latency_seconds, &t.e2e_request_latency_seconds);
    add_histogram(m.request_queue_time_seconds, &t.request_queue_time_seconds);
    add_histogram(m.request_prompt_tokens, &t.request_prompt_tokens);
    add_histogram(m.request_generation_tokens, &t.request_generation_tokens);
    for (size_t i = 0; i < t.request_finished_total.size(); ++i) {
      t.request_finished_total[i] += m.request_finished_total[i];
    }
    add_expert_tokens(m.moe_expert_tokens, &t.moe_expert_tokens);
  }
  return t;
}

}  // namespace keel::cluster
