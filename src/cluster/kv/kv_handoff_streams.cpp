// KvHandoffStreams (see kv_handoff_streams.h): the watched keys and the caught copies.
#include "cluster/kv/kv_handoff_streams.h"

#include <utility>

namespace keel::cluster {

void KvHandoffStreams::set_on_caught(std::function<void()> on_caught) {
  MutexLock lock(callback_mu_);  // waits out a callback in progress
  on_caught_ = std::move(on_caught);
}

void KvHandoffStreams::open(int64_t stream, std::vector<kv::BlockHash> keys) {
  MutexLock lock(mu_);
  const auto old = streams_.find(stream);
  if (old != streams_.end()) {
    forget_keys(stream, old->second);
    streams_.erase(old);
  }
  Stream s;
  s.caught.assign(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    wanted_.emplace(keys[i], Want{stream, static_cast<int32_t>(i)});
  }
  s.keys = std::move(keys);
  streams_.emplace(stream, std::move(s));
}

bool KvHandoffStreams::wants(const kv::BlockHash& hash) const {
  MutexLock lock(mu_);
  return wanted_.contains(hash);
}

void KvHandoffStreams::catch_block(const kv::BlockHash& hash, std::span<const std::byte> payload) {
  {
    MutexLock lock(mu_);
    const auto [first, last] = wanted_.equal_range(hash);
    if (first == last) return;
    for (auto it = first; it != last; ++it) {
      Stream& s = streams_.at(it->second.stream);
      const int32_t i = it->second.index;
      s.caught[static_cast<size_t>(i)] = true;
      s.ready.push_back(CaughtBlock{i, hash, i == 0 ? kv::kRootHash : s.keys[i - 1],
                                    std::vector<std::byte>(payload.begin(), payload.end())});
    }
    wanted_.erase(first, last);
  }
  MutexLock lock(callback_mu_);
  if (on_caught_) on_caught_();
}

std::vector<CaughtBlock> KvHandoffStreams::take(int64_t stream) {
  MutexLock lock(mu_);
  const auto it = streams_.find(stream);
  if (it == streams_.end()) return {};
  return std::exchange(it->second.ready, {});
}

std::vector<int32_t> KvHandoffStreams::close(int64_t stream) {
  MutexLock lock(mu_);
  const auto it = streams_.find(stream);
  if (it == streams_.end()) return {};
  std::vector<int32_t> missing;
  for (size_t i = 0; i < it->second.caught.size(); ++i) {
    if (!it->second.caught[i]) missing.push_back(static_cast<int32_t>(i));
  }
  forget_keys(stream, it->second);
  streams_.erase(it);
  return missing;
}

size_t KvHandoffStreams::num_open() const {
  MutexLock lock(mu_);
  return streams_.size();
}

size_t KvHandoffStreams::num_pending() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, s] : streams_) n += s.ready.size();
  return n;
}

void KvHandoffStreams::forget_keys(int64_t stream, const Stream& s) {
  for (size_t i = 0; i < s.keys.size(); ++i) {
    if (s.caught[i]) continue;
    const auto [first, last] = wanted_.equal_range(s.keys[i]);
    for (auto it = first; it != last; ++it) {
      if (it->second.stream == stream && it->second.index == static_cast<int32_t>(i)) {
        wanted_.erase(it);
        break;
      }
    }
  }
}

}  // namespace keel::cluster
