// KvHandoff on loopback into a decode side's host tier, with a fake engine: blocks "published"
// through the tap while the prefill runs are streamed before finish(); blocks the tap never saw
// (prefix hits) are read at finish(); every block arrives byte-equal in both modes; a dropped
// frame leaves exactly that block missing (the decode side recomputes it); a read that misses
// stops the push there; a dead destination fails within the deadline. Every wait is bounded.
#include "cluster/kv/kv_handoff.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <unordered_map>

#include "cluster/transfer/kv_transfer_server.h"
#include "engine/model_identity.h"
#include "kv/host_tier.h"
#include "support/test_support.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;
using keel::testing::eventually;

constexpr kv::BlockHash kModel{0x5151, 0x6161};
constexpr kv::BlockHash kHandoffIdentity{0x1111, 0x2222};
constexpr size_t kBytes = 65536;
constexpr int32_t kBlockSize = 16;

std::vector<std::byte> payload_of(const kv::BlockHash& h) {
  std::vector<std::byte> p(kBytes);
  for (size_t i = 0; i < kBytes; ++i) p[i] = static_cast<std::byte>((i * 31 + h.lo) & 0xff);
  return p;
}

// The prefill engine's side: which blocks it holds, and how often they were read the slow way.
struct FakeEngine {
  std::mutex mu;
  std::unordered_map<kv::BlockHash, bool, kv::BlockHashHasher> held;  // guarded by mu
  int reads = 0;                                                      // guarded by mu
  Status read(const kv::BlockHash& h, std::span<std::byte> out) {
    std::lock_guard lock(mu);
    ++reads;
    if (!held.contains(h)) return Status::not_found("evicted");
    const std::vector<std::byte> p = payload_of(h);
    std::copy(p.begin(), p.end(), out.begin());
    return Status::ok_status();
  }
};

struct HandoffRig {
  kv::HostTier tier{int64_t{1} << 30, kBytes};
  std::unique_ptr<KvTransferServer> server;
  FakeEngine engine;
  KvHandoffStreams streams;
  std::unique_ptr<KvHandoff> handoff;
  std::vector<int32_t> prompt;
  std::vector<kv::BlockHash> keys;

  HandoffRig(KvHandoffMode mode, int num_blocks, KvTransferFaults faults = {},
             std::chrono::milliseconds blocked_after = 1000ms) {
    KvTransferServerOptions so;
    so.kv_identity = kHandoffIdentity;
    so.payload_bytes = kBytes;
    auto s = KvTransferServer::start(so, tier_store_sink(&tier));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(*s);
    for (int i = 0; i < num_blocks * kBlockSize + 5; ++i) prompt.push_back(i % 97 + 3);
    keys = engine::prefix_block_hashes(kModel, "", prompt, kBlockSize);
    KvHandoffConfig c;
    c.mode = mode;
    c.model_key = kModel;
    c.kv_identity = kHandoffIdentity;
    c.block_size = kBlockSize;
    c.block_bytes = kBytes;
    c.read_block = [this](const kv::BlockHash& h, std::span<std::byte> out) {
      return engine.read(h, out);
    };
    c.streams = &streams;
    c.deadline = 3s;
    c.blocked_after = blocked_after;
    c.faults = faults;
    handoff = std::make_unique<KvHandoff>(std::move(c));
  }
  std::string destination() const { return "127.0.0.1:" + std::to_string(server->port()); }

  // The engine computed and published block i (the tap's path).
  void publish(int i) {
    {
      std::lock_guard lock(engine.mu);
      engine.held[keys[i]] = true;
    }
    const engine::PublishedBlockTap tap = handoff_tap(&streams);
    if (tap.wants(keys[i])) tap.take(keys[i], payload_of(keys[i]));
  }
  void hold(int i) {  // already in the engine's cache (a prefix hit publishes nothing)
    std::lock_guard lock(engine.mu);
    engine.held[keys[i]] = true;
  }
  KvHandoffResult finish(int64_t id) {
    std::promise<KvHandoffResult> done;
    handoff->finish(id, KvHandoff::Clock::now(),
                    [&](const KvHandoffResult& r) { done.set_value(r); });
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    return f.get();
  }
  bool holds(int i) {
    std::vector<std::byte> out(kBytes);
    return tier.get(keys[i], out).ok() && out == payload_of(keys[i]);
  }
};

