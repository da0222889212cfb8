// Scheduler tests (plain engine loop): configuration, prefill then decode, chunked prefill,
// decodes before prefills within the budget, max_num_seqs, FCFS, prefix-cache hits and
// copy-on-write at admission, and abort in every state. No model: tokens are made up or come from
// the FakeKvModel of sim_util.h.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "sim_util.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

Tokens iota_tokens(int32_t n, int32_t first = 100) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

const kv::BlockHash kExtra = kv::request_extra_key(kv::BlockHash{3, 4}, "");

class SchedulerTest : public ::testing::Test {
 protected:
  void init(SchedulerConfig sc, kv::KvCacheConfig kc) {
    sc_ = sc;
    kv_ = std::make_unique<kv::KvCacheManager>(kc);
    sched_ = std::make_unique<Scheduler>(sc, kv_.get());
  }
  void init_default(int32_t num_blocks = 64, int32_t budget = 64, int32_t max_seqs = 8) {
    init(SchedulerConfig{max_seqs, budget, 256, 0}, kv::KvCacheConfig{num_blocks, 4, true});
  }
  StepPlan schedule() {
    StepPlan plan = sched_->schedule();
    testing::expect_valid_plan(plan, sc_, kv_->block_size());
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
    return plan;
  }
  // Updates with `token` for every sampling seq.
  void update(const StepPlan& plan, int32_t token = 7) {
    std::vector<SeqResult> results;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.samples) results.push_back(SeqResult{s.key, token});
    }
    sched_->update(plan, results);
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
  }
  void add(RequestKey key, Tokens prompt, int32_t max_tokens = 16) {
    sched_->add(key, std::move(prompt), max_tokens, kExtra);
  }
  static const ScheduledSeq* seq_of(const StepPlan& plan, RequestKey key) {
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.key == key) return &s;
    }
    return nullptr;
  }

  SchedulerConfig sc_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

TEST(SchedulerConfigTest, Validate) {
  EXPECT_TRUE(SchedulerConfig{}.validate().ok());
  EXPECT_FALSE((SchedulerConfig{0, 512, 256, 0}).validate().ok());
  EXPECT_FALSE((SchedulerConfig{16, 0, 256, 0}).validate().ok());
  EXPECT_FALSE((SchedulerConfig{16, 8, 256, 0}).validate().ok());  // budget < max_num_seqs
  EXPECT_FALSE((SchedulerConfig{16, 512, 0, 0}).validate().ok());
  EXPECT_FALSE((SchedulerConfig{16, 512, 256, -1}).validate().ok());
}

TEST_F(SchedulerTest, ValidateRequest) {
  init(SchedulerConfig{4, 64, 256, 32}, kv::KvCacheConfig{4, 4, true});
  EXPECT_TRUE(sched_->validate_request(8, 8).ok());
  EXPECT_EQ(sched_->validate_request(0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->validate_request(8, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->validate_request(30, 3).code(), StatusCode::kOutOfRange);  // > max_model_len
  // 4 blocks of 4 hold 16 positions; the last generated token needs none.
  EXPECT_TRUE(sched_->validate_request(8, 9).ok());
  const Status s = sched_->validate_request(8, 10);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("5 KV blocks"), std::string::npos) << s.message();
}

TEST_F(SchedulerTest, PrefillThenDecodeThenDone) {
  init_default(16);
  add(1, {10, 11, 12, 13, 14}, 3);
  EXPECT_EQ(sched_->num_waiting(), 1u);
  StepPlan p0 = schedule();
  ASSERT_EQ(p0.seqs.size(), 1u);
  EXPECT_EQ(p0.step_id, 0);
  EXPECT_EQ(p0.seqs[0].start_pos, 0);
  EXPECT_EQ(p0.seqs[0].num_tokens, 5);
  EXPECT_TRUE(p0.seqs[0].samples);
  EXPECT_EQ(p0.seqs[0].tokens, (Tokens{10, 11, 12, 13, 14}));
  EXPECT_EQ(p0.seqs[0].block_table.size(), 2u);
  EXPECT_EQ(sched_->num_running(), 1u);
  update(p0, 20);

  StepPlan p1 = schedule();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].start_pos, 5);
  EXPECT_EQ(p1.seqs[0].num_tokens, 1);
  EXPECT_EQ(p1.seqs[0].tokens, (Tokens{20}));
  EXPECT_TRUE(p1.seqs[0].samples);
  update(p1, 21);
  StepPlan p2 = schedule();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].tokens, (Tokens{21}));
  update(p2, 22);
  // Three tokens generated = max_tokens: nothing more to compute until the caller finishes it.
  EXPECT_TRUE(schedule().empty());
  EXPECT_EQ(sched_->find(1)->tokens, (Tokens{10, 11, 12, 13, 14, 20, 21, 22}));
  EXPECT_EQ(sched_->find(1)->num_computed, 7);
  sched_->finish(1);
  EXPECT_FALSE(sched_->has_requests());
  EXPECT_EQ(sched_->find(1), nullptr);
  EXPECT_EQ(kv_->num_free_blocks(), 16);
}

