// Engine, KV kept across tool calls (docs/agent-kv.md): a request with GenerationRequest::keep_kv
// that finishes with kStop leaves a session pin on the blocks the prefix index holds for its
// prompt + output (kv/kv_pins.h, owned by kv_: TTL and caps from EngineConfig), so the next turn,
// found by the prefix cache like any prompt, reuses them whatever other traffic ran meanwhile.
// The front end releases the pin when the output was not a tool call (a ReleaseKvPin message);
// the engine thread releases pins past their TTL whenever it wakes (an idle engine sleeps until
// the next deadline), on clock_, and the oldest pin gives way when a waiting request cannot be
// admitted while nothing runs (pins must not stall the engine until their TTL). Released blocks
// are ordinary cached blocks (LRU; demoted to the tiers when evicted). Engine thread only, except
// release_kv_pin().
#include <algorithm>

#include "core/log.h"
#include "engine/engine.h"

namespace keel::engine {

void Engine::release_kv_pin(RequestKey key) {
  {
    MutexLock lock(mu_);
    inbox_.push_back(ReleaseKvPin{key});
  }
  wake_.notify_all();
}

void Engine::pin_kv(RequestKey key, const EngineRequest& a) {
  const int32_t pinned = kv_.pin_published(key, key, a.request.tenant, clock_.now_ns());
  KEEL_LOG_DEBUG("kv pin {}: {} blocks of {} ({} pins, {} blocks pinned)", a.request.request_id,
                 pinned, a.request.tenant, kv_.pins().num_pins(), kv_.pins().num_blocks());
}

void Engine::expire_kv_pins() { kv_.expire_pins(clock_.now_ns()); }

void Engine::yield_kv_pin() {
  if (scheduler_.num_running() > 0 || scheduler_.num_waiting() == 0) return;
  if (transfer_ != nullptr && transfer_->pending() > 0) return;
  if (kv_.release_oldest_pin()) {
    KEEL_LOG_DEBUG("kv pin released: a waiting request needs its blocks ({} pins left)",
                   kv_.pins().num_pins());
  }
}

std::optional<int64_t> Engine::next_deadline_ns() const {
  const std::optional<int64_t> cache = caches_.next_deadline_ns();
  const std::optional<int64_t> pin = kv_.pins().next_deadline_ns();
  if (!cache) return pin;
  if (!pin) return cache;
  return std::min(*cache, *pin);
}

void Engine::kv_pin_stats(EngineStats* s) const {
  const kv::KvPins& pins = kv_.pins();
  s->num_kv_pins = pins.num_pins();
  s->kv_pinned_blocks = pins.num_blocks();
  for (const auto& [tenant, blocks] : pins.blocks_by_tenant()) {
    s->tenant_kv_pinned_blocks.emplace(tenant, blocks);
  }
  s->kv_pins_total = pins.num_added();
  s->kv_pins_released_ttl = pins.num_released(kv::PinRelease::kTtl);
  s->kv_pins_released_cap = pins.num_released(kv::PinRelease::kCap);
  s->kv_pins_released_subsumed = pins.num_released(kv::PinRelease::kSubsumed);
  s->kv_pins_released_unused = pins.num_released(kv::PinRelease::kReleased);
  s->kv_pins_released_pressure = pins.num_released(kv::PinRelease::kPressure);
}

}  // namespace keel::engine
