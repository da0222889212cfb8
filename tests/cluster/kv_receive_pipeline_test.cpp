// The KV transfer server's delivery stage without UCX: frames completed out of order reach the
// sink in the order their places were reserved; an abandoned place is skipped; a block whose
// payload fails its checksum is dropped and counted alone (the rest of its batch, and later
// frames, are delivered); weights chunks go to the weights sink; stop() delivers what completed
// in order and drops what waits behind a pending place; the backlog counts reserved bytes until
// delivered; pooled buffers are reused. Every wait is bounded.
#include "cluster/transfer/kv_receive_pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/test_support.h"

namespace keel::cluster {
namespace kv_receive_pipeline_test {  // named: the unity build joins test files
namespace {

using keel::testing::eventually;

std::vector<std::byte> payload_of(size_t n, int seed) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 7 + seed * 13) & 0xff);
  return p;
}

KvFrameHeader block_header(int idx, std::span<const std::byte> payload) {
  return make_frame_header({1, 2}, {static_cast<uint64_t>(idx), 5}, kv::kRootHash, 16, payload);
}

// The sink's record: block hashes (lo) in the order they arrived, and their bytes.
struct Recorder {
  std::mutex mu;
  std::vector<uint64_t> order;
  std::vector<std::vector<std::byte>> bytes;
  KvReceivePipeline::Sinks sinks() {
    KvReceivePipeline::Sinks s;
    s.kv = [this](const KvFrameHeader& h, std::span<const std::byte> p) {
      std::lock_guard lock(mu);
      order.push_back(h.block_hash.lo);
      bytes.emplace_back(p.begin(), p.end());
    };
    s.weights = [this](const WeightsFrameHeader& h, std::span<const std::byte> p) {
      std::lock_guard lock(mu);
      order.push_back(1000 + h.offset);
      bytes.emplace_back(p.begin(), p.end());
    };
    return s;
  }
  std::vector<uint64_t> seen() {
    std::lock_guard lock(mu);
    return order;
  }
};

// A frame of one block, its payload copied into a pooled buffer (as the server receives it).
ReceivedFrame one_block(KvReceivePipeline& p, int idx, std::vector<std::byte> payload) {
  ReceivedFrame f{block_header(idx, payload), p.take_buffer(payload.size()), {}, {}};
  std::memcpy(f.buffer.bytes.get(), payload.data(), payload.size());
  f.payload = {f.buffer.bytes.get(), payload.size()};
  return f;
}

// A batch frame of blocks `first`.. with the given payloads, back to back in one buffer.
ReceivedFrame batch(KvReceivePipeline& p, int first,
                    const std::vector<std::vector<std::byte>>& payloads) {
  KvBatchHeader h;
  h.kv_identity = {1, 2};
  size_t total = 0;
  for (size_t i = 0; i < payloads.size(); ++i) {
    h.blocks.push_back(block_header(first + static_cast<int>(i), payloads[i]));
    total += payloads[i].size();
  }
  ReceivedFrame f{h, p.take_buffer(total), {}, {}};
  size_t at = 0;
  for (const auto& pl : payloads) {
    std::memcpy(f.buffer.bytes.get() + at, pl.data(), pl.size());
    at += pl.size();
  }
  f.payload = {f.buffer.bytes.get(), total};
  return f;
}

