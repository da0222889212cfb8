// Scheduler simulations with lower KV tiers: a pool too small for the workload's repeated
// prefixes evicts them, the FakeKvModel demotes their rows to a host tier (alone, or a small one
// over a disk tier) and the scheduler promotes them back, read on the transfer thread while the
// request waits as populating, in the plain and the schedule-ahead loop. Every request must produce
// exactly the tokens of an unlimited-memory run, no unwritten row may be read, the invariants hold
// after every schedule() and update(), and tier hits must actually have been used.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "core/file_system.h"
#include "engine/scheduler.h"
#include "engine/tier_transfer.h"
#include "kv/disk_tier.h"
#include "kv/host_tier.h"
#include "sim_util.h"
#include "support/test_support.h"

namespace keel::engine {
namespace {

using testing::FakeKvModel;
using testing::SimEngine;
using testing::SimRequest;

constexpr int32_t kSimVocab = 50;
constexpr int32_t kSimBlockSize = 4;

// Prompts from a few long stems (so block-aligned prefixes repeat) with random tails.
SimRequest stem_request(std::mt19937& rng, RequestKey key) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  SimRequest r;
  r.key = key;
  const int stem = pick(0, 3);
  for (int i = 0; i < 16; ++i) r.prompt.push_back(1 + (stem * 11 + i * 3) % (kSimVocab - 1));
  for (int i = 0, n = pick(1, 6); i < n; ++i) r.prompt.push_back(pick(1, kSimVocab - 1));
  r.max_tokens = pick(1, 6);
  r.extra_key = kv::request_extra_key(kv::BlockHash{9, 9}, "");
  return r;
}

struct TierCase {
  bool ahead;
  bool disk;  // a host tier too small for the workload over a disk tier
};

class SchedulerTiersSimTest : public ::testing::TestWithParam<TierCase> {};

TEST_P(SchedulerTiersSimTest, PromotedBlocksGiveTheTokensOfUnlimitedMemory) {
  const TierCase c = GetParam();
  const SchedulerConfig sc{2, 16, 256, 0};
  kv::KvCacheManager kv(kv::KvCacheConfig{14, kSimBlockSize, true, /*record_evictions=*/true});
  Scheduler sched(sc, &kv);
  FakeKvModel model(14, kSimBlockSize, kSimVocab);
  PosixFileSystem fs;
  std::unique_ptr<kv::TierStore> disk;
  if (c.disk) {
    kv::DiskTierConfig dc;
    dc.dir = keel::testing::make_temp_dir("sched_tiers_sim");
    dc.capacity_bytes = 1 << 20;
    dc.identity = {3, 4};
    dc.payload_bytes = model.payload_bytes();
    auto d = kv::DiskTier::open(&fs, dc);
    ASSERT_TRUE(d.ok()) << d.status().message();
    disk = std::move(*d);
  }
  const int64_t host_bytes = c.disk ? 4 * static_cast<int64_t>(model.payload_bytes()) : 1 << 20;
  kv::KvTiers tiers(std::make_unique<kv::HostTier>(host_bytes, model.payload_bytes()),
                    std::move(disk));
  TierTransfer transfer(&tiers, model.payload_bytes());
  sched.set_tiers(&tiers, model.payload_bytes(), &transfer);
  model.set_tiers(&tiers);
  SimEngine engine(&sched, &model, /*eos=*/0, c.ahead);
  engine.on_update = [&] { ASSERT_TRUE(sched.check_invariants().ok()); };

  std::mt19937 rng(77);
  std::vector<SimRequest> requests;
  for (RequestKey k = 1; k <= 60; ++k) {
    requests.push_back(stem_request(rng, k));
    engine.submit(requests.back());
    if (k % 3 == 0) engine.run(/*max_steps=*/1000000);  // let evictions and repeats interleave
  }
  engine.run(1000000);
  EXPECT_EQ(model.num_errors(), 0);
  for (const SimRequest& r : requests) {
    EXPECT_EQ(engine.outputs().at(r.key),
              testing::reference_output(r.prompt, r.max_tokens, kSimVocab, /*eos=*/0))
        << "request " << r.key;
  }
  EXPECT_GT(sched.tier_blocks_fetched(), 0) << "the workload is meant to hit the tier";
  EXPECT_GT(tiers.host()->stats().hits, 0);
  if (c.disk) {
    EXPECT_GT(tiers.disk()->stats().hits, 0) << "the small host tier is meant to spill";
  }
  EXPECT_FALSE(sched.has_requests());
  EXPECT_EQ(kv.num_free_blocks(), kv.num_blocks());
}

INSTANTIATE_TEST_SUITE_P(Loops, SchedulerTiersSimTest,
                         ::testing::Values(TierCase{false, false}, TierCase{true, false},
                                           TierCase{false, true}, TierCase{true, true}),
                         [](const ::testing::TestParamInfo<TierCase>& info) {
                           return std::string(info.param.ahead ? "Ahead" : "Plain") +
                                  (info.param.disk ? "HostAndDisk" : "Host");
                         });

}  // namespace
}  // namespace keel::engine
