// DraftModelRunner (draft-model speculation's drafter) with stories260K drafting for itself: its
// drafts are the draft model's greedy continuation computed from scratch; after a rejection it
// recomputes from the first token that differs and reuses the rows of accepted drafts (counted in
// tokens fed); several sequences in one call (batches split at max_batch_tokens) draft what each
// drafts alone; a small pool drops the least recently used sequence, and a sequence too long for
// it drafts nothing; drafts stop at the draft's context. The vocabulary check: a copy with the
// same vocabulary passes, others are refused with the difference named.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "draft/draft_model.h"
#include "draft/draft_model_runner.h"
#include "draft_test_util.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/random_model.h"
#include "quantized_copy.h"
#include "support/test_support.h"

namespace keel::draft {
namespace {

using Tokens = std::vector<int32_t>;

// The model's greedy continuation of `tokens`, k tokens, each from a fresh forward pass over the
// whole sequence (no KV reused).
Tokens greedy_from_scratch(const model::Model& m, kernels::Ops& ops, Tokens tokens, int32_t k) {
  Tokens out;
  for (int32_t i = 0; i < k; ++i) {
    const auto n = static_cast<int32_t>(tokens.size());
    const int32_t blocks = (n + 15) / 16;
    auto kv =
        model::KvStorage::create(model::KvLayout::for_model(m.hparams(), 16, DType::kF32), blocks);
    EXPECT_TRUE(kv.ok());
    model::Context ctx(m, n);
    model::Batch b;
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    for (int32_t j = 0; j < blocks; ++j) table[static_cast<size_t>(j)] = j;
    const int32_t seq = b.add_seq(table);
    for (int32_t p = 0; p < n; ++p) b.add(tokens[static_cast<size_t>(p)], p, seq, p + 1 == n);
    std::vector<float> logits;
    EXPECT_TRUE(ctx.forward(b, *kv, ops, &logits).ok());
    const auto t =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    tokens.push_back(t);
  }
  return out;
}

std::unique_ptr<DraftModelRunner> make_runner(const model::Model& m, DraftModelConfig c = {}) {
  auto r = DraftModelRunner::create(m, c);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// One job's drafts.
Tokens draft_one(DraftModelRunner& r, kernels::Ops& ops, int64_t id, const Tokens& tokens,
                 int32_t k) {
  std::vector<DraftJob> jobs(1);
  jobs[0].seq_id = id;
  jobs[0].tokens = tokens;
  jobs[0].k = k;
  EXPECT_TRUE(r.draft(jobs, ops).ok());
  return jobs[0].drafts;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const Tokens kPrompt = {1, 403, 407, 261, 378};

TEST(DraftModelRunnerTest, DraftsAreTheGreedyContinuationAndRejectionsRollBack) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  auto r = make_runner(*m);
  ASSERT_NE(r, nullptr);
  const Tokens d1 = draft_one(*r, t.ops, 7, kPrompt, 4);
  EXPECT_EQ(d1, greedy_from_scratch(*m, t.ops, kPrompt, 4));
  EXPECT_EQ(r->num_fed_tokens(), 5 + 3);  // the prompt, then d1[0..3) one at a time

  // Two drafts accepted, the third rejected: the target emitted another token instead.
  const int32_t other = (d1[2] + 1) % static_cast<int32_t>(m->hparams().n_vocab);
  const Tokens seq2 = concat(kPrompt, {d1[0], d1[1], other});
  const Tokens d2 = draft_one(*r, t.ops, 7, seq2, 4);
  EXPECT_EQ(d2, greedy_from_scratch(*m, t.ops, seq2, 4));
  EXPECT_EQ(r->num_fed_tokens(), 8 + 1 + 3);  // the accepted drafts' rows reused: `other` only

  // All four accepted and a bonus token: d2[3] was never fed, so it and the bonus are.
  const Tokens bonus = greedy_from_scratch(*m, t.ops, concat(seq2, d2), 1);
  const Tokens seq3 = concat(concat(seq2, d2), bonus);
  EXPECT_EQ(draft_one(*r, t.ops, 7, seq3, 4), greedy_from_scratch(*m, t.ops, seq3, 4));
  EXPECT_EQ(r->num_fed_tokens(), 12 + 2 + 3);

  // A sequence that changed early (the same id, another prompt) is recomputed from there.
  const Tokens seq4 = {1, 403, 300, 301};
  EXPECT_EQ(draft_one(*r, t.ops, 7, seq4, 2), greedy_from_scratch(*m, t.ops, seq4, 2));
  EXPECT_EQ(r->num_fed_tokens(), 17 + 2 + 1);
  EXPECT_EQ(r->num_sequences(), 1u);
  r->release(7);
  EXPECT_EQ(r->num_sequences(), 0u);
  EXPECT_EQ(r->num_free_blocks(), DraftModelConfig{}.num_blocks);
}

TEST(DraftModelRunnerTest, BatchedSequencesDraftWhatEachDraftsAlone) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  DraftModelConfig c;
  c.max_batch_tokens = 8;  // the long prompt straddles batches
  auto batched = make_runner(*m, c);
  ASSERT_NE(batched, nullptr);
  Tokens longer = {1};
  for (int i = 0; i < 3; ++i) longer.insert(longer.end(), {300, 301, 302, 303, 304, 305});
  const std::vector<Tokens> seqs = {kPrompt, longer, {1, 50}, {1, 403, 407}};
  const std::vector<int32_t> ks = {4, 3, 1, 16};
  for (int round = 0; round < 2; ++round) {  // the second round reuses every sequence's rows
    std::vector<Tokens> inputs = seqs;
    if (round == 1) {
      for (Tokens& s : inputs) s.push_back(260 + static_cast<int32_t>(s.size() % 7));
    }
    std::vector<DraftJob> jobs(inputs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].seq_id = static_cast<int64_t>(100 + i);
      jobs[i].tokens = inputs[i];
      jobs[i].k = ks[i];
    }
    ASSERT_TRUE(batched->draft(jobs, t.ops).ok());
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto alone = make_runner(*m);
      EXPECT_EQ(jobs[i].drafts, draft_one(*alone, t.ops, 1, inputs[i], ks[i]))
          << "round " << round << ", sequence " << i;
      EXPECT_EQ(jobs[i].drafts, greedy_from_scratch(*m, t.ops, inputs[i], ks[i]));
    }
  }
  EXPECT_EQ(batched->num_sequences(), seqs.size());
}

