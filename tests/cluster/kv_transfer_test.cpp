// The KV transfer service on loopback (UCX picks shared memory for a same-host peer): blocks
// streamed into a host tier arrive byte-equal; a foreign identity (also: the same model with
// another KV type, Q8_0 vs F16), a corrupted or dropped frame never reach the tier (and are
// counted); a stalled sender is cut off by the receiver's idle timeout, and its own flush ends at
// its deadline: neither side hangs; a throttled link still completes; shutting either end down
// mid-transfer is clean; blocks batched several to a message arrive in order, a damaged one
// rejected alone. Every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cluster/transfer/kv_batch_frame.h"
#include "cluster/transfer/kv_transfer_client.h"
#include "cluster/transfer/kv_transfer_server.h"
#include "engine/model_identity.h"
#include "kv/host_tier.h"
#include "support/test_support.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using keel::testing::eventually;

constexpr kv::BlockHash kIdentity{0x1111, 0x2222};

std::vector<std::byte> block_bytes(size_t n, int idx) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 131 + idx * 7 + 1) & 0xff);
  return p;
}

kv::BlockHash hash_of(int idx) { return {static_cast<uint64_t>(idx) + 100, 0xabc}; }

KvBlockToSend make_block(size_t n, int idx) {
  return {hash_of(idx), idx == 0 ? kv::kRootHash : hash_of(idx - 1), 16, block_bytes(n, idx)};
}

struct Rig {
  std::unique_ptr<kv::HostTier> tier;
  std::unique_ptr<KvTransferServer> server;

  explicit Rig(size_t payload_bytes, std::chrono::milliseconds idle = 30s,
               kv::BlockHash identity = kIdentity) {
    tier = std::make_unique<kv::HostTier>(int64_t{1} << 30, payload_bytes);
    KvTransferServerOptions o;
    o.kv_identity = identity;
    o.payload_bytes = payload_bytes;
    o.idle_timeout = idle;
    auto s = KvTransferServer::start(o, tier_store_sink(tier.get()));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) server = std::move(*s);
  }

  std::unique_ptr<KvTransferClient> client(KvTransferFaults faults = {},
                                           kv::BlockHash identity = kIdentity) const {
    KvTransferClientOptions o;
    o.port = server->port();
    o.kv_identity = identity;
    o.faults = faults;
    auto c = KvTransferClient::connect(o);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(*c) : nullptr;
  }

  bool holds(int idx, size_t n) const {
    std::vector<std::byte> out(n);
    if (!tier->get(hash_of(idx), out).ok()) return false;
    return out == block_bytes(n, idx);
  }
};

TEST(KvTransferTest, RoundTripIntoHostTier) {
  constexpr size_t kBytes = 720896;  // a TinyLlama block: 16 × 22 × 2 × 4 × 64 × 4 bytes
  constexpr int kBlocks = 24;
  Rig rig(kBytes);
  ASSERT_NE(rig.server, nullptr);
  EXPECT_NE(rig.server->port(), 0);
  auto client = rig.client();
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < kBlocks; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
  ASSERT_TRUE(client->flush(Clock::now() + 20s).ok());
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == kBlocks; }));
  for (int i = 0; i < kBlocks; ++i) EXPECT_TRUE(rig.holds(i, kBytes)) << i;
  const KvTransferServerStats s = rig.server->stats();
  EXPECT_EQ(s.bytes_accepted, int64_t{kBlocks} * static_cast<int64_t>(kBytes));
  EXPECT_EQ(s.rejected_checksum + s.rejected_identity + s.rejected_malformed, 0);
  EXPECT_EQ(s.connections_accepted, 1);
  EXPECT_EQ(client->stats().blocks_sent, kBlocks);
  // Small blocks go eagerly, not by rendezvous: the same checks hold.
  Rig small(1024);
  auto c2 = small.client();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(c2->send(make_block(1024, i)).ok());
  ASSERT_TRUE(c2->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return small.server->stats().blocks_accepted == 8; }));
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(small.holds(i, 1024)) << i;
}