TEST(KvHandoffTest, StreamSendsBlocksAsTheyPublishAndTheRestAtFinish) {
  constexpr int kBlocks = 12;
  HandoffRig rig(KvHandoffMode::kStream, kBlocks);
  ASSERT_NE(rig.server, nullptr);
  ASSERT_EQ(rig.keys.size(), static_cast<size_t>(kBlocks));
  const int64_t id = rig.handoff->begin(rig.prompt, "", rig.destination());
  rig.hold(0);  // a prefix hit: never published during this prefill
  rig.hold(1);
  for (int i = 2; i < 9; ++i) rig.publish(i);  // chunks before the last
  // Sent while the prefill still runs: the receiver holds them before finish().
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == 7; }));
  for (int i = 9; i < kBlocks; ++i) rig.publish(i);  // the last chunk
  const KvHandoffResult r = rig.finish(id);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.blocks, kBlocks);
  EXPECT_GE(r.streamed, 7);
  EXPECT_LE(r.streamed, 10);
  EXPECT_EQ(r.bytes, int64_t{kBlocks} * static_cast<int64_t>(kBytes));
  EXPECT_GE(r.exposed_seconds, 0);
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == kBlocks; }));
  for (int i = 0; i < kBlocks; ++i) EXPECT_TRUE(rig.holds(i)) << i;
  EXPECT_EQ(rig.engine.reads, 2);  // only the two prefix hits went the slow way
  EXPECT_EQ(rig.streams.num_open(), 0u);
}

TEST(KvHandoffTest, AfterModeReadsEveryBlockAtFinish) {
  constexpr int kBlocks = 6;
  HandoffRig rig(KvHandoffMode::kAfter, kBlocks);
  const int64_t id = rig.handoff->begin(rig.prompt, "", rig.destination());
  for (int i = 0; i < kBlocks; ++i) rig.publish(i);
  EXPECT_EQ(rig.server->stats().blocks_accepted, 0);
  EXPECT_EQ(rig.streams.num_open(), 0u);  // after mode watches nothing
  const KvHandoffResult r = rig.finish(id);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.blocks, kBlocks);
  EXPECT_EQ(r.streamed, 0);
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == kBlocks; }));
  for (int i = 0; i < kBlocks; ++i) EXPECT_TRUE(rig.holds(i)) << i;
  EXPECT_EQ(rig.engine.reads, kBlocks);
}

TEST(KvHandoffTest, DroppedFrameMidStreamLeavesOnlyThatBlockMissing) {
  constexpr int kBlocks = 8;
  KvTransferFaults faults;
  faults.drop_frame = 3;
  HandoffRig rig(KvHandoffMode::kStream, kBlocks, faults);
  const int64_t id = rig.handoff->begin(rig.prompt, "", rig.destination());
  for (int i = 0; i < kBlocks; ++i) rig.publish(i);
  const KvHandoffResult r = rig.finish(id);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();  // the sender cannot tell
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == kBlocks - 1; }));
  for (int i = 0; i < kBlocks; ++i) EXPECT_EQ(rig.holds(i), i != 3) << i;
}

TEST(KvHandoffTest, MissingBlockStopsTheReadAndAbandonForgets) {
  HandoffRig rig(KvHandoffMode::kStream, 4);
  const int64_t id = rig.handoff->begin(rig.prompt, "", rig.destination());
  rig.hold(0);  // block 1 is gone (evicted): reading stops there
  rig.hold(2);
  rig.publish(3);
  const KvHandoffResult r = rig.finish(id);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.blocks, 2);  // 3 (streamed) and 0; not 2, after the gap
  const int64_t other = rig.handoff->begin(rig.prompt, "salt", rig.destination());
  EXPECT_EQ(rig.streams.num_open(), 1u);
  rig.handoff->abandon(other);
  EXPECT_TRUE(eventually([&] { return rig.streams.num_open() == 0; }));
}

