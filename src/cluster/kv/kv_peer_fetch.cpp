// KvPeerFetcher (see kv_peer_fetch.h): measure the link, decide, fetch, wait for the arrivals.
#include "cluster/kv/kv_peer_fetch.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "engine/model_identity.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

KvPeerFetcher::KvPeerFetcher(KvPeerFetchConfig config) : config_(std::move(config)) {}

KvPeerFetcher::~KvPeerFetcher() {
  std::map<std::string, Peer> peers;
  {
    MutexLock lock(mu_);
    peers.swap(peers_);
  }
  for (auto& [address, p] : peers) p.link->close();
}

KvPeerFetchStats KvPeerFetcher::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

std::optional<kv::TierCost> KvPeerFetcher::link_cost(const std::string& address) const {
  MutexLock lock(mu_);
  const auto it = peers_.find(address);
  if (it == peers_.end()) return std::nullopt;
  return it->second.cost;
}

void KvPeerFetcher::on_block_filed(const kv::BlockHash& hash) {
  MutexLock lock(mu_);
  bool woke = false;
  for (Waiter* w : waiters_) {
    for (size_t i = 0; i < w->keys.size(); ++i) {
      if (w->arrived[i] || !(w->keys[i] == hash)) continue;
      w->arrived[i] = true;
      ++w->num_arrived;
      woke = true;
    }
  }
  if (woke) cv_.notify_all();
}

