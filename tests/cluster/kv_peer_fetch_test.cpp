// Tier T3 on loopback without a model: a KvPeerFetcher (with its own KvTransferServer, whose sink
// files blocks in a map) pulls hinted blocks from a KvPeerServer serving another map. Fetched
// blocks arrive byte-equal and counted; a peer lacking a block stops the run there; a throttled
// fetch service measures slow, so the cost model recomputes; a peer of another engine identity
// or an unreachable one costs a bounded failure, counted as recompute. No timing is asserted.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>

#include "cluster/kv/kv_peer_fetch.h"
#include "cluster/kv/kv_peer_server.h"
#include "cluster/transfer/kv_transfer_server.h"
#include "engine/model_identity.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;

constexpr kv::BlockHash kFetchModel{0x5151, 0x7373};
constexpr kv::BlockHash kFetchIdentity{0x1111, 0x2222};
constexpr int32_t kBlockTokens = 4;
constexpr size_t kBlockBytes = 256;

std::vector<std::byte> fetch_payload_of(const kv::BlockHash& h) {
  std::vector<std::byte> p(kBlockBytes);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::byte>((h.lo + i * 31) & 0xff);
  return p;
}

// A cache of blocks by key, shared by a sink (UCX thread) and the test.
struct BlockMap {
  std::mutex mu;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::byte>> blocks;
  void put(const kv::BlockHash& h, std::span<const std::byte> p) {
    std::lock_guard lock(mu);
    blocks[{h.lo, h.hi}] = std::vector<std::byte>(p.begin(), p.end());
  }
  std::optional<std::vector<std::byte>> get(const kv::BlockHash& h) {
    std::lock_guard lock(mu);
    const auto it = blocks.find({h.lo, h.hi});
    if (it == blocks.end()) return std::nullopt;
    return it->second;
  }
  size_t size() {
    std::lock_guard lock(mu);
    return blocks.size();
  }
};

const std::vector<int32_t> kPrompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
std::vector<kv::BlockHash> prompt_keys() {
  return engine::prefix_block_hashes(kFetchModel, "", kPrompt, kBlockTokens);  // 4 full blocks
}

// The serving TE: a KvPeerServer over `held`.
struct PeerSide {
  BlockMap held;
  std::unique_ptr<KvPeerServer> server;
  explicit PeerSide(double throttle = 0, kv::BlockHash identity = kFetchIdentity) {
    KvPeerServerConfig c;
    c.kv_identity = identity;
    c.block_tokens = kBlockTokens;
    c.block_bytes = kBlockBytes;
    c.read_block = [this](const kv::BlockHash& h, std::span<std::byte> out) -> Status {
      const auto p = held.get(h);
      if (!p) return Status::not_found("not held");
      std::copy(p->begin(), p->end(), out.begin());
      return Status::ok_status();
    };
    c.throttle_bytes_per_s = throttle;
    auto s = KvPeerServer::start(std::move(c));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(*s);
  }
};

// The fetching TE: its transfer server files blocks in `filed` and tells the fetcher.
struct FetchSide {
  BlockMap filed;
  double prefill_seconds_per_token = 0;
  std::unique_ptr<KvPeerFetcher> fetcher;
  std::unique_ptr<KvTransferServer> transfer;  // destroyed first: its sink uses the fetcher
  FetchSide() {
    KvTransferServerOptions so;
    so.kv_identity = kFetchIdentity;
    so.payload_bytes = kBlockBytes;
    auto t =
        KvTransferServer::start(so, [this](const KvFrameHeader& h, std::span<const std::byte> p) {
          if (!(h.block_hash == kPeerProbeHash)) filed.put(h.block_hash, p);
          fetcher->on_block_filed(h.block_hash);
        });
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    KvPeerFetchConfig c;
    c.model_key = kFetchModel;
    c.kv_identity = kFetchIdentity;
    c.block_size = kBlockTokens;
    c.block_bytes = kBlockBytes;
    c.reply_to = "127.0.0.1:" + std::to_string(t.ok() ? (*t)->port() : 1);
    c.prefill_seconds_per_token = [this] { return prefill_seconds_per_token; };
    fetcher = std::make_unique<KvPeerFetcher>(std::move(c));
    if (t.ok()) transfer = std::move(*t);
  }
};

