// Engine: its KV connector (kv_connector.h) — a sending engine reads a published block's payload
// out of its pool or tiers; a receiving engine files a peer's block in its host tier T1, where the
// existing admission path (prefix lookup → blocks_to_fetch → promotion) finds it. A published
// pool block is never written again while it stays in the prefix index (it is un-published or
// evicted first, both on the engine thread), so the engine thread may copy it while a step runs.
// The published-block tap shows each newly published block to EngineDeps::published_blocks on
// the engine thread, right after the step that computed it.
#include <condition_variable>
#include <cstring>
#include <iterator>

#include "engine/engine.h"
#include "engine/model_identity.h"

namespace keel::engine {

// Shared by the reader and the engine thread; outlives whichever gives up first.
struct Engine::BlockRead {
  Mutex mu;
  std::condition_variable cv;
  bool done KEEL_GUARDED_BY(mu) = false;
  bool found KEEL_GUARDED_BY(mu) = false;
  std::vector<std::byte> bytes KEEL_GUARDED_BY(mu);
};

// The engine's KvConnector: reads go through the engine thread's inbox, writes to the tiers.
class Engine::Connector final : public KvConnector {
 public:
  explicit Connector(Engine* e) : e_(e) {}
  [[nodiscard]] kv::BlockHash kv_identity() const override {
    return kv_tier_identity(e_->model_key_, e_->config_.kv_dtype, e_->config_.block_size);
  }
  [[nodiscard]] size_t block_bytes() const override { return e_->kv_block_bytes(); }
  Status read_block(const kv::BlockHash& hash, std::span<std::byte> out,
                    std::chrono::milliseconds timeout) override {
    return e_->read_kv_block(hash, out, timeout);
  }
  Status accept_block(const kv::BlockHash& hash, std::span<const std::byte> payload) override {
    return e_->accept_kv_block(hash, payload);
  }
  [[nodiscard]] double prefill_seconds_per_token() const override {
    return e_->prefill_seconds_per_token_published_.load(std::memory_order_relaxed);
  }

 private:
  Engine* e_;
};

std::unique_ptr<KvConnector> Engine::make_connector() { return std::make_unique<Connector>(this); }

void Engine::serve_block_read(const ReadBlock& r) {
  const std::optional<kv::BlockId> block = kv_.pool().lookup(r.hash);
  MutexLock lock(r.read->mu);
  if (block) {
    const size_t n = storage_.layout().block_bytes();
    r.read->bytes.resize(n);
    std::memcpy(r.read->bytes.data(), storage_.block(*block), n);
    r.read->found = true;
  }
  r.read->done = true;
  r.read->cv.notify_all();
}

Status Engine::read_kv_block(const kv::BlockHash& hash, std::span<std::byte> out,
                             std::chrono::milliseconds timeout) {
  if (pipeline_tail_ != nullptr) {  // the block's later layers live on other processes
    return Status::unsupported("read_block: a pipeline-parallel engine (--pp) cannot hand off KV");
  }
  if (out.size() != kv_block_bytes()) {
    return Status::invalid_argument("read_block: buffer of " + std::to_string(out.size()) +
                                    " bytes, a block has " + std::to_string(kv_block_bytes()));
  }
  auto read = std::make_shared<BlockRead>();
  {
    MutexLock lock(mu_);
    if (stop_.load()) return Status::unavailable("engine stopping");
    inbox_.push_back(ReadBlock{hash, read});
  }
  wake_.notify_all();
  {
    UniqueLock lock(read->mu);
    if (!read->cv.wait_for(lock.native(), timeout, [&] {
          read->mu.assert_held();
          return read->done;
        })) {
      return Status::unavailable("read_block: the engine thread did not answer");
    }
    if (read->found) {
      std::memcpy(out.data(), read->bytes.data(), out.size());
      return Status::ok_status();
    }
  }
  if (tiers_ != nullptr && tiers_->fetch(hash, out)) return Status::ok_status();
  return Status::not_found("read_block: block not held");
}

void Engine::tap_published_blocks() {
  std::vector<kv::CacheEvent> events = kv_.take_cache_events();
  if (events.empty()) return;
  if (published_blocks_) {
    const size_t n = storage_.layout().block_bytes();
    for (const kv::CacheEvent& e : events) {
      if (e.kind != kv::CacheEventKind::kStored || !published_blocks_.wants(e.hash)) continue;
      const std::optional<kv::BlockId> block = kv_.pool().lookup(e.hash);
      if (block) published_blocks_.take(e.hash, {storage_.block(*block), n});
    }
  }
  if (!cache_events_) return;
  pending_cache_events_.insert(pending_cache_events_.end(), std::make_move_iterator(events.begin()),
                               std::make_move_iterator(events.end()));
}

Status Engine::accept_kv_block(const kv::BlockHash& hash, std::span<const std::byte> payload) {
  if (pipeline_tail_ != nullptr) {
    return Status::unsupported("accept_block: a pipeline-parallel engine (--pp) takes no KV");
  }
  if (tiers_ == nullptr || tiers_->host() == nullptr) {
    return Status::unavailable("accept_block: the engine has no host KV tier");
  }
  if (payload.size() != kv_block_bytes()) {
    return Status::invalid_argument("accept_block: payload of " + std::to_string(payload.size()) +
                                    " bytes, a block has " + std::to_string(kv_block_bytes()));
  }
  tiers_->demote(hash, payload);
  return Status::ok_status();
}

}  // namespace keel::engine