TEST(KvTransferTest, SameHostGoesThroughSharedMemory) {
  if (std::getenv("UCX_TLS") != nullptr) GTEST_SKIP() << "UCX_TLS is set: UCX's choice is forced";
  Rig rig(4096);
  auto client = rig.client();
  ASSERT_NE(client, nullptr);
  const std::string lanes = client->describe_transport();
  const bool shm = lanes.find("sysv/") != std::string::npos ||
                   lanes.find("posix/") != std::string::npos ||
                   lanes.find("cma/") != std::string::npos;
  EXPECT_TRUE(shm) << lanes;
}

TEST(KvTransferTest, ForeignIdentityIsRejected) {
  constexpr size_t kBytes = 65536;
  Rig rig(kBytes);
  auto client = rig.client({}, kv::BlockHash{0x1111, 0x2223});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
  ASSERT_TRUE(client->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return rig.server->stats().rejected_identity == 4; }));
  EXPECT_EQ(rig.server->stats().blocks_accepted, 0);
  EXPECT_EQ(rig.tier->stats().blocks, 0);
}

// Weights travel on their own channel: a KV server drops weights chunks and a weights server
// drops KV blocks, as malformed, whatever their size (eager or rendezvous); a weights server hands
// its own chunks on with every field of their frame.
TEST(KvTransferTest, EachChannelDropsTheOthersFrames) {
  constexpr size_t kBytes = 65536;
  const auto chunk = [](size_t n, uint64_t offset) {
    WeightsChunkToSend w;
    w.stream_identity = {7, 8};
    w.offset = offset;
    w.entry_bytes = offset + n;
    w.entry_hash = 0xabc;
    w.stream_id = 3;
    w.payload = block_bytes(n, static_cast<int>(offset % 7));
    return w;
  };
  Rig kv(kBytes);
  auto to_kv = kv.client();
  ASSERT_NE(to_kv, nullptr);
  ASSERT_TRUE(to_kv->send_weights(chunk(kBytes, 0)).ok());
  ASSERT_TRUE(to_kv->send_weights(chunk(512, 0)).ok());
  ASSERT_TRUE(to_kv->send(make_block(kBytes, 0)).ok());
  ASSERT_TRUE(to_kv->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return kv.server->stats().blocks_accepted == 1; }));
  EXPECT_EQ(kv.server->stats().rejected_malformed, 2);
  EXPECT_TRUE(kv.holds(0, kBytes));

  std::mutex mu;
  std::vector<std::pair<WeightsFrameHeader, std::vector<std::byte>>> got;
  KvTransferServerOptions o;
  o.kv_identity = kIdentity;
  auto weights = KvTransferServer::start_weights(
      o, [&](const WeightsFrameHeader& h, std::span<const std::byte> p) {
        std::lock_guard lock(mu);
        got.emplace_back(h, std::vector<std::byte>(p.begin(), p.end()));
      });
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  KvTransferClientOptions co;
  co.port = (*weights)->port();
  co.kv_identity = kIdentity;
  auto to_weights = KvTransferClient::connect(co);
  ASSERT_TRUE(to_weights.ok()) << to_weights.status().to_string();
  ASSERT_TRUE((*to_weights)->send(make_block(kBytes, 1)).ok());
  ASSERT_TRUE((*to_weights)->send_weights(chunk(kBytes, 4096)).ok());
  ASSERT_TRUE((*to_weights)->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return (*weights)->stats().blocks_accepted == 1; }));
  EXPECT_EQ((*weights)->stats().rejected_malformed, 1);
  std::lock_guard lock(mu);
  ASSERT_EQ(got.size(), 1u);
  const WeightsFrameHeader& h = got[0].first;
  EXPECT_EQ(h.stream_identity, (kv::BlockHash{7, 8}));
  EXPECT_EQ(h.offset, 4096u);
  EXPECT_EQ(h.entry_bytes, 4096u + kBytes);
  EXPECT_EQ(h.entry_hash, 0xabcu);
  EXPECT_EQ(h.stream_id, 3u);
  EXPECT_EQ(got[0].second, chunk(kBytes, 4096).payload);
  // A chunk outside its entry is refused before it is queued.
  WeightsChunkToSend outside = chunk(100, 0);
  outside.entry_bytes = 99;
  EXPECT_EQ((*to_weights)->send_weights(std::move(outside)).code(), StatusCode::kInvalidArgument);
}

