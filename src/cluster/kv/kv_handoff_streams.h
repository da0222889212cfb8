// KvHandoffStreams: what a streamed KV handoff waits for and what it has caught. A prefill task
// opens a stream with its prompt's block keys before its engine computes them; the engine thread
// offers every block it publishes (wants, then catch_block: one copy of the payload); the handoff
// thread takes the caught blocks to send them while later chunks compute, and closes the stream
// at the prefill's end, learning which keys were never caught (blocks another request had already
// published — prefix hits publish nothing — or blocks evicted before they were offered), which it
// then reads the slow way or leaves to the decode side to recompute.
//
// Invariants: a key is caught at most once per stream; a caught block is taken at most once; a
// closed stream catches nothing; stream ids are the caller's and unique among open streams.
// Thread safety: every method from any thread; the on_caught callback runs on the catching thread
// (the engine thread), outside the watch lock, and must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "kv/block_hash.h"

namespace keel::cluster {

// One caught block of a stream, ready to send.
struct CaughtBlock {
  int32_t index = 0;     // its position among the stream's keys (prompt order)
  kv::BlockHash hash;    // keys[index]
  kv::BlockHash parent;  // keys[index - 1], kv::kRootHash for the first
  std::vector<std::byte> payload;
};

class KvHandoffStreams {
 public:
  // Runs after each catch (outside the watch lock), e.g. to wake the sender; replaces any earlier
  // one. Once it returns, the one replaced runs no more (so its owner may go).
  void set_on_caught(std::function<void()> on_caught);

  // Starts watching `keys` (a prompt's block keys in order) for `stream`. An already open stream
  // of that id is closed first.
  void open(int64_t stream, std::vector<kv::BlockHash> keys);
  // Whether an open stream waits for `hash` (not caught yet). Cheap: the engine thread asks it
  // for every published block.
  [[nodiscard]] bool wants(const kv::BlockHash& hash) const;
  // Copies `payload` for every open stream that wants `hash`.
  void catch_block(const kv::BlockHash& hash, std::span<const std::byte> payload);
  // The blocks of `stream` caught since the last take, in the order they were caught.
  [[nodiscard]] std::vector<CaughtBlock> take(int64_t stream);
  // Stops watching `stream`: the indices of its keys never caught (ascending). Blocks caught and
  // not taken are dropped. Nothing for an unknown stream.
  std::vector<int32_t> close(int64_t stream);
  [[nodiscard]] size_t num_open() const;
  // Blocks caught and not yet taken, over every stream (what the copies hold).
  [[nodiscard]] size_t num_pending() const;

 private:
  struct Stream {
    std::vector<kv::BlockHash> keys;
    std::vector<bool> caught;  // per key
    std::vector<CaughtBlock> ready;
  };
  struct Want {
    int64_t stream;
    int32_t index;
  };
  void forget_keys(int64_t stream, const Stream& s) KEEL_REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<int64_t, Stream> streams_ KEEL_GUARDED_BY(mu_);
  std::unordered_multimap<kv::BlockHash, Want, kv::BlockHashHasher> wanted_ KEEL_GUARDED_BY(mu_);
  Mutex callback_mu_;  // held while on_caught_ runs (never with mu_)
  std::function<void()> on_caught_ KEEL_GUARDED_BY(callback_mu_);
};

}  // namespace keel::cluster
