// The n-gram (prompt-lookup) drafter and the drafter dispatch, on hand-made token sequences.
#include "engine/ngram_drafter.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/drafter.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

Tokens draft(const Tokens& tokens, int32_t min_n, int32_t max_n, int32_t max_drafts) {
  Tokens out = {99};  // cleared by the call
  ngram_draft(tokens, min_n, max_n, max_drafts, &out);
  return out;
}

TEST(NgramDrafterTest, ProposesWhatFollowedTheLongestMostRecentMatch) {
  // The last 2 tokens (7 8) occur at 1 and 5; the most recent one (5) is followed by 1 2.
  EXPECT_EQ(draft({5, 7, 8, 9, 4, 7, 8, 1, 2, 7, 8}, 1, 3, 4), (Tokens{1, 2, 7, 8}));
  // The longest n wins: the 3-gram (6 7 8) at 1 over the more recent 2-gram (7 8) at 5.
  EXPECT_EQ(draft({5, 6, 7, 8, 3, 7, 8, 1, 6, 7, 8}, 1, 3, 2), (Tokens{3, 7}));
  // With max n = 2 the 2-gram's most recent occurrence is used instead.
  EXPECT_EQ(draft({5, 6, 7, 8, 3, 7, 8, 1, 6, 7, 8}, 1, 2, 2), (Tokens{1, 6}));
}

TEST(NgramDrafterTest, StopsAtTheEndOfTheSequenceAndHonoursTheLimits) {
  EXPECT_EQ(draft({1, 2, 3, 1, 2}, 1, 3, 8), (Tokens{3, 1, 2}));  // fewer than asked
  EXPECT_EQ(draft({4, 4, 4, 4}, 1, 3, 5), (Tokens{4}));           // overlapping match
  EXPECT_EQ(draft({1, 2, 3, 1, 2}, 1, 3, 1), (Tokens{3}));
  EXPECT_EQ(draft({1, 2, 3, 1, 2}, 1, 3, 0), Tokens{});
  EXPECT_EQ(draft({1, 2, 3, 4, 5}, 1, 3, 4), Tokens{});  // nothing repeats
  EXPECT_EQ(draft({1, 2, 3, 1, 5}, 2, 3, 4), Tokens{});  // only a 1-gram would match
  EXPECT_EQ(draft({7}, 1, 3, 4), Tokens{});
  EXPECT_EQ(draft({}, 1, 3, 4), Tokens{});
}

TEST(NgramDrafterTest, DispatchFollowsTheMethodAndK) {
  const Tokens tokens = {1, 2, 3, 4, 1, 2};
  Tokens out = {99};
  SpeculativeParams p;
  const Tokens proposed = {7, 8, 9};
  draft_tokens(p, tokens, proposed, 8, &out);  // method none
  EXPECT_TRUE(out.empty());
  p.method = SpecMethod::kNgram;
  p.k = 2;
  draft_tokens(p, tokens, proposed, 8, &out);  // the proposal is the draft head's, not n-gram's
  EXPECT_EQ(out, (Tokens{3, 4}));
  draft_tokens(p, tokens, {}, 1, &out);
  EXPECT_EQ(out, (Tokens{3}));
}

TEST(NgramDrafterTest, DraftHeadTakesTheProposalUpToKAndTheRoom) {
  const Tokens tokens = {1, 2, 3, 4, 1, 2};
  const Tokens proposed = {7, 8, 9};
  Tokens out = {99};
  SpeculativeParams p{SpecMethod::kDraftHead, 2, 3, 1};
  draft_tokens(p, tokens, proposed, 8, &out);
  EXPECT_EQ(out, (Tokens{7, 8}));
  draft_tokens(p, tokens, proposed, 1, &out);
  EXPECT_EQ(out, (Tokens{7}));
  draft_tokens(p, tokens, proposed, 0, &out);
  EXPECT_TRUE(out.empty());
  draft_tokens(p, tokens, {}, 8, &out);  // no proposal: nothing (not n-gram's drafts)
  EXPECT_TRUE(out.empty());
  p.k = 8;
  draft_tokens(p, tokens, proposed, 8, &out);
  EXPECT_EQ(out, proposed);
  // The draft model's proposal is taken the same way.
  p = SpeculativeParams{SpecMethod::kDraftModel, 2, 3, 1};
  draft_tokens(p, tokens, proposed, 8, &out);
  EXPECT_EQ(out, (Tokens{7, 8}));
  draft_tokens(p, tokens, {}, 8, &out);
  EXPECT_TRUE(out.empty());
}

TEST(SpeculativeParamsTest, ValidateNamesTheField) {
  SpeculativeParams p{SpecMethod::kNgram, 4, 3, 1};
  EXPECT_TRUE(p.validate().ok());
  p.k = 0;
  EXPECT_NE(p.validate().message().find("speculative.k"), std::string::npos);
  p.k = kMaxSpecK + 1;
  EXPECT_FALSE(p.validate().ok());
  p = SpeculativeParams{SpecMethod::kNgram, 4, 1, 2};
  EXPECT_NE(p.validate().message().find("speculative.ngram_max"), std::string::npos);
  EXPECT_EQ(parse_spec_method("ngram"), SpecMethod::kNgram);
  EXPECT_EQ(parse_spec_method("eagle"), std::nullopt);
  EXPECT_EQ(parse_spec_method("draft-head"), SpecMethod::kDraftHead);
  EXPECT_EQ(spec_method_name(SpecMethod::kDraftHead), "draft-head");
  EXPECT_EQ(spec_method_name(SpecMethod::kNone), "none");
  EXPECT_EQ(parse_spec_method("draft-model"), SpecMethod::kDraftModel);
  EXPECT_EQ(spec_method_name(SpecMethod::kDraftModel), "draft-model");
}

}  // namespace
}  // namespace keel::engine