TEST_F(SchedulerTest, ChunkedPrefillOfALongPrompt) {
  init_default(64, /*budget=*/16, /*max_seqs=*/4);
  add(1, iota_tokens(40), 4);
  const int32_t expected[][3] = {{0, 16, 0}, {16, 16, 0}, {32, 8, 1}};
  for (const auto& e : expected) {
    StepPlan p = schedule();
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].start_pos, e[0]);
    EXPECT_EQ(p.seqs[0].num_tokens, e[1]);
    EXPECT_EQ(p.seqs[0].samples, e[2] == 1);
    EXPECT_EQ(p.seqs[0].tokens, iota_tokens(e[1], 100 + e[0]));
    EXPECT_EQ(p.seqs[0].block_table.size(), static_cast<size_t>((e[0] + e[1] + 3) / 4));
    update(p);
  }
  StepPlan d = schedule();
  ASSERT_EQ(d.seqs.size(), 1u);
  EXPECT_EQ(d.seqs[0].start_pos, 40);
  EXPECT_EQ(d.seqs[0].num_tokens, 1);
}

TEST_F(SchedulerTest, DecodesComeFirstAndPrefillsTakeTheRestOfTheBudget) {
  init_default(64, /*budget=*/8, /*max_seqs=*/4);
  add(1, {1, 2});
  add(2, {3});
  add(3, {4, 5});
  StepPlan p0 = schedule();
  EXPECT_EQ(p0.seqs.size(), 3u);
  EXPECT_EQ(p0.num_tokens(), 5);
  update(p0);
  add(4, iota_tokens(20));
  StepPlan p1 = schedule();
  ASSERT_EQ(p1.seqs.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p1.seqs[i].key, i + 1);
    EXPECT_EQ(p1.seqs[i].num_tokens, 1);
    EXPECT_TRUE(p1.seqs[i].samples);
  }
  EXPECT_EQ(p1.seqs[3].key, 4);
  EXPECT_EQ(p1.seqs[3].num_tokens, 5);  // 8 - 3 decodes
  EXPECT_FALSE(p1.seqs[3].samples);
  EXPECT_EQ(p1.num_tokens(), 8);
  update(p1);
  // Next step: same split; the partial prefill continues after the decodes.
  StepPlan p2 = schedule();
  ASSERT_EQ(p2.seqs.size(), 4u);
  EXPECT_EQ(p2.seqs[3].key, 4);
  EXPECT_EQ(p2.seqs[3].start_pos, 5);
  EXPECT_EQ(p2.seqs[3].num_tokens, 5);
}

// With a prefill budget, a step that decodes takes at most that many prompt tokens in all
// (partial prefills and admissions); a step without decodes still takes the whole token budget.
TEST_F(SchedulerTest, PrefillBudgetBoundsPromptTokensOnlyInStepsThatDecode) {
  init_default(64, /*budget=*/32, /*max_seqs=*/4);
  sched_->set_prefill_budget(5);
  add(1, iota_tokens(40));
  StepPlan p0 = schedule();  // nothing decodes yet: the whole budget
  ASSERT_EQ(p0.seqs.size(), 1u);
  EXPECT_EQ(p0.seqs[0].num_tokens, 32);
  update(p0);
  StepPlan p1 = schedule();
  EXPECT_EQ(p1.num_tokens(), 8);  // the rest of the prompt
  update(p1);
  add(2, iota_tokens(30, 500));
  add(3, iota_tokens(30, 900));
  StepPlan p2 = schedule();  // request 1 decodes: 5 prompt tokens for the newcomers in all
  ASSERT_EQ(p2.seqs.size(), 2u);
  EXPECT_EQ(p2.seqs[0].key, 1);
  EXPECT_EQ(p2.seqs[0].num_tokens, 1);
  EXPECT_EQ(p2.seqs[1].key, 2);
  EXPECT_EQ(p2.seqs[1].num_tokens, 5);
  update(p2);
  StepPlan p3 = schedule();
  int32_t prompt_tokens = 0;
  for (const ScheduledSeq& s : p3.seqs) prompt_tokens += s.key == 1 ? 0 : s.num_tokens;
  EXPECT_EQ(prompt_tokens, 5);
}