// A receiver with a Q8_0 KV cache refuses the frames of an F16 sender of the same model and block
// size: engine::kv_tier_identity names the KV type, so a Q8_0 block is never read as F16.
TEST(KvTransferTest, KvTypeMismatchIsRejected) {
  constexpr size_t kBytes = 5 * 2 * 16 * 34;  // a stories260K Q8_0 block
  const kv::BlockHash model{0x5151, 0x7272};
  Rig rig(kBytes, 30s, engine::kv_tier_identity(model, DType::kQ8_0, 16));
  auto client = rig.client({}, engine::kv_tier_identity(model, DType::kF16, 16));
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
  ASSERT_TRUE(client->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return rig.server->stats().rejected_identity == 3; }));
  EXPECT_EQ(rig.server->stats().blocks_accepted, 0);
  EXPECT_EQ(rig.tier->stats().blocks, 0);
  // The same sender with the receiver's identity gets through.
  auto same = rig.client({}, engine::kv_tier_identity(model, DType::kQ8_0, 16));
  ASSERT_NE(same, nullptr);
  ASSERT_TRUE(same->send(make_block(kBytes, 0)).ok());
  ASSERT_TRUE(same->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == 1; }));
  EXPECT_TRUE(rig.holds(0, kBytes));
}

TEST(KvTransferTest, WrongPayloadSizeIsRejected) {
  Rig rig(4096);
  auto client = rig.client();
  ASSERT_TRUE(client->send(make_block(4000, 0)).ok());
  ASSERT_TRUE(client->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return rig.server->stats().rejected_malformed == 1; }));
  EXPECT_EQ(rig.tier->stats().blocks, 0);
}

TEST(KvTransferTest, CorruptedAndDroppedFramesNeverReachTheTier) {
  constexpr size_t kBytes = 131072;
  for (const bool corrupt : {true, false}) {
    Rig rig(kBytes);
    KvTransferFaults faults;
    (corrupt ? faults.corrupt_frame : faults.drop_frame) = 2;
    auto client = rig.client(faults);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
    ASSERT_TRUE(client->flush(Clock::now() + 10s).ok());
    ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == 4; }));
    EXPECT_EQ(rig.server->stats().rejected_checksum, corrupt ? 1 : 0);
    EXPECT_EQ(client->stats().blocks_dropped, corrupt ? 0 : 1);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(rig.holds(i, kBytes), i != 2) << i;
  }
}

