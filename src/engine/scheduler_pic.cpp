// Scheduler, EPIC part (see scheduler.h, add()): admission of a request with position-independent
// chunks — row links from the chunks' retained tables, the variant's recomputes as
// scattered-position seqs ahead of its other tokens, CacheBlend's probe — and the release of the
// sources. Thread safety: engine thread only.
#include <algorithm>

#include "engine/scheduler.h"

namespace keel::engine {

void Scheduler::release_pic_sources(StepBuilder& b, RequestState& r) {
  for (RequestKey src : r.pic.sources) b.plan.link_sources.push_back(src);
  r.pic = PicState{};
}

bool Scheduler::admit_linked(StepBuilder& b, RequestState& r,
                             const kv::KvCacheManager::PrefixHit& hit,
                             const kv::PicLinkPlan& link) {
  const int32_t len = r.num_tokens();
  const int32_t bs = kv_->block_size();
  // Every source must still hold its chunk (a compile request preempted at the end has none).
  for (size_t i = 0; i < r.pic.chunks.size(); ++i) {
    if (kv_->blocks_for(r.pic.chunks[i].len) >
        static_cast<int32_t>(kv_->block_table(r.pic.sources[i]).size())) {
      release_pic_sources(b, r);
      return admit(b, r);
    }
  }
  const kv::PicVariant variant = r.pic.variant;
  const int32_t end = link.linked_end;
  const auto table = kv_->allocate(r.key, end + b.prefill_room(len - end), &hit);
  if (!table.has_value()) return false;
  size_t c = 0;
  for (int32_t p : link.linked) {
    while (r.pic.chunks[c].start + r.pic.chunks[c].len <= p) ++c;
    const int32_t j = p - r.pic.chunks[c].start;
    const std::span<const kv::BlockId> src = kv_->block_table(r.pic.sources[c]);
    b.plan.links.push_back(RowLink{src[static_cast<size_t>(j / bs)], j % bs,
                                   (*table)[static_cast<size_t>(p / bs)], p % bs,
                                   r.pic.chunks[c].start});
  }
  release_pic_sources(b, r);
  const auto linked = static_cast<int32_t>(link.linked.size());
  pic_tokens_linked_ += linked;
  pic_tokens_recomputed_ += static_cast<int32_t>(link.recompute.size()) + (len - end);
  if (!r.admitted_once) {
    r.admitted_once = true;
    r.num_cached_tokens = hit.num_tokens + linked;
    kv_->record_prefix_query(len, hit.num_tokens);
  }
  waiting_.pop_front();
  running_.push_back(r.key);
  r.phase = RequestPhase::kRunning;
  r.num_computed = end;
  r.num_scheduled = end;
  r.relink = link.recompute;
  if (!link.linked.empty()) r.publish_limit = link.linked.front();
  if (variant.mode == kv::PicMode::kCacheBlend && !link.blend_candidates.empty()) {
    r.blend_candidates = link.blend_candidates;
    r.blend_percent = variant.percent;
    r.probe_start = hit.num_tokens;
    r.probing = true;
    r.probe_planned = false;
    plan_probe(b, r);
  } else {
    // The recomputes, and in the same forward pass as much of the tail as fits: the tail's
    // tokens attend to recomputed rows written earlier in each layer of that pass.
    if (!r.relink.empty()) {
      const int32_t n = b.prefill_room(static_cast<int32_t>(r.relink.size()));
      b.prefills.push_back(make_relink_seq(r, n));
      b.take_prefill(n);
    }
    const int32_t m = r.relink.empty() ? b.prefill_room(len - end) : 0;
    if (m > 0) {
      b.prefills.push_back(make_seq(r, m));
      b.take_prefill(m);
    }
  }
  return true;
}

void Scheduler::plan_probe(StepBuilder& b, RequestState& r) {
  if (b.plan.probe.has_value()) return;
  ProbePlan p;
  p.key = r.key;
  p.start = r.probe_start;
  p.tokens.assign(r.tokens.begin() + r.probe_start, r.tokens.begin() + r.num_computed);
  const std::span<const kv::BlockId> table = kv_->block_table(r.key);
  p.block_table.assign(table.begin(), table.end());
  b.plan.probe = std::move(p);
  r.probe_planned = true;
}

void Scheduler::apply_probe(RequestKey key, std::span<const float> deviation) {
  const auto it = requests_.find(key);
  if (it == requests_.end() || !it->second->probing) return;  // gone, or preempted meanwhile
  RequestState& r = *it->second;
  std::vector<float> dev;
  for (int32_t p : r.blend_candidates) {
    const auto i = static_cast<size_t>(p - r.probe_start);
    dev.push_back(i < deviation.size() ? deviation[i] : 0.0f);
  }
  const std::vector<int32_t> pick =
      deviation.empty() ? std::vector<int32_t>{}
                        : kv::select_by_deviation(r.blend_candidates, dev, r.blend_percent);
  r.relink = kv::merge_positions(r.relink, pick);
  pic_tokens_recomputed_ += static_cast<int64_t>(pick.size());
  pic_tokens_linked_ -= static_cast<int64_t>(pick.size());
  r.num_cached_tokens -= static_cast<int32_t>(pick.size());
  r.blend_candidates.clear();
  r.probing = false;
}

ScheduledSeq Scheduler::make_relink_seq(RequestState& r, int32_t n) {
  ScheduledSeq s;
  s.key = r.key;
  s.positions.assign(r.relink.begin(), r.relink.begin() + n);
  r.relink.erase(r.relink.begin(), r.relink.begin() + n);
  s.start_pos = s.positions.front();
  s.num_tokens = n;
  for (int32_t p : s.positions) s.tokens.push_back(r.tokens[static_cast<size_t>(p)]);
  const std::span<const kv::BlockId> table = kv_->block_table(r.key);
  s.block_table.assign(table.begin(), table.end());
  r.in_flight.push_back(InFlightChunk{s.start_pos, n, false, false, /*relink=*/true});
  return s;
}

}  // namespace keel::engine
