// KvHandoff (see kv_handoff.h): read the prompt's blocks out of the engine, push, flush.
#include "cluster/kv_handoff.h"

#include <utility>

#include "core/log.h"
#include "engine/model_identity.h"

namespace keel::cluster {

KvHandoff::KvHandoff(KvHandoffConfig config) : config_(std::move(config)) {
  thread_ = std::thread([this] { run(); });
}

KvHandoff::~KvHandoff() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void KvHandoff::push(std::vector<int32_t> prompt, std::string cache_salt, std::string destination,
                     Done done) {
  std::lock_guard lock(mu_);
  queue_.push_back(
      Item{std::move(prompt), std::move(cache_salt), std::move(destination), std::move(done)});
  cv_.notify_all();
}

void KvHandoff::run() {
  while (true) {
    Item item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    const KvHandoffResult result = transfer(item);
    if (item.done) item.done(result);
  }
}

Result<KvTransferClient*> KvHandoff::client(const std::string& destination) {
  const auto it = clients_.find(destination);
  if (it != clients_.end()) return it->second.get();
  const size_t colon = destination.rfind(':');
  if (colon == std::string::npos) {
    return Status::invalid_argument("bad KV transfer address \"" + destination + "\"");
  }
  KvTransferClientOptions options;
  options.host = destination.substr(0, colon);
  options.port = static_cast<uint16_t>(std::stoi(destination.substr(colon + 1)));
  options.kv_identity = config_.kv_identity;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<KvTransferClient> c, KvTransferClient::connect(options));
  KvTransferClient* raw = c.get();
  clients_[destination] = std::move(c);
  return raw;
}

KvHandoffResult KvHandoff::transfer(const Item& item) {
  KvHandoffResult r;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<kv::BlockHash> keys =
      engine::prefix_block_hashes(config_.model_key, item.salt, item.prompt, config_.block_size);
  Result<KvTransferClient*> c = client(item.destination);
  if (!c.ok()) {
    r.status = c.status();
    return r;
  }
  kv::BlockHash parent = kv::kRootHash;
  for (const kv::BlockHash& key : keys) {
    KvBlockToSend block;
    block.block_hash = key;
    block.parent_hash = parent;
    block.num_tokens = static_cast<uint32_t>(config_.block_size);
    block.payload.resize(config_.block_bytes);
    if (!config_.read_block(key, block.payload).ok()) break;  // evicted: the rest is recomputed
    parent = key;
    r.bytes += static_cast<int64_t>(block.payload.size());
    r.status = (*c)->send(std::move(block));
    if (!r.status.ok()) break;
    ++r.blocks;
  }
  if (r.status.ok()) r.status = (*c)->flush(start + config_.deadline);
  if (!r.status.ok()) clients_.erase(item.destination);  // reconnect next time
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace keel::cluster