TEST(DraftModelRunnerTest, ASmallPoolDropsTheLeastRecentlyUsedSequence) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  DraftModelConfig c;
  c.block_size = 4;
  c.num_blocks = 6;  // 24 positions
  auto r = make_runner(*m, c);
  ASSERT_NE(r, nullptr);
  const Tokens a = {1, 403, 407, 261, 378, 300, 301, 302, 303, 304};  // 10 + 3 rows: 4 blocks
  const Tokens b = {1, 50, 51, 52, 53, 54};                           // 6 + 1 rows: 2 blocks
  EXPECT_EQ(draft_one(*r, t.ops, 1, a, 4).size(), 4u);
  EXPECT_EQ(draft_one(*r, t.ops, 2, b, 2).size(), 2u);
  EXPECT_EQ(r->num_free_blocks(), 0);
  EXPECT_EQ(r->num_sequences(), 2u);
  // c needs 2 blocks: a, the least recently used, goes; b stays.
  const Tokens c3 = {1, 60, 61, 62, 63};
  EXPECT_EQ(draft_one(*r, t.ops, 3, c3, 4), greedy_from_scratch(*m, t.ops, c3, 4));
  EXPECT_EQ(r->num_sequences(), 2u);
  const int64_t fed = r->num_fed_tokens();
  EXPECT_EQ(draft_one(*r, t.ops, 2, b, 2), greedy_from_scratch(*m, t.ops, b, 2));
  EXPECT_EQ(r->num_fed_tokens(), fed + 1 + 1);  // b kept its rows: its last token and a draft
  // More than the whole pool: no drafts, and nobody loses rows for it.
  Tokens huge(30, 300);
  huge[0] = 1;
  EXPECT_TRUE(draft_one(*r, t.ops, 4, huge, 2).empty());
  EXPECT_EQ(r->num_free_blocks(), 2);
  EXPECT_EQ(draft_one(*r, t.ops, 2, b, 2), greedy_from_scratch(*m, t.ops, b, 2));
  EXPECT_EQ(r->num_fed_tokens(), fed + 4);
  // a comes back: recomputed from scratch, the same drafts.
  EXPECT_EQ(draft_one(*r, t.ops, 1, a, 4), greedy_from_scratch(*m, t.ops, a, 4));
}

