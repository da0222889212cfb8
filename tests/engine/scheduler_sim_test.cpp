// Scheduler simulations with the FakeKvModel: many requests under memory pressure (preemption by
// recompute) in the plain and the schedule-ahead loop, with and without the prefix cache, must
// produce exactly the tokens of an unlimited-memory run; a crafted two-request squeeze preempts
// once (no thrash); a seeded randomized stress with arrivals, aborts and EOS checks every
// invariant after every schedule() and update().
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>

#include "engine/scheduler.h"
#include "sim_util.h"

namespace keel::engine {
namespace {

using testing::FakeKvModel;
using testing::SimEngine;
using testing::SimRequest;

constexpr int32_t kVocab = 50;
constexpr int32_t kBlockSize = 4;

// Prompts from a few shared stems (so prefixes repeat) with random tails and two salts.
SimRequest random_request(std::mt19937& rng, RequestKey key, int32_t max_stem, int32_t max_tail,
                          int32_t max_tokens) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  SimRequest r;
  r.key = key;
  const int stem = pick(0, 2);
  // One in four prompts is a bare block-aligned stem: identical prompts that are fully cached,
  // the copy-on-write case.
  const bool bare = pick(0, 3) == 0;
  const int stem_len = bare ? 4 * pick(1, max_stem / 4) : pick(0, max_stem);
  for (int i = 0; i < stem_len; ++i) r.prompt.push_back(1 + (stem * 7 + i) % (kVocab - 1));
  const int tail = bare ? 0 : pick(1, max_tail);
  for (int i = 0; i < tail; ++i) r.prompt.push_back(pick(1, kVocab - 1));
  r.max_tokens = pick(1, max_tokens);
  r.extra_key = kv::request_extra_key(kv::BlockHash{9, 9}, pick(0, 3) == 0 ? "tenant" : "");
  return r;
}

// Wires the per-plan and per-update checks into a SimEngine.
class Checker {
 public:
  Checker(Scheduler* sched, int32_t block_size) : sched_(sched), block_size_(block_size) {}
  void attach(SimEngine& engine) {
    engine.before_schedule = [this] { capture_decodes(); };
    engine.on_plan = [this](const StepPlan& plan) { check_plan(plan); };
    engine.on_update = [this] { check_state(); };
  }
  int64_t num_checks() const { return num_checks_; }

 private:
  // Running requests that want exactly one token (decodes) before this schedule().
  void capture_decodes() {
    decodes_.clear();
    for (RequestKey key : keys_seen_) {
      const RequestState* r = sched_->find(key);
      if (r == nullptr || r->phase != RequestPhase::kRunning) continue;
      if (r->effective_len() - r->num_scheduled == 1 &&
          r->num_generated() + r->num_pending_samples < r->max_tokens) {
        decodes_.insert(key);
      }
    }
  }
  void check_plan(const StepPlan& plan) {
    testing::expect_valid_plan(plan, sched_->config(), block_size_);
    bool seen_prefill = false;
    for (const ScheduledSeq& s : plan.seqs) {
      keys_seen_.insert(s.key);
      const bool decode = decodes_.contains(s.key);
      EXPECT_FALSE(decode && seen_prefill) << "decode of " << s.key << " after a prefill";
      if (decode) {
        EXPECT_EQ(s.num_tokens, 1);
      }
      seen_prefill |= !decode;
    }
    check_state();
  }
  void check_state() {
    const Status s = sched_->check_invariants();
    ASSERT_TRUE(s.ok()) << s.to_string();
    ++num_checks_;
  }