// Several blocks a message (batch frames, kv_batch_frame.h): every block reaches the sink in the
// order it was sent, a dropped block is missing and a damaged one is rejected alone — whether the
// client coalesced them or not (that depends on timing: only correctness is asserted).
TEST(KvTransferTest, BatchedBlocksArriveInOrderAndADamagedOneAlone) {
  constexpr size_t kBytes = 65536;
  constexpr int kBlocks = 24;
  std::mutex mu;
  std::vector<uint64_t> order;
  KvTransferServerOptions so;
  so.kv_identity = kIdentity;
  so.payload_bytes = kBytes;
  auto server =
      KvTransferServer::start(so, [&](const KvFrameHeader& h, std::span<const std::byte> p) {
        std::lock_guard lock(mu);
        if (p.size() == kBytes && std::vector<std::byte>(p.begin(), p.end()) ==
                                      block_bytes(kBytes, static_cast<int>(h.block_hash.lo) - 100))
          order.push_back(h.block_hash.lo - 100);
      });
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  KvTransferClientOptions co;
  co.port = (*server)->port();
  co.kv_identity = kIdentity;
  co.max_in_flight = 1;  // blocks queue behind the message in flight: they go together
  co.max_blocks_per_frame = 8;
  co.max_frame_bytes = 6 * kBytes;
  co.faults.drop_frame = 3;
  co.faults.corrupt_frame = 5;
  auto client = KvTransferClient::connect(co);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  for (int i = 0; i < kBlocks; ++i) ASSERT_TRUE((*client)->send(make_block(kBytes, i)).ok());
  ASSERT_TRUE((*client)->flush(Clock::now() + 20s).ok());
  ASSERT_TRUE(eventually([&] { return (*server)->stats().blocks_accepted == kBlocks - 2; }));
  const KvTransferServerStats s = (*server)->stats();
  EXPECT_EQ(s.rejected_checksum, 1);
  EXPECT_EQ(s.rejected_malformed + s.rejected_identity + s.receive_errors, 0);
  const KvTransferClientStats cs = (*client)->stats();
  EXPECT_EQ(cs.blocks_sent, kBlocks - 1);
  EXPECT_EQ(cs.blocks_dropped, 1);
  EXPECT_LE(cs.messages_sent, cs.blocks_sent);
  std::vector<uint64_t> expected;
  for (int i = 0; i < kBlocks; ++i) {
    if (i != 3 && i != 5) expected.push_back(static_cast<uint64_t>(i));
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(order, expected);
}

// Small blocks batched go eagerly (no rendezvous): the same frames, the same checks.
TEST(KvTransferTest, SmallBatchedBlocksGoEagerlyAndArriveWhole) {
  constexpr size_t kBytes = 512;
  Rig rig(kBytes);
  KvTransferClientOptions co;
  co.port = rig.server->port();
  co.kv_identity = kIdentity;
  co.max_in_flight = 1;
  co.max_blocks_per_frame = 8;
  auto client = KvTransferClient::connect(co);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  for (int i = 0; i < 24; ++i) ASSERT_TRUE((*client)->send(make_block(kBytes, i)).ok());
  ASSERT_TRUE((*client)->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == 24; }));
  for (int i = 0; i < 24; ++i) EXPECT_TRUE(rig.holds(i, kBytes)) << i;
  const KvTransferServerStats s = rig.server->stats();
  EXPECT_EQ(s.rejected_checksum + s.rejected_malformed + s.rejected_identity, 0);
}

TEST(KvTransferTest, StalledSenderTimesOutWithoutHanging) {
  constexpr size_t kBytes = 65536;
  Rig rig(kBytes, 300ms);
  KvTransferFaults faults;
  faults.stall_after_frames = 2;
  auto client = rig.client(faults);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
  // The receiver drops the silent connection after its idle timeout...
  ASSERT_TRUE(eventually([&] { return rig.server->stats().connections_timed_out == 1; }, 5s));
  EXPECT_EQ(rig.server->stats().blocks_accepted, 2);
  EXPECT_EQ(rig.server->stats().connections_open, 0);
  // ...and the sender's flush ends at its deadline (without UCX peer-failure detection, see
  // kKvTransferErrMode, the deadline is how a sender learns).
  const auto start = Clock::now();
  const Status flushed = client->flush(start + 500ms);
  EXPECT_EQ(flushed.code(), StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, 3s);
  // The receiver keeps serving other senders.
  auto next = rig.client();
  ASSERT_TRUE(next->send(make_block(kBytes, 7)).ok());
  ASSERT_TRUE(next->flush(Clock::now() + 10s).ok());
  ASSERT_TRUE(eventually([&] { return rig.holds(7, kBytes); }));
  EXPECT_FALSE(rig.holds(3, kBytes));
}