namespace {

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

Result<int64_t> KvPeerFetcher::call(net::Link& link, const KvFetchRequest& request,
                                    Deadline deadline, double* seconds) {
  const Clock::time_point start = Clock::now();
  if (start >= deadline) return Status::unavailable("kv peer fetch: out of time");
  KEEL_ASSIGN_OR_RETURN(Json reply, link.call(encode(request), remaining(deadline)));
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  KEEL_TRY(decode_status_body(reply));
  const auto blocks = reply.find("blocks");
  if (blocks == reply.end() || !blocks->is_number_integer() || blocks->get<int64_t>() < 0) {
    return Status::internal("kv_fetch reply without a block count");
  }
  return blocks->get<int64_t>();
}

Result<KvPeerFetcher::Peer> KvPeerFetcher::connect_and_probe(const std::string& address,
                                                             Deadline deadline) {
  KEEL_ASSIGN_OR_RETURN(std::shared_ptr<net::Link> link,
                        net::Link::connect(address, remaining(deadline), nullptr, nullptr));
  KvFetchRequest ping;
  ping.kv_identity = config_.kv_identity;
  ping.reply_to = config_.reply_to;
  double warm = 0;
  double latency = 0;
  double probe = 0;
  // The first call also makes the peer's transfer connection to us: not part of the latency.
  Result<int64_t> r = call(*link, ping, deadline, &warm);
  if (r.ok()) r = call(*link, ping, deadline, &latency);
  KvFetchRequest probe_req = ping;
  probe_req.probe_blocks = config_.probe_blocks;
  if (r.ok()) r = call(*link, probe_req, deadline, &probe);
  if (r.ok() && *r != config_.probe_blocks) {
    r = Status::unavailable("probe: the peer pushed " + std::to_string(*r) + " blocks");
  }
  if (!r.ok()) {
    link->close();
    return r.status();
  }
  Peer p{std::move(link), {}};
  p.cost.latency_seconds = latency;
  p.cost.seconds_per_byte =
      std::max(0.0, probe - latency) /
      (static_cast<double>(config_.probe_blocks) * static_cast<double>(config_.block_bytes));
  KEEL_LOG_INFO("kv peer fetch: link to {} measured: {:.3f} ms + {:.3f} ms/MiB", address,
                p.cost.latency_seconds * 1e3, p.cost.seconds_per_byte * 1e3 * (1 << 20));
  return p;
}

Result<KvPeerFetcher::Peer> KvPeerFetcher::peer(const std::string& address, Deadline deadline) {
  {
    MutexLock lock(mu_);
    const auto it = peers_.find(address);
    if (it != peers_.end() && !it->second.link->closed()) return it->second;
  }
  KEEL_ASSIGN_OR_RETURN(Peer p, connect_and_probe(address, deadline));
  MutexLock lock(mu_);
  ++stats_.probes;
  peers_[address] = p;  // a concurrent first fetch may have measured too: the later one wins
  return p;
}

void KvPeerFetcher::drop_peer(const std::string& address) {
  std::shared_ptr<net::Link> link;
  {
    MutexLock lock(mu_);
    const auto it = peers_.find(address);
    if (it == peers_.end()) return;
    link = it->second.link;
    peers_.erase(it);
  }
  link->close();
}

PeerFetchOutcome KvPeerFetcher::fetch(const PeerHint& hint, std::span<const int32_t> prompt,
                                      const std::string& cache_salt) {
  PeerFetchOutcome out;
  const Deadline deadline = Clock::now() + config_.max_wait;
  const std::vector<kv::BlockHash> keys =
      engine::prefix_block_hashes(config_.model_key, cache_salt, prompt, config_.block_size);
  const auto first = static_cast<size_t>(std::max(hint.skip_blocks, 0));
  const size_t last = std::min(keys.size(), static_cast<size_t>(std::max(hint.num_blocks, 0)));
  if (first >= last) return out;
  out.hinted_blocks = static_cast<int32_t>(last - first);
  Result<Peer> p = peer(hint.address, deadline);
  if (!p.ok()) {
    MutexLock lock(mu_);
    ++stats_.failures;
    ++stats_.decisions_recompute;  // nothing to fetch from: the engine recomputes
    out.status = p.status();
    return out;
  }
  const double spt = config_.prefill_seconds_per_token ? config_.prefill_seconds_per_token() : 0;
  const int32_t cut = kv::peer_blocks_to_fetch(out.hinted_blocks, p->cost, config_.block_bytes,
                                               config_.block_size, spt);
  if (cut == 0) {
    MutexLock lock(mu_);
    ++stats_.decisions_recompute;
    return out;
  }
  out.fetched = true;
  KvFetchRequest request;
  request.kv_identity = config_.kv_identity;
  request.parent_hash = first == 0 ? kv::kRootHash : keys[first - 1];
  request.block_hashes.assign(keys.begin() + static_cast<std::ptrdiff_t>(first),
                              keys.begin() + static_cast<std::ptrdiff_t>(first) + cut);
  request.reply_to = config_.reply_to;
  Waiter waiter{request.block_hashes, std::vector<bool>(request.block_hashes.size()), 0};
  {
    MutexLock lock(mu_);
    ++stats_.decisions_fetch;
    waiters_.push_back(&waiter);
  }
  double seconds = 0;
  Result<int64_t> pushed = call(*p->link, request, deadline, &seconds);
  UniqueLock lock(mu_);
  if (pushed.ok()) {
    // The peer flushed before replying; its frames may still be on their way through our sink.
    const auto want = static_cast<int32_t>(std::min<int64_t>(*pushed, cut));
    cv_.wait_until(lock.native(), std::min(deadline, Clock::now() + config_.arrival_grace),
                   [&] { return waiter.num_arrived >= want; });
    // Learn from what was observed: seconds per byte beyond the measured latency.
    const auto it = peers_.find(hint.address);
    if (*pushed > 0 && it != peers_.end()) {
      kv::TierCost& cost = it->second.cost;
      const double bytes = static_cast<double>(*pushed) * static_cast<double>(config_.block_bytes);
      const double observed = std::max(0.0, seconds - cost.latency_seconds) / bytes;
      cost.seconds_per_byte = 0.5 * cost.seconds_per_byte + 0.5 * observed;
    }
  } else {
    ++stats_.failures;
    out.status = pushed.status();
  }
  std::erase(waiters_, &waiter);
  out.blocks = waiter.num_arrived;
  stats_.blocks_fetched += waiter.num_arrived;
  stats_.hit_tokens += static_cast<int64_t>(waiter.num_arrived) * config_.block_size;
  lock.unlock();
  if (!pushed.ok()) drop_peer(hint.address);
  return out;
}

}  // namespace keel::cluster