TEST_F(SchedulerTest, AtMostMaxNumSeqsRun) {
  init_default(64, 64, /*max_seqs=*/2);
  for (RequestKey k = 1; k <= 4; ++k) add(k, {1, 2, 3}, 2);
  StepPlan p0 = schedule();
  EXPECT_EQ(p0.seqs.size(), 2u);
  EXPECT_EQ(sched_->num_running(), 2u);
  EXPECT_EQ(sched_->num_waiting(), 2u);
  update(p0);
  StepPlan p1 = schedule();
  EXPECT_EQ(p1.seqs.size(), 2u);  // still the same two (decoding)
  EXPECT_NE(seq_of(p1, 1), nullptr);
  EXPECT_NE(seq_of(p1, 2), nullptr);
  update(p1);
  sched_->finish(1);
  StepPlan p2 = schedule();
  EXPECT_NE(seq_of(p2, 3), nullptr);  // admitted in FCFS order: 3 before 4
  EXPECT_EQ(seq_of(p2, 4), nullptr);
  EXPECT_EQ(sched_->num_running(), 2u);
}

TEST_F(SchedulerTest, FcfsHeadOfLineIsNotOvertaken) {
  init_default(/*num_blocks=*/8);
  add(1, iota_tokens(20, 100), 4);  // 5 blocks
  add(2, iota_tokens(16, 200), 4);  // 4 blocks: does not fit beside request 1
  add(3, iota_tokens(2, 300), 4);   // would fit, but must not overtake request 2
  StepPlan p0 = schedule();
  ASSERT_EQ(p0.seqs.size(), 1u);
  EXPECT_EQ(p0.seqs[0].key, 1);
  EXPECT_EQ(sched_->num_waiting(), 2u);
  update(p0);
  StepPlan p1 = schedule();
  EXPECT_EQ(seq_of(p1, 3), nullptr);
  EXPECT_EQ(p1.seqs.size(), 1u);
  update(p1);
  sched_->finish(1);
  StepPlan p2 = schedule();
  ASSERT_EQ(p2.seqs.size(), 2u);
  EXPECT_EQ(p2.seqs[0].key, 2);
  EXPECT_EQ(p2.seqs[1].key, 3);
}

TEST_F(SchedulerTest, PrefixHitAtAdmissionCountsAsComputed) {
  init_default(32);
  const Tokens a = iota_tokens(10);
  add(1, a, 1);
  StepPlan p0 = schedule();
  update(p0);
  const std::vector<kv::BlockId> a_blocks = p0.seqs[0].block_table;
  sched_->finish(1);

  Tokens b(a.begin(), a.begin() + 8);
  b.insert(b.end(), {900, 901, 902});
  add(2, b, 1);
  StepPlan p1 = schedule();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].start_pos, 8);
  EXPECT_EQ(p1.seqs[0].num_tokens, 3);
  EXPECT_EQ(p1.seqs[0].tokens, (Tokens{900, 901, 902}));
  EXPECT_EQ(p1.seqs[0].block_table[0], a_blocks[0]);
  EXPECT_EQ(p1.seqs[0].block_table[1], a_blocks[1]);
  EXPECT_TRUE(p1.copies.empty());
  EXPECT_EQ(sched_->find(2)->num_cached_tokens, 8);
  EXPECT_EQ(sched_->find(2)->num_computed, 8);
  EXPECT_EQ(kv_->prefix_queries_tokens(), 10 + 11);
  EXPECT_EQ(kv_->prefix_hits_tokens(), 8);
}

