// Scheduler, EPIC admission: a request linking compiled chunks gets its row links, and its
// LegoLink recomputes and the first chunk of its tail in the same plan (one forward pass), the
// tail directly after the recompute seq; a budget too small for both keeps them in order.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "engine/scheduler.h"
#include "sim_util.h"

namespace keel::engine {
namespace {

const kv::BlockHash kPicExtra = kv::request_extra_key(kv::BlockHash{3, 4}, "");

std::vector<int32_t> pic_iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

class SchedulerPicTest : public ::testing::Test {
 protected:
  void init(int32_t budget) {
    sc_ = SchedulerConfig{budget < 8 ? budget : 8, budget, 256, 0};
    kv_ = std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{64, 4, true});
    sched_ = std::make_unique<Scheduler>(sc_, kv_.get());
  }
  // Compiles `tokens` as a retained chunk request (as the engine does) and returns its key.
  RequestKey compile(RequestKey key, const std::vector<int32_t>& tokens) {
    sched_->add(key, tokens, 1, kPicExtra);
    for (int i = 0; i < 4 && sched_->find(key)->num_generated() == 0; ++i) run_step();
    sched_->retain(key);
    return key;
  }
  StepPlan run_step() {
    StepPlan plan = sched_->schedule();
    testing::expect_valid_plan(plan, sc_, kv_->block_size());
    std::vector<SeqResult> results;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.samples) results.push_back(SeqResult{s.key, 7});
    }
    sched_->update(plan, results);
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
    return plan;
  }
  // A prompt of a 6-token prefix, chunks A (8) and B (8) and a 10-token question, linking the
  // chunks with LegoLink-2; returns the first plan after its admission.
  StepPlan admit_linked() {
    const auto a = pic_iota_tokens(8, 200), b = pic_iota_tokens(8, 300);
    compile(10, a);
    compile(11, b);
    std::vector<int32_t> prompt = pic_iota_tokens(6, 100);
    prompt.insert(prompt.end(), a.begin(), a.end());
    prompt.insert(prompt.end(), b.begin(), b.end());
    const auto q = pic_iota_tokens(10, 400);
    prompt.insert(prompt.end(), q.begin(), q.end());
    PicState pic;
    pic.chunks = {{6, 8}, {14, 8}};
    pic.sources = {10, 11};
    pic.variant = *kv::PicVariant::parse("legolink-2");
    sched_->add(20, prompt, 4, kPicExtra, pic);
    return run_step();
  }

  SchedulerConfig sc_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(SchedulerPicTest, RecomputesAndTailShareOnePlan) {
  init(64);
  const StepPlan p = admit_linked();
  EXPECT_FALSE(p.links.empty());
  std::vector<const ScheduledSeq*> mine;
  for (const ScheduledSeq& s : p.seqs) {
    if (s.key == 20) mine.push_back(&s);
  }
  // The prefix (6) and the linked chunks end at 22; LegoLink-2 recomputes the first 2 tokens of
  // chunk B (chunk A follows the prefix and is linked too: it is not the leading chunk), then
  // the 10-token tail, all in this plan.
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_FALSE(mine[0]->positions.empty());
  EXPECT_TRUE(mine[1]->positions.empty());
  EXPECT_EQ(mine[1]->start_pos, 22);
  EXPECT_EQ(mine[1]->num_tokens, 10);
  EXPECT_TRUE(mine[1]->samples);
  EXPECT_FALSE(mine[0]->samples);
}

TEST_F(SchedulerPicTest, ASmallBudgetSplitsRecomputesFromTheTail) {
  init(3);
  const StepPlan p = admit_linked();
  int32_t n = 0;
  for (const ScheduledSeq& s : p.seqs) n += s.key == 20 ? s.num_tokens : 0;
  EXPECT_LE(n, 3);
  // Later steps finish the recomputes before any tail chunk, and the request completes.
  for (int i = 0; i < 20 && sched_->find(20) != nullptr && sched_->find(20)->num_generated() < 1;
       ++i) {
    run_step();
  }
  ASSERT_NE(sched_->find(20), nullptr);
  EXPECT_EQ(sched_->find(20)->num_generated(), 1);
}

}  // namespace
}  // namespace keel::engine