TEST(KvPeerFetchTest, FetchesTheHintedRunIntoTheHostTier) {
  PeerSide peer;
  const std::vector<kv::BlockHash> keys = prompt_keys();
  ASSERT_EQ(keys.size(), 4u);
  for (const kv::BlockHash& k : keys) peer.held.put(k, fetch_payload_of(k));
  FetchSide me;
  // The fetching TE holds block 0; the peer all 4. Prefill speed not measured: fetch.
  const PeerFetchOutcome out =
      me.fetcher->fetch(PeerHint{"te-1", peer.server->address(), 1, 4}, kPrompt, "");
  EXPECT_TRUE(out.status.ok()) << out.status.to_string();
  EXPECT_TRUE(out.fetched);
  EXPECT_EQ(out.hinted_blocks, 3);
  EXPECT_EQ(out.blocks, 3);
  EXPECT_EQ(me.filed.size(), 3u);
  EXPECT_FALSE(me.filed.get(keys[0]).has_value());
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(me.filed.get(keys[i]), fetch_payload_of(keys[i])) << i;
  const KvPeerFetchStats s = me.fetcher->stats();
  EXPECT_EQ(s.decisions_fetch, 1);
  EXPECT_EQ(s.decisions_recompute, 0);
  EXPECT_EQ(s.blocks_fetched, 3);
  EXPECT_EQ(s.hit_tokens, 3 * kBlockTokens);
  EXPECT_EQ(s.probes, 1);
  EXPECT_TRUE(me.fetcher->link_cost(peer.server->address()).has_value());
  EXPECT_EQ(peer.server->stats().blocks_served, 3);
  // Again on the same connection: no second probe.
  (void)me.fetcher->fetch(PeerHint{"te-1", peer.server->address(), 0, 2}, kPrompt, "");
  EXPECT_EQ(me.fetcher->stats().probes, 1);
  EXPECT_EQ(me.fetcher->stats().blocks_fetched, 5);
}

TEST(KvPeerFetchTest, APeerLackingABlockStopsTheRunThere) {
  PeerSide peer;
  const std::vector<kv::BlockHash> keys = prompt_keys();
  peer.held.put(keys[0], fetch_payload_of(keys[0]));
  peer.held.put(keys[2], fetch_payload_of(keys[2]));  // block 1 missing: block 2 is useless
  FetchSide me;
  const PeerFetchOutcome out =
      me.fetcher->fetch(PeerHint{"te-1", peer.server->address(), 0, 3}, kPrompt, "");
  EXPECT_TRUE(out.fetched);
  EXPECT_EQ(out.blocks, 1);
  EXPECT_EQ(me.filed.size(), 1u);
  EXPECT_EQ(me.fetcher->stats().hit_tokens, kBlockTokens);
}

TEST(KvPeerFetchTest, ThrottledLinkMakesTheCostModelRecompute) {
  // 1 kB/s: the 1-block probe takes ≥ 0.25 s, so a 256-byte block costs ~0.25 s over the link;
  // recomputing its 4 tokens at 0.1 ms a token costs 0.4 ms.
  PeerSide peer(1024);
  const std::vector<kv::BlockHash> keys = prompt_keys();
  for (const kv::BlockHash& k : keys) peer.held.put(k, fetch_payload_of(k));
  FetchSide me;
  me.prefill_seconds_per_token = 1e-4;
  const PeerFetchOutcome out =
      me.fetcher->fetch(PeerHint{"te-1", peer.server->address(), 0, 4}, kPrompt, "");
  EXPECT_TRUE(out.status.ok()) << out.status.to_string();
  EXPECT_FALSE(out.fetched);
  EXPECT_EQ(me.filed.size(), 0u);
  const KvPeerFetchStats s = me.fetcher->stats();
  EXPECT_EQ(s.decisions_recompute, 1);
  EXPECT_EQ(s.decisions_fetch, 0);
  EXPECT_EQ(peer.server->stats().blocks_served, 0);
  EXPECT_EQ(peer.server->stats().probes, 3);  // warm-up ping, timed ping, probe
}

TEST(KvPeerFetchTest, ForeignIdentityOrUnreachablePeerIsABoundedFailure) {
  PeerSide other_model(0, kv::BlockHash{9, 9});
  const std::vector<kv::BlockHash> keys = prompt_keys();
  for (const kv::BlockHash& k : keys) other_model.held.put(k, fetch_payload_of(k));
  FetchSide me;
  PeerFetchOutcome out =
      me.fetcher->fetch(PeerHint{"te-1", other_model.server->address(), 0, 4}, kPrompt, "");
  EXPECT_FALSE(out.status.ok());
  EXPECT_FALSE(out.fetched);
  EXPECT_EQ(me.filed.size(), 0u);
  EXPECT_GE(other_model.server->stats().refused, 1);
  // Nothing listens on port 1.
  out = me.fetcher->fetch(PeerHint{"te-2", "127.0.0.1:1", 0, 4}, kPrompt, "");
  EXPECT_FALSE(out.status.ok());
  const KvPeerFetchStats s = me.fetcher->stats();
  EXPECT_EQ(s.failures, 2);
  EXPECT_EQ(s.decisions_recompute, 2);
  EXPECT_EQ(s.blocks_fetched, 0);
  // A hint with nothing beyond the TE's own blocks is no decision at all.
  out = me.fetcher->fetch(PeerHint{"te-1", other_model.server->address(), 4, 4}, kPrompt, "");
  EXPECT_EQ(out.hinted_blocks, 0);
  EXPECT_EQ(me.fetcher->stats().decisions_recompute, 2);
}

}  // namespace
}  // namespace keel::cluster