TEST(DraftModelRunnerTest, DraftsStopAtTheDraftModelsContext) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  DraftModelConfig c;
  c.num_blocks = 40;
  auto r = make_runner(*m, c);
  ASSERT_NE(r, nullptr);
  const auto n_ctx = static_cast<int32_t>(m->n_ctx());
  Tokens near_end(static_cast<size_t>(n_ctx - 2), 300);
  near_end[0] = 1;
  // Fed positions end at n_ctx − 1: the last token at n_ctx − 3, then two drafts fed → 3 drafts.
  EXPECT_EQ(draft_one(*r, t.ops, 1, near_end, 8).size(), 3u);
  Tokens full(static_cast<size_t>(n_ctx), 300);
  EXPECT_EQ(draft_one(*r, t.ops, 2, full, 4).size(), 1u);  // its last token at n_ctx − 1
  full.push_back(300);
  EXPECT_TRUE(draft_one(*r, t.ops, 3, full, 4).empty());
}

// A random model of stories260K's size with `vocab_from`'s vocabulary ("" = a generated byte
// vocabulary of n_vocab tokens).
std::string write_small_model(const std::string& dir, const std::string& name,
                              const std::string& vocab_from, int64_t n_vocab) {
  model::RandomModelSpec spec;
  spec.shape = model::ModelShape{"draft-test", 64,  2,        4,     2,     128,
                                 n_vocab,      256, 10000.0f, 1e-5f, false, false};
  spec.vocab_from = vocab_from;
  const std::string path = dir + "/" + name;
  ThreadPool pool(1);
  EXPECT_TRUE(model::write_random_model(spec, path, pool).ok());
  return path;
}

TEST(DraftModelVocabularyTest, OnlyTheTargetsVocabularyIsAccepted) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const std::string dir = testing::make_temp_dir("draft_vocab");
  // Its own vocabulary in another model: accepted (and a Q8_0 copy of the model itself).
  auto same = open_draft_model(write_small_model(dir, "same.gguf", KEEL_REPO_STORIES, 0), *m);
  EXPECT_TRUE(same.ok()) << same.error().to_string();
  ASSERT_TRUE(testing::write_q8_0_copy(KEEL_REPO_STORIES, dir + "/q8.gguf").ok());
  EXPECT_TRUE(open_draft_model(dir + "/q8.gguf", *m).ok());
  // 512 tokens, but other ones.
  const std::string bytes512 = write_small_model(dir, "bytes512.gguf", "", 512);
  auto other = open_draft_model(bytes512, *m);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.error().message().find("draft model " + bytes512 +
                                         ": its vocabulary differs from the target's"),
            std::string::npos)
      << other.error().message();
  // Another size.
  auto smaller = open_draft_model(write_small_model(dir, "bytes300.gguf", "", 300), *m);
  ASSERT_FALSE(smaller.ok());
  EXPECT_NE(smaller.error().message().find("tokens, the target has 512"), std::string::npos)
      << smaller.error().message();
  // Not there.
  EXPECT_FALSE(open_draft_model(dir + "/missing.gguf", *m).ok());
}

}  // namespace
}  // namespace keel::draft