TEST(KvReceivePipelineTest, BlocksAreDeliveredInArrivalOrder) {
  Recorder rec;
  KvReceivePipeline p(rec.sinks(), {});
  // Five places; their frames complete in the order 3, 1, 4, 0, 2 (a batch of two at place 2).
  std::vector<uint64_t> t;
  for (int i = 0; i < 5; ++i) t.push_back(p.reserve(100));
  EXPECT_EQ(p.backlog_bytes(), 500u);
  p.complete(t[3], one_block(p, 30, payload_of(100, 3)));
  p.complete(t[1], one_block(p, 10, payload_of(100, 1)));
  p.complete(t[4], one_block(p, 40, payload_of(100, 4)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(rec.seen().empty());  // place 0 still pending: nothing may pass it
  p.complete(t[0], one_block(p, 0, payload_of(100, 0)));
  ASSERT_TRUE(eventually([&] { return rec.seen().size() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(rec.seen(), (std::vector<uint64_t>{0, 10}));  // place 2 pending
  p.complete(t[2], batch(p, 20, {payload_of(60, 20), payload_of(40, 21)}));
  ASSERT_TRUE(eventually([&] { return rec.seen().size() == 6; }));
  EXPECT_EQ(rec.seen(), (std::vector<uint64_t>{0, 10, 20, 21, 30, 40}));
  EXPECT_EQ(rec.bytes[2], payload_of(60, 20));
  EXPECT_EQ(rec.bytes[3], payload_of(40, 21));
  ASSERT_TRUE(eventually([&] { return p.backlog_bytes() == 0; }));
  const KvDeliveryStats s = p.stats();
  EXPECT_EQ(s.blocks_accepted, 6);
  EXPECT_EQ(s.bytes_accepted, 500);
  EXPECT_EQ(s.rejected_checksum, 0);
}

TEST(KvReceivePipelineTest, ABadChecksumFailsOnlyItsBlock) {
  Recorder rec;
  KvReceivePipeline p(rec.sinks(), {});
  // A batch of four whose block 2 was damaged after its checksum was taken.
  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < 4; ++i) payloads.push_back(payload_of(256, i));
  ReceivedFrame damaged = batch(p, 0, payloads);
  const_cast<std::byte*>(damaged.payload.data())[2 * 256 + 9] ^= std::byte{4};
  // Then a one-block frame whose payload is damaged, then an intact one.
  ReceivedFrame bad_single = one_block(p, 7, payload_of(64, 7));
  const_cast<std::byte*>(bad_single.payload.data())[0] ^= std::byte{1};
  const uint64_t a = p.reserve(1024), b = p.reserve(64), c = p.reserve(64);
  p.complete(a, std::move(damaged));
  p.complete(b, std::move(bad_single));
  p.complete(c, one_block(p, 8, payload_of(64, 8)));
  ASSERT_TRUE(eventually([&] { return p.stats().blocks_accepted == 4; }));
  EXPECT_EQ(rec.seen(), (std::vector<uint64_t>{0, 1, 3, 8}));
  EXPECT_EQ(p.stats().rejected_checksum, 2);
  EXPECT_EQ(p.stats().bytes_accepted, 3 * 256 + 64);
}

TEST(KvReceivePipelineTest, AbandonedPlacesAreSkippedAndWeightsGoToTheirSink) {
  Recorder rec;
  int delivered = 0;  // on_delivered runs on the pipeline's thread, once per place
  std::mutex mu;
  KvReceivePipeline p(rec.sinks(), [&] {
    std::lock_guard lock(mu);
    ++delivered;
  });
  const auto chunk = payload_of(300, 5);
  WeightsFrameHeader w;
  w.stream_identity = {3, 4};
  w.offset = 7;
  w.entry_bytes = 307;
  w.payload_bytes = chunk.size();
  w.payload_checksum = frame_payload_checksum(chunk);
  const uint64_t lost = p.reserve(100), kept = p.reserve(300), last = p.reserve(10);
  ReceivedFrame wf{w, p.take_buffer(chunk.size()), {}, {}};
  std::memcpy(wf.buffer.bytes.get(), chunk.data(), chunk.size());
  wf.payload = {wf.buffer.bytes.get(), chunk.size()};
  p.complete(kept, std::move(wf));
  p.complete(last, one_block(p, 9, payload_of(10, 9)));
  p.abandon(lost);  // its receive failed: the places behind it go on
  ASSERT_TRUE(eventually([&] { return rec.seen().size() == 2; }));
  EXPECT_EQ(rec.seen(), (std::vector<uint64_t>{1007, 9}));
  EXPECT_EQ(rec.bytes[0], chunk);
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return delivered == 3;
  }));
  EXPECT_EQ(p.backlog_bytes(), 0u);
}

TEST(KvReceivePipelineTest, StopDeliversTheCompletedPrefixAndDropsTheRest) {
  Recorder rec;
  auto p = std::make_unique<KvReceivePipeline>(rec.sinks(), std::function<void()>{});
  const uint64_t a = p->reserve(8), pending = p->reserve(8), c = p->reserve(8);
  p->complete(c, one_block(*p, 3, payload_of(8, 3)));  // behind the pending place
  p->complete(a, one_block(*p, 1, payload_of(8, 1)));
  ASSERT_TRUE(eventually([&] { return rec.seen().size() == 1; }));
  p->stop();
  EXPECT_EQ(rec.seen(), (std::vector<uint64_t>{1}));
  EXPECT_EQ(p->backlog_bytes(), 0u);
  // After stop, places and frames are dropped, never delivered.
  p->complete(pending, one_block(*p, 2, payload_of(8, 2)));
  const uint64_t late = p->reserve(8);
  p->complete(late, one_block(*p, 4, payload_of(8, 4)));
  p.reset();
  EXPECT_EQ(rec.seen(), (std::vector<uint64_t>{1}));
}

TEST(KvReceivePipelineTest, BuffersAreReused) {
  KvReceivePipeline p(KvReceivePipeline::Sinks{}, {});
  const uint64_t t = p.reserve(5000);
  ReceivedFrame f = one_block(p, 1, payload_of(5000, 1));
  const std::byte* first = f.buffer.bytes.get();
  EXPECT_GE(f.buffer.capacity, 5000u);
  p.complete(t, std::move(f));
  ASSERT_TRUE(eventually([&] { return p.stats().blocks_accepted == 1; }));
  ASSERT_TRUE(eventually([&] { return p.backlog_bytes() == 0; }));
  // The buffer came back to the pool and fits a smaller frame of the same size class.
  const PayloadBuffer again = p.take_buffer(4500);
  EXPECT_EQ(again.bytes.get(), first);
  EXPECT_GE(p.take_buffer(10).capacity, 10u);
}

}  // namespace
}  // namespace kv_receive_pipeline_test
}  // namespace keel::cluster
