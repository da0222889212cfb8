// Engine stats: the snapshot the engine thread publishes after each step (publish_stats, under
// mu_) and the one callers read (stats()), which adds the tiers' and the transfer thread's live
// counters (thread-safe on their own); metrics() adds an MoE model's expert counts to the
// histograms.
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "engine/tier_transfer.h"
#include "kv/disk_tier.h"
#include "kv/host_tier.h"
#include "kv/kv_tiers.h"

namespace keel::engine {

EngineStats Engine::stats() const {
  EngineStats s;
  {
    MutexLock lock(mu_);
    s = stats_;
  }
  // The tiers and the transfer thread are thread-safe and change between steps: read them here,
  // live, rather than in every step's publish_stats().
  s.host_tier_enabled = tiers_->host() != nullptr;
  s.disk_tier_enabled = tiers_->disk() != nullptr;
  if (s.host_tier_enabled) s.host_tier = tiers_->host()->stats();
  if (s.disk_tier_enabled) s.disk_tier = tiers_->disk()->stats();
  if (transfer_ != nullptr) {
    s.tier_transfers_pending = static_cast<int64_t>(transfer_->pending());
    s.tier_demotions_dropped = transfer_->dropped_demotions();
  }
  return s;
}

MetricsSnapshot Engine::metrics() const {
  MetricsSnapshot m = metrics_.snapshot();
  if (expert_counts_ != nullptr) {
    m.moe_expert_tokens =
        ExpertTokens{static_cast<int32_t>(expert_counts_->n_layer()),
                     static_cast<int32_t>(expert_counts_->n_expert()), expert_counts_->snapshot()};
  }
  return m;
}

void Engine::publish_stats() {
  EngineStats s = counters_;
  s.tier_blocks_fetched = scheduler_.tier_blocks_fetched();
  s.tier_blocks_recomputed = scheduler_.tier_blocks_recomputed();
  s.num_running = static_cast<int32_t>(scheduler_.num_running());
  s.num_waiting = static_cast<int32_t>(scheduler_.num_waiting());
  s.num_tracked = static_cast<int32_t>(active_.size());
  s.kv_usage = kv_.usage();
  s.kv_blocks_total = kv_.num_blocks();
  s.kv_blocks_used = kv_.num_blocks() - kv_.num_free_blocks();
  s.prefix_queries_tokens = kv_.prefix_queries_tokens();
  s.prefix_hits_tokens = kv_.prefix_hits_tokens();
  s.num_preemptions_total = scheduler_.num_preemptions();
  const std::vector<ContextCacheTable::Pin> pins = caches_.pins();
  s.num_context_caches = static_cast<int32_t>(pins.size());
  for (const ContextCacheTable::Pin& pin : pins) {
    s.context_cache_blocks += static_cast<int64_t>(kv_.block_table(pin.key).size());
  }
  s.pic_index_blocks = chunk_index_.blocks();
  s.pic_tokens_linked = scheduler_.pic_tokens_linked();
  s.pic_tokens_recomputed = scheduler_.pic_tokens_recomputed();
  for (const auto& [tenant, counter] : scheduler_.vtc().counter) {
    if (!tenant.empty()) s.tenant_vtc.emplace(tenant, counter);
  }
  kv_pin_stats(&s);
  MutexLock lock(mu_);
  stats_ = s;
}

}  // namespace keel::engine