TEST_F(SchedulerTest, GeneratedTokensArePublishedToo) {
  init_default(32);
  add(1, iota_tokens(6), 6);
  StepPlan p = schedule();
  int32_t token = 500;
  while (!p.empty()) {
    update(p, token++);
    p = schedule();
  }
  const Tokens all = sched_->find(1)->tokens;  // 6 prompt + 6 generated; 11 computed
  ASSERT_EQ(all.size(), 12u);
  sched_->finish(1);
  Tokens b = all;
  b.push_back(1);
  add(2, b, 1);
  StepPlan q = schedule();
  ASSERT_EQ(q.seqs.size(), 1u);
  EXPECT_EQ(q.seqs[0].start_pos, 8);  // blocks [0,4) and [4,8); [8,12) had 11 computed only
}

TEST_F(SchedulerTest, DisabledPrefixCacheComputesEverything) {
  init(SchedulerConfig{8, 64, 256, 0}, kv::KvCacheConfig{32, 4, false});
  add(1, iota_tokens(10), 1);
  StepPlan p0 = schedule();
  update(p0);
  sched_->finish(1);
  add(2, iota_tokens(10), 1);
  StepPlan p1 = schedule();
  EXPECT_EQ(p1.seqs[0].start_pos, 0);
  EXPECT_EQ(sched_->find(2)->num_cached_tokens, 0);
  EXPECT_EQ(kv_->prefix_queries_tokens(), 0);
}

TEST_F(SchedulerTest, CopyOnWriteWhenAFullyCachedPromptIsShared) {
  init_default(16);
  testing::FakeKvModel model(16, 4, 50);
  const Tokens prompt = iota_tokens(8);
  add(1, prompt, 4);
  StepPlan p0 = schedule();
  sched_->update(p0, model.execute(p0));  // request 1 keeps decoding
  add(2, prompt, 4);
  StepPlan p1 = schedule();
  const ScheduledSeq* s2 = seq_of(p1, 2);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(s2->start_pos, 7);  // never the whole prompt
  EXPECT_EQ(s2->num_tokens, 1);
  EXPECT_TRUE(s2->samples);
  ASSERT_EQ(p1.copies.size(), 1u);
  EXPECT_EQ(p1.copies[0].first, p0.seqs[0].block_table[1]);
  EXPECT_EQ(s2->block_table[0], p0.seqs[0].block_table[0]);  // shared
  EXPECT_EQ(s2->block_table[1], p1.copies[0].second);        // private copy
  const std::vector<SeqResult> r1 = model.execute(p1);
  sched_->update(p1, r1);
  EXPECT_EQ(model.num_errors(), 0);
  // Both continue from the same prompt: the same first token.
  const Tokens ref = testing::reference_output(prompt, 1, 50, -1);
  EXPECT_EQ(sched_->find(1)->tokens[8], ref[0]);
  EXPECT_EQ(sched_->find(2)->tokens[8], ref[0]);
  EXPECT_TRUE(sched_->check_invariants().ok());
}

// A partial prefill short of blocks shrinks its chunk, then stalls (keeping its blocks) rather
// than preempt an older request; the older request preempts it when it needs a block itself.
TEST_F(SchedulerTest, PrefillShrinksThenStallsThenYieldsToAnOlderRequest) {
  init_default(/*num_blocks=*/8, /*budget=*/16, /*max_seqs=*/4);
  add(1, iota_tokens(8, 100), 8);  // older: decodes
  add(2, iota_tokens(24, 200), 2);
  StepPlan p0 = schedule();
  ASSERT_EQ(p0.seqs.size(), 2u);
  EXPECT_EQ(p0.seqs[1].num_tokens, 8);  // 16 - 8
  update(p0);
  // Request 1 decodes at position 8 (a third block); request 2 wants 15 (= 16 - 1 decode) but
  // only 3 blocks are free: 12 tokens.
  StepPlan p1 = schedule();
  ASSERT_EQ(p1.seqs.size(), 2u);
  EXPECT_EQ(p1.seqs[0].key, 1);
  EXPECT_EQ(p1.seqs[1].key, 2);
  EXPECT_EQ(p1.seqs[1].start_pos, 8);
  EXPECT_EQ(p1.seqs[1].num_tokens, 12);
  EXPECT_EQ(kv_->num_free_blocks(), 0);
  update(p1);
  // No block left for request 2's last 4 tokens: it stalls; request 1 still fits its block.
  StepPlan p2 = schedule();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].key, 1);
  EXPECT_TRUE(p2.preempted.empty());
  update(p2);
  update(schedule());
  update(schedule());
  // Request 1 reaches position 12 and needs a fourth block: request 2 (newer) is preempted.
  StepPlan p5 = schedule();
  EXPECT_EQ(p5.preempted, (std::vector<RequestKey>{2}));
  ASSERT_EQ(p5.seqs.size(), 1u);
  EXPECT_EQ(p5.seqs[0].key, 1);
  EXPECT_EQ(p5.seqs[0].start_pos, 12);
  EXPECT_EQ(sched_->find(2)->phase, RequestPhase::kWaiting);
  EXPECT_EQ(sched_->num_preemptions(), 1);
}