  Scheduler* sched_;
  int32_t block_size_;
  std::set<RequestKey> decodes_;
  std::set<RequestKey> keys_seen_;
  int64_t num_checks_ = 0;
};

struct SimCase {
  bool ahead;
  bool prefix;
};

class SchedulerSimTest : public ::testing::TestWithParam<SimCase> {};

TEST_P(SchedulerSimTest, AllRequestsCompleteWithTheTokensOfUnlimitedMemory) {
  const SimCase c = GetParam();
  const SchedulerConfig sc{6, 24, 256, 0};
  kv::KvCacheManager kv(kv::KvCacheConfig{24, kBlockSize, c.prefix});
  Scheduler sched(sc, &kv);
  FakeKvModel model(24, kBlockSize, kVocab);
  SimEngine engine(&sched, &model, /*eos=*/0, c.ahead);
  Checker checker(&sched, kBlockSize);
  checker.attach(engine);

  std::mt19937 rng(1234);
  std::vector<SimRequest> requests;
  for (RequestKey k = 1; k <= 30; ++k) {
    requests.push_back(random_request(rng, k, 24, 12, 20));
    ASSERT_TRUE(sched.validate_request(requests.back().prompt.size(), 20).ok());
    engine.submit(requests.back());
  }
  engine.run(5000);
  EXPECT_EQ(model.num_errors(), 0);
  for (const SimRequest& r : requests) {
    EXPECT_EQ(engine.outputs().at(r.key),
              testing::reference_output(r.prompt, r.max_tokens, kVocab, /*eos=*/0))
        << "request " << r.key;
  }
  EXPECT_GT(sched.num_preemptions(), 0) << "the pool is meant to be too small";
  EXPECT_FALSE(sched.has_requests());
  EXPECT_EQ(kv.num_free_blocks(), kv.num_blocks());
  if (c.prefix) {
    EXPECT_GT(kv.prefix_hits_tokens(), 0);
    EXPECT_GT(model.num_copies(), 0);
  } else {
    EXPECT_EQ(kv.prefix_hits_tokens(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Loops, SchedulerSimTest,
                         ::testing::Values(SimCase{false, true}, SimCase{false, false},
                                           SimCase{true, true}, SimCase{true, false}),
                         [](const ::testing::TestParamInfo<SimCase>& info) {
                           return std::string(info.param.ahead ? "Ahead" : "Plain") +
                                  (info.param.prefix ? "Prefix" : "NoPrefix");
                         });

// Two requests that each fit alone but not together. The newer one is preempted once; it is not
// re-admitted in small chunks while the older one still grows, so it is never preempted again
// (re-admitting it as soon as a chunk fits would preempt it three times here).
TEST(SchedulerNoThrashTest, SqueezedPairPreemptsOnce) {
  for (bool ahead : {false, true}) {
    for (bool prefix : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << (ahead ? "ahead" : "plain") << (prefix ? " prefix" : " no prefix"));
      const SchedulerConfig sc{2, 8, 256, 0};
      kv::KvCacheManager kv(kv::KvCacheConfig{10, kBlockSize, prefix});
      Scheduler sched(sc, &kv);
      FakeKvModel model(10, kBlockSize, kVocab);
      SimEngine engine(&sched, &model, /*eos=*/-1, ahead);
      Checker checker(&sched, kBlockSize);
      checker.attach(engine);
      std::vector<SimRequest> requests;
      for (RequestKey k = 1; k <= 2; ++k) {
        SimRequest r;
        r.key = k;
        for (int i = 0; i < 4; ++i) r.prompt.push_back(1 + (static_cast<int>(k) * 13 + i) % 40);
        r.max_tokens = 30;  // 33 positions: 9 blocks each, 10 in the pool
        requests.push_back(r);
        engine.submit(r);
      }
      engine.run(500);
      EXPECT_EQ(sched.num_preemptions(), 1);
      EXPECT_EQ(model.num_errors(), 0);
      for (const SimRequest& r : requests) {
        EXPECT_EQ(engine.outputs().at(r.key),
                  testing::reference_output(r.prompt, r.max_tokens, kVocab, -1));
      }
    }
  }
}

TEST(SchedulerStressTest, RandomArrivalsAbortsAndEosKeepInvariants) {
  int64_t total_preemptions = 0;
  int64_t total_copies = 0;
  for (uint32_t seed : {7u, 8u, 9u, 10u, 11u}) {
    for (bool ahead : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << (ahead ? " ahead" : " plain"));
      std::mt19937 rng(seed);
      auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      const SchedulerConfig sc{pick(2, 8), pick(8, 32), 256, 0};
      const int32_t num_blocks = pick(12, 20);
      kv::KvCacheManager kv(kv::KvCacheConfig{num_blocks, kBlockSize, true});
      Scheduler sched(sc, &kv);
      FakeKvModel model(num_blocks, kBlockSize, kVocab);
      SimEngine engine(&sched, &model, /*eos=*/0, ahead);
      Checker checker(&sched, kBlockSize);
      checker.attach(engine);

      std::map<RequestKey, SimRequest> submitted;
      std::set<RequestKey> aborted;
      RequestKey next_key = 1;
      for (int step = 0; step < 3000 && (next_key <= 60 || sched.has_requests()); ++step) {
        for (int n = pick(0, 2); n > 0 && next_key <= 60; --n) {
          SimRequest r = random_request(rng, next_key++, 16, 12, 20);
          if (!sched.validate_request(r.prompt.size(), r.max_tokens).ok()) continue;
          submitted[r.key] = r;
          engine.submit(r);
        }
        if (!engine.active().empty() && pick(0, 39) == 0) {
          auto it = engine.active().begin();
          std::advance(it, pick(0, static_cast<int>(engine.active().size()) - 1));
          const RequestKey victim = *it;
          aborted.insert(victim);
          engine.abort(victim);
          ASSERT_TRUE(sched.check_invariants().ok());
        }
        engine.step();
        if (::testing::Test::HasFatalFailure()) return;
      }
      EXPECT_FALSE(sched.has_requests());
      EXPECT_EQ(model.num_errors(), 0);
      EXPECT_EQ(kv.num_free_blocks(), kv.num_blocks());
      EXPECT_GT(checker.num_checks(), 100);
      total_preemptions += sched.num_preemptions();
      total_copies += model.num_copies();
      for (const auto& [key, r] : submitted) {
        if (aborted.contains(key)) continue;
        EXPECT_EQ(engine.outputs().at(key),
                  testing::reference_output(r.prompt, r.max_tokens, kVocab, 0))
            << "request " << key;
      }
    }
  }
  EXPECT_GT(total_preemptions, 10) << "the workload should exercise preemption";
  EXPECT_GT(total_copies, 0) << "the workload should exercise copy-on-write";
}

}  // namespace
}  // namespace keel::engine
