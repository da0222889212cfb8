// Engine, EPIC part: chunks of a request are computed alone by internal compile requests (or
// taken from the chunk index), then the parent is handed to the scheduler, which links them at
// admission; the plan's row links run on the engine thread before the forward pass. See engine.h.
#include <algorithm>

#include "core/clock.h"
#include "engine/engine.h"
#include "kv/block_file.h"
#include "model/kv_relocate.h"

namespace keel::engine {

kv::BlockHash Engine::chunk_extra_key(const std::string& salt) const {
  return kv::request_extra_key(pic_root_, salt);
}

void Engine::index_chunk(const kv::BlockHash& hash, RequestKey key, int32_t len) {
  const auto blocks = static_cast<int64_t>(kv_.block_table(key).size());
  // (A compile request preempted at its very end holds no table: nothing to keep.)
  if (blocks < kv_.blocks_for(len) || chunk_index_.contains(hash)) return;
  if (!scheduler_.acquire_retained(key)) return;
  // Requests that took an evicted chunk as a source keep their own reference.
  for (RequestKey lru : chunk_index_.insert(hash, key, blocks)) scheduler_.release_retained(lru);
}

void Engine::admit_pic(EngineRequest& r) {
  // Each chunk from the chunk index, or compiled by an internal request.
  for (const kv::PicChunk& c : r.request.pic_chunks) {
    const std::span<const int32_t> tokens(r.request.prompt_tokens.data() + c.start,
                                          static_cast<size_t>(c.len));
    const kv::BlockHash h =
        kv::hash_block(kv::kRootHash, tokens, chunk_extra_key(r.request.cache_salt));
    const std::optional<RequestKey> hit = chunk_index_.find(h);
    if (hit && scheduler_.acquire_retained(*hit)) {
      r.pic.children.push_back(*hit);
      ++counters_.pic_chunks_reused;
    } else {
      r.pic.children.push_back(start_compile(r.key(), tokens, r.request.cache_salt, h));
      ++r.pic.pending;
    }
  }
  if (r.pic.pending == 0) link_parent(r);
}

RequestKey Engine::start_compile(RequestKey parent, std::span<const int32_t> tokens,
                                 const std::string& salt, const kv::BlockHash& hash) {
  const RequestKey key = next_key_.fetch_add(1);
  EngineRequest c;
  c.pic.internal = true;
  c.pic.parent = parent;
  c.pic.chunk_hash = hash;
  ++counters_.pic_chunks_compiled;
  c.arrival_ns = SteadyClock().now_ns();
  c.request.prompt_tokens.assign(tokens.begin(), tokens.end());
  c.request.max_tokens = 1;
  c.request.ignore_eos = true;
  c.request.sampling.temperature = 0.0f;
  c.sampler = std::make_unique<sampling::Sampler>(c.request.sampling,
                                                  static_cast<int32_t>(model_.hparams().n_vocab));
  // Chunks are keyed by their own tokens under the PIC root (and the tenant's salt), whatever
  // precedes them in a prompt.
  c.sched.key = key;
  EngineRequest& r = active_.emplace(key, std::move(c)).first->second;
  enqueue(r, 1, chunk_extra_key(salt));
  return key;
}

void Engine::finish_compile(RequestKey key, EngineRequest& a, FinishReason reason) {
  const bool ok = reason == FinishReason::kStop || reason == FinishReason::kLength;
  if (ok) {
    scheduler_.retain(key);  // the parent's reference: its link reads the table
    index_chunk(a.pic.chunk_hash, key, static_cast<int32_t>(a.request.prompt_tokens.size()));
  } else {
    scheduler_.finish(key);
  }
  a.finished = true;
  const auto parent = active_.find(a.pic.parent);
  if (parent != active_.end() && !parent->second.finished && parent->second.pic.pending > 0) {
    parent->second.pic.failed = parent->second.pic.failed || !ok;
    if (--parent->second.pic.pending == 0) link_parent(parent->second);
  } else if (ok) {
    scheduler_.release_retained(key);  // the parent is gone
  }
  release_if_done(key);
}

void Engine::link_parent(EngineRequest& p) {
  PicState pic;
  if (p.pic.failed) {
    for (RequestKey child : p.pic.children) scheduler_.release_retained(child);
  } else {
    pic.chunks = p.request.pic_chunks;
    pic.sources = p.pic.children;
    pic.variant = p.pic.variant;
    ++counters_.pic_requests;
  }
  enqueue(p, p.request.max_new_tokens(), kv::request_extra_key(model_key_, p.request.cache_salt),
          std::move(pic));
}

void Engine::run_links(StepPlan& plan) {
  if (plan.links.empty() && plan.link_sources.empty()) return;  // most steps
  std::vector<model::KvRowMove> moves;
  moves.reserve(plan.links.size());
  for (const RowLink& l : plan.links) {
    moves.push_back({l.src_block, l.src_row, l.dst_block, l.dst_row, l.delta});
  }
  model::move_kv_rows(model_.hparams(), storage_, *link_ops_, moves);
  for (RequestKey src : plan.link_sources) scheduler_.release_retained(src);
  plan.links.clear();
  plan.link_sources.clear();
}

}  // namespace keel::engine