TEST(KvHandoffTest, UnreachableDestinationFailsWithinTheDeadline) {
  HandoffRig rig(KvHandoffMode::kStream, 2);
  const std::string gone = rig.destination();
  rig.server.reset();
  const int64_t id = rig.handoff->begin(rig.prompt, "", gone);
  rig.publish(0);
  rig.publish(1);
  const KvHandoffResult r = rig.finish(id);
  EXPECT_FALSE(r.status.ok());
  const int64_t bad = rig.handoff->begin(rig.prompt, "", "no-port");
  rig.publish(0);
  EXPECT_EQ(rig.finish(bad).status.code(), StatusCode::kInvalidArgument);
}

// The KV-link probe: a link that stalls after two frames is found blocked (no block moves) and
// the handoff fails with link_blocked; a throttled link that keeps moving, slower than the probe
// window per handoff but faster per block, is only delayed and delivers everything.
TEST(KvHandoffTest, StalledLinkIsBlockedAndAThrottledOneOnlyDelayed) {
  constexpr int kBlocks = 10;
  {
    KvTransferFaults stall;
    stall.stall_after_frames = 2;
    HandoffRig rig(KvHandoffMode::kStream, kBlocks, stall, 300ms);
    const int64_t id = rig.handoff->begin(rig.prompt, "", rig.destination());
    for (int i = 0; i < kBlocks; ++i) rig.publish(i);
    const KvHandoffResult r = rig.finish(id);
    EXPECT_FALSE(r.status.ok());
    EXPECT_TRUE(r.link_blocked) << r.status.to_string();
  }
  {
    KvTransferFaults slow;
    slow.throttle_bytes_per_s = 10.0 * kBytes;  // a block every 100 ms, about 1 s in all
    HandoffRig rig(KvHandoffMode::kStream, kBlocks, slow, 500ms);
    const int64_t id = rig.handoff->begin(rig.prompt, "", rig.destination());
    for (int i = 0; i < kBlocks; ++i) rig.publish(i);
    const KvHandoffResult r = rig.finish(id);
    EXPECT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_FALSE(r.link_blocked);
    EXPECT_EQ(r.blocks, kBlocks);
    ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == kBlocks; }));
  }
}

TEST(KvHandoffTest, FaultSpecParses) {
  auto f = parse_kv_transfer_faults("drop:3,stall:7");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->drop_frame, 3);
  EXPECT_EQ(f->stall_after_frames, 7);
  EXPECT_EQ(f->corrupt_frame, -1);
  EXPECT_TRUE(parse_kv_transfer_faults("").ok());
  EXPECT_EQ(parse_kv_transfer_faults("corrupt:0")->corrupt_frame, 0);
  EXPECT_FALSE(parse_kv_transfer_faults("drop").ok());
  EXPECT_FALSE(parse_kv_transfer_faults("drop:x").ok());
  EXPECT_FALSE(parse_kv_transfer_faults("drop:-1").ok());
  EXPECT_FALSE(parse_kv_transfer_faults("lose:1").ok());
  EXPECT_EQ(parse_kv_transfer_faults("throttle:1000")->throttle_bytes_per_s, 1000.0);
  EXPECT_FALSE(parse_kv_transfer_faults("throttle:0").ok());
  EXPECT_EQ(parse_kv_handoff_mode("stream"), KvHandoffMode::kStream);
  EXPECT_EQ(parse_kv_handoff_mode("after"), KvHandoffMode::kAfter);
  EXPECT_FALSE(parse_kv_handoff_mode("later").has_value());
}

}  // namespace
}  // namespace keel::cluster