class SchedulerAbortTest : public SchedulerTest {
 protected:
  void expect_all_free() {
    EXPECT_EQ(kv_->num_free_blocks(), kv_->num_blocks());
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
  }
};

TEST_F(SchedulerAbortTest, WhileWaiting) {
  init_default(16, 64, /*max_seqs=*/1);
  add(1, iota_tokens(4));
  add(2, iota_tokens(4));
  StepPlan p = schedule();
  sched_->abort(2);
  EXPECT_EQ(sched_->num_waiting(), 0u);
  EXPECT_EQ(sched_->find(2), nullptr);
  update(p);
  sched_->abort(1);
  expect_all_free();
  sched_->abort(1);  // unknown keys are ignored
  sched_->abort(99);
}

TEST_F(SchedulerAbortTest, WhilePartiallyPrefilled) {
  init_default(16, /*budget=*/8, 4);
  add(1, iota_tokens(30));
  StepPlan p = schedule();
  update(p);
  EXPECT_GT(kv_->num_blocks() - kv_->num_free_blocks(), 0);
  sched_->abort(1);
  expect_all_free();
  EXPECT_TRUE(schedule().empty());
}

TEST_F(SchedulerAbortTest, WhileItsChunkIsInFlight) {
  init_default(16, 8, 4);
  add(1, iota_tokens(30));
  StepPlan p = schedule();
  sched_->abort(1);  // before update: the update skips it
  expect_all_free();
  update(p);
  EXPECT_FALSE(sched_->has_requests());
}

TEST_F(SchedulerAbortTest, WhileDecoding) {
  init_default(16);
  add(1, iota_tokens(5));
  add(2, iota_tokens(5, 200));
  for (int i = 0; i < 3; ++i) update(schedule());
  sched_->abort(1);
  EXPECT_EQ(sched_->num_running(), 1u);
  StepPlan p = schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].key, 2);
  update(p);
  sched_->abort(2);
  expect_all_free();
}

}  // namespace
}  // namespace keel::engine

namespace keel::engine {
namespace {

// The engine's one record per request: a state the caller owns is scheduled in place (the
// caller sees its progress without a lookup), and after finish() the scheduler forgets it while
// the caller's record stays as it was.
TEST(SchedulerBorrowTest, ABorrowedStateIsScheduledInPlaceUntilFinish) {
  kv::KvCacheManager kv(kv::KvCacheConfig{16, 4, true});
  Scheduler sched(SchedulerConfig{4, 64, 16, 0}, &kv);
  RequestState r;
  r.key = 5;
  r.tokens = {1, 2, 3, 4, 5, 6};
  r.num_prompt_tokens = 6;
  r.max_tokens = 3;
  r.extra_key = kExtra;
  sched.add(&r);
  EXPECT_EQ(sched.find(5), &r);
  StepPlan plan = sched.schedule();
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(r.phase, RequestPhase::kRunning);
  EXPECT_EQ(r.num_scheduled, 6);
  const SeqResult token{5, 9};
  sched.update(plan, std::span(&token, 1));
  EXPECT_EQ(r.num_computed, 6);
  EXPECT_EQ(r.tokens.back(), 9);
  EXPECT_TRUE(sched.check_invariants().ok());
  sched.finish(5);
  EXPECT_EQ(sched.find(5), nullptr);
  EXPECT_TRUE(kv.block_table(5).empty());
  EXPECT_EQ(r.num_tokens(), 7);  // the caller's record is left as it was
  EXPECT_TRUE(sched.check_invariants().ok());
}

}  // namespace
}  // namespace keel::engine
