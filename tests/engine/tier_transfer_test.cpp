// TierTransfer: reads come back through poll() (stopping at the first block no tier holds);
// demotions reach the tiers in order; when a slow tier lets demotions pile up beyond the cap,
// further ones are dropped and counted, and the queue drains once the tier moves again.
#include "engine/tier_transfer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kv/host_tier.h"
#include "support/test_support.h"

namespace keel::engine {
namespace {

constexpr size_t kPayload = 1024;

kv::BlockHash key(uint64_t i) { return {i, 7}; }

using keel::testing::eventually;

// A tier whose put() waits while a gate is closed, and counts the puts.
class GatedStore final : public kv::TierStore {
 public:
  void set_open(bool open) {
    {
      std::lock_guard lock(mu_);
      open_ = open;
    }
    cv_.notify_all();
  }
  int puts() const {
    std::lock_guard lock(mu_);
    return puts_;
  }
  int entered() const {  // put() calls started (including one waiting at the gate)
    std::lock_guard lock(mu_);
    return entered_;
  }
  std::string_view name() const override { return "gated"; }
  Status put(const kv::BlockHash&, std::span<const std::byte>,
             std::vector<kv::EvictedBlock>*) override {
    std::unique_lock lock(mu_);
    ++entered_;
    cv_.wait(lock, [this] { return open_; });
    ++puts_;
    return {};
  }
  Status get(const kv::BlockHash&, std::span<std::byte>) override {
    return Status::not_found("gated store holds nothing");
  }
  bool contains(const kv::BlockHash&) const override { return false; }
  void erase(const kv::BlockHash&) override {}
  kv::TierStats stats() const override { return {}; }
  Result<kv::TierCost> measure_read() override { return kv::TierCost{}; }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int puts_ = 0;
  int entered_ = 0;
};

TEST(TierTransferTest, ReadsComeBackUpToTheFirstMissingBlock) {
  kv::KvTiers tiers(std::make_unique<kv::HostTier>(8 * kPayload, kPayload), nullptr);
  tiers.demote(key(1), std::vector<std::byte>(kPayload, std::byte{1}));
  tiers.demote(key(2), std::vector<std::byte>(kPayload, std::byte{2}));
  TierTransfer transfer(&tiers, kPayload);
  transfer.submit(42, {key(1), key(2), key(3), key(1)});  // key 3 is held nowhere
  std::vector<TierTransfer::Done> done;
  ASSERT_TRUE(eventually([&] {
    for (auto& d : transfer.poll()) done.push_back(std::move(d));
    return !done.empty();
  }));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].key, 42);
  ASSERT_EQ(done[0].promotions.size(), 2u);
  EXPECT_EQ(done[0].promotions[0].payload, std::vector<std::byte>(kPayload, std::byte{1}));
  EXPECT_EQ(done[0].promotions[1].payload, std::vector<std::byte>(kPayload, std::byte{2}));
  EXPECT_TRUE(eventually([&] { return transfer.pending() == 0; }));
}

TEST(TierTransferTest, DemotionsBeyondTheCapAreDroppedAndCounted) {
  auto store = std::make_unique<GatedStore>();
  GatedStore* gated = store.get();
  kv::KvTiers tiers(std::move(store), nullptr);
  TierTransfer transfer(&tiers, kPayload, /*max_queued_demotion_bytes=*/3 * kPayload);
  gated->set_open(false);
  transfer.demote(key(1), std::vector<std::byte>(kPayload));  // taken by the worker, then blocks
  ASSERT_TRUE(eventually([&] { return gated->entered() == 1; }));
  for (uint64_t i = 2; i <= 6; ++i) transfer.demote(key(i), std::vector<std::byte>(kPayload));
  EXPECT_EQ(transfer.dropped_demotions(), 2);  // 3 queued (the cap), 2 dropped
  EXPECT_EQ(transfer.pending(), 4u);
  gated->set_open(true);
  EXPECT_TRUE(eventually([&] { return transfer.pending() == 0; }));
  EXPECT_EQ(gated->puts(), 4);
  transfer.demote(key(9), std::vector<std::byte>(kPayload));  // room again
  EXPECT_TRUE(eventually([&] { return gated->puts() == 5; }));
  EXPECT_EQ(transfer.dropped_demotions(), 2);
}

// submit(), demote() and poll() from three threads at once, as the engine thread and others may
// call them: every read comes back exactly once, with the payloads the tiers hold.
TEST(TierTransferTest, ConcurrentSubmitDemoteAndPoll) {
  // Room for every block: the demotions never evict the blocks being read.
  kv::KvTiers tiers(std::make_unique<kv::HostTier>(256 * kPayload, kPayload), nullptr);
  for (uint64_t i = 1; i <= 8; ++i) {
    tiers.demote(key(i), std::vector<std::byte>(kPayload, static_cast<std::byte>(i)));
  }
  TierTransfer transfer(&tiers, kPayload);
  constexpr int kReads = 200;
  std::thread reader([&] {
    for (int r = 0; r < kReads; ++r) transfer.submit(r, {key(1 + r % 8), key(1 + (r + 1) % 8)});
  });
  std::thread demoter([&] {
    for (uint64_t i = 100; i < 300; ++i) {
      transfer.demote(key(i), std::vector<std::byte>(kPayload, std::byte{9}));
    }
  });
  std::vector<int> seen(kReads);
  int done = 0;
  const bool all = eventually([&] {
    for (const TierTransfer::Done& d : transfer.poll()) {
      ++seen[static_cast<size_t>(d.key)];
      ++done;
      EXPECT_EQ(d.promotions.size(), 2u);
      for (size_t j = 0; j < d.promotions.size(); ++j) {
        const auto b = static_cast<std::byte>(1 + (d.key + static_cast<int64_t>(j)) % 8);
        EXPECT_EQ(d.promotions[j].payload, std::vector<std::byte>(kPayload, b));
      }
    }
    return done == kReads;
  });
  reader.join();
  demoter.join();
  ASSERT_TRUE(all) << done << " of " << kReads << " reads came back";
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_TRUE(eventually([&] { return transfer.pending() == 0; }));
}

}  // namespace
}  // namespace keel::engine