TEST(KvTransferTest, ThrottledLinkCompletes) {
  constexpr size_t kBytes = 262144;
  Rig rig(kBytes);
  KvTransferFaults faults;
  faults.throttle_bytes_per_s = 4e6;  // 8 × 256 KiB ≈ 2.1 MB → about half a second
  auto client = rig.client(faults);
  const auto start = Clock::now();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
  ASSERT_TRUE(client->flush(start + 20s).ok());
  EXPECT_GE(Clock::now() - start, 300ms);
  ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted == 8; }));
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(rig.holds(i, kBytes)) << i;
}

TEST(KvTransferTest, ShutdownWhileTransferringIsClean) {
  constexpr size_t kBytes = 720896;
  KvTransferFaults slow;
  // 32 blocks take 4.6 s at this rate: the reset below lands mid-stream even on a loaded host.
  slow.throttle_bytes_per_s = 5e6;
  {  // the receiver goes away mid-stream
    auto rig = std::make_unique<Rig>(kBytes);
    auto client = rig->client(slow);
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
    ASSERT_TRUE(eventually([&] { return rig->server->stats().blocks_accepted >= 2; }));
    rig.reset();
    EXPECT_FALSE(client->flush(Clock::now() + 10s).ok());
  }
  {  // the sender goes away mid-stream
    Rig rig(kBytes);
    auto client = rig.client(slow);
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(client->send(make_block(kBytes, i)).ok());
    ASSERT_TRUE(eventually([&] { return rig.server->stats().blocks_accepted >= 2; }));
    client.reset();
    ASSERT_TRUE(eventually([&] { return rig.server->stats().connections_open == 0; }));
    EXPECT_LT(rig.server->stats().blocks_accepted, 32);
  }
}

TEST(KvTransferTest, UnreachablePeerFailsTheConnect) {
  uint16_t port = 0;
  {
    Rig rig(1024);
    port = rig.server->port();
  }  // nothing listens there now
  KvTransferClientOptions o;
  o.port = port;
  o.kv_identity = kIdentity;
  o.connect_timeout = 2s;
  const auto start = Clock::now();
  auto client = KvTransferClient::connect(o);
  EXPECT_LT(Clock::now() - start, 4s);
  if (!client.ok()) {
    EXPECT_EQ(client.error().code(), StatusCode::kUnavailable);
    return;
  }
  (void)(*client)->send(make_block(1024, 0));
  EXPECT_FALSE((*client)->flush(Clock::now() + 1s).ok());
}

TEST(KvTransferTest, OptionsAreValidated) {
  KvTransferClientOptions c;
  EXPECT_FALSE(c.validate().ok());  // no port
  c.port = 1;
  EXPECT_TRUE(c.validate().ok());
  c.max_in_flight = 0;
  EXPECT_FALSE(c.validate().ok());
  c.max_in_flight = 8;
  c.max_blocks_per_frame = 0;
  EXPECT_FALSE(c.validate().ok());
  c.max_blocks_per_frame = static_cast<int>(kKvBatchMaxBlocks) + 1;
  EXPECT_FALSE(c.validate().ok());
  c.max_blocks_per_frame = static_cast<int>(kKvBatchMaxBlocks);
  EXPECT_TRUE(c.validate().ok());
  c.max_frame_bytes = 0;
  EXPECT_FALSE(c.validate().ok());
  c.max_frame_bytes = size_t{8} << 20;
  c.spin_window = std::chrono::microseconds(-1);
  EXPECT_FALSE(c.validate().ok());
  c.spin_window = std::chrono::microseconds(0);
  EXPECT_TRUE(c.validate().ok());
  KvTransferServerOptions s;
  EXPECT_TRUE(s.validate().ok());
  s.idle_timeout = 0ms;
  EXPECT_FALSE(s.validate().ok());
}

}  // namespace
}  // namespace keel::cluster
