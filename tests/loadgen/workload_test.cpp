// Workload generation: lengths inside the range-ratio bounds, token ids inside the vocabulary,
// same seed → same prompts, shared-prefix groups that really share their prefix (and only it),
// and validation messages.
#include "loadgen/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace keel::loadgen {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(WorkloadTest, RandomTokenPromptsHaveExactLengthsWithoutRangeRatio) {
  WorkloadConfig c{.num_prompts = 20, .input_len = 64, .output_len = 16, .vocab_size = 100};
  auto w = generate_workload(c);
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  ASSERT_EQ(w->size(), 20u);
  for (const PromptSpec& p : *w) {
    EXPECT_EQ(p.token_ids.size(), 64u);
    EXPECT_EQ(p.prompt_len, 64);
    EXPECT_EQ(p.output_len, 16);
    EXPECT_TRUE(p.text.empty());
    EXPECT_EQ(p.group_idx, -1);
    for (int32_t id : p.token_ids) {
      EXPECT_GE(id, c.min_token_id);
      EXPECT_LT(id, c.vocab_size);
    }
  }
}

TEST(WorkloadTest, RangeRatioKeepsLengthsInBoundsAndSpreadsThem) {
  WorkloadConfig c{.num_prompts = 400, .input_len = 100, .output_len = 50, .range_ratio = 0.5};
  auto w = generate_workload(c);
  ASSERT_TRUE(w.ok());
  std::set<int64_t> in_lens, out_lens;
  for (const PromptSpec& p : *w) {
    EXPECT_GE(p.prompt_len, 50);
    EXPECT_LE(p.prompt_len, 150);
    EXPECT_EQ(static_cast<int64_t>(p.token_ids.size()), p.prompt_len);
    EXPECT_GE(p.output_len, 25);
    EXPECT_LE(p.output_len, 75);
    in_lens.insert(p.prompt_len);
    out_lens.insert(p.output_len);
  }
  EXPECT_GT(in_lens.size(), 50u);  // 101 possible values over 400 draws
  EXPECT_GT(out_lens.size(), 25u);
  EXPECT_LE(*in_lens.begin(), 60);  // both ends are reached roughly
  EXPECT_GE(*in_lens.rbegin(), 140);
}

TEST(WorkloadTest, LengthsNeverDropBelowOne) {
  WorkloadConfig c{.num_prompts = 200, .input_len = 1, .output_len = 1, .range_ratio = 0.99};
  auto w = generate_workload(c);
  ASSERT_TRUE(w.ok());
  for (const PromptSpec& p : *w) {
    EXPECT_GE(p.prompt_len, 1);
    EXPECT_GE(p.output_len, 1);
  }
}

TEST(WorkloadTest, SameSeedSamePromptsOtherSeedOtherPrompts) {
  WorkloadConfig c{.num_prompts = 10, .input_len = 32, .range_ratio = 0.3, .seed = 7};
  auto a = generate_workload(c);
  auto b = generate_workload(c);
  c.seed = 8;
  auto other = generate_workload(c);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].token_ids, (*b)[i].token_ids);
    EXPECT_EQ((*a)[i].output_len, (*b)[i].output_len);
  }
  EXPECT_NE((*a)[0].token_ids, (*other)[0].token_ids);
}

TEST(WorkloadTest, TextPromptsAreWordsFromTheList) {
  WorkloadConfig c{.format = PromptFormat::kText, .num_prompts = 5, .input_len = 40};
  auto w = generate_workload(c);
  ASSERT_TRUE(w.ok());
  const auto list = prompt_words();
  for (const PromptSpec& p : *w) {
    EXPECT_TRUE(p.token_ids.empty());
    auto words = words_of(p.text);
    EXPECT_EQ(words.size(), 40u);
    EXPECT_EQ(p.prompt_len, 40);
    for (const std::string& word : words) {
      EXPECT_NE(std::find(list.begin(), list.end(), word), list.end()) << word;
    }
  }
}

TEST(WorkloadTest, SharedPrefixGroupsShareExactlyTheirPrefix) {
  for (PromptFormat format : {PromptFormat::kTokenIds, PromptFormat::kText}) {
    WorkloadConfig c{.dataset = DatasetKind::kSharedPrefix,
                     .format = format,
                     .num_prompts = 30,
                     .num_groups = 3,
                     .prefix_len = 40,
                     .suffix_len = 10,
                     .seed = 3};
    auto w = generate_workload(c);
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    std::map<int64_t, std::vector<const PromptSpec*>> groups;
    for (const PromptSpec& p : *w) {
      EXPECT_EQ(p.prompt_len, 50);
      groups[p.group_idx].push_back(&p);
    }
    ASSERT_EQ(groups.size(), 3u);
    std::vector<std::vector<std::string>> prefixes;
    for (const auto& [g, members] : groups) {
      EXPECT_EQ(members.size(), 10u);  // spread evenly
      auto seq = [&](const PromptSpec* p) {
        if (format == PromptFormat::kText) return words_of(p->text);
        std::vector<std::string> ids;
        for (int32_t id : p->token_ids) ids.push_back(std::to_string(id));
        return ids;
      };
      const auto first = seq(members[0]);
      ASSERT_EQ(first.size(), 50u);
      const std::vector<std::string> prefix(first.begin(), first.begin() + 40);
      std::set<std::vector<std::string>> suffixes;
      for (const PromptSpec* p : members) {
        const auto s = seq(p);
        EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), s.begin()));
        suffixes.insert(std::vector<std::string>(s.begin() + 40, s.end()));
      }
      EXPECT_EQ(suffixes.size(), members.size());  // suffixes are unique
      prefixes.push_back(prefix);
    }
    EXPECT_NE(prefixes[0], prefixes[1]);
    EXPECT_NE(prefixes[1], prefixes[2]);
    // Groups are interleaved, not sent group after group.
    bool interleaved = false;
    for (size_t i = 1; i < 10; ++i) interleaved |= (*w)[i].group_idx != (*w)[0].group_idx;
    EXPECT_TRUE(interleaved);
  }
}

TEST(WorkloadTest, ValidationNamesTheField) {
  auto expect_bad = [](WorkloadConfig c, const std::string& needle) {
    Status st = c.validate();
    EXPECT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_FALSE(generate_workload(c).ok());
  };
  expect_bad({.num_prompts = 0}, "num-prompts");
  expect_bad({.input_len = 0}, "input-len");
  expect_bad({.output_len = 0}, "output-len");
  expect_bad({.range_ratio = 1.0}, "range-ratio");
  expect_bad({.range_ratio = -0.1}, "range-ratio");
  expect_bad({.vocab_size = 3}, "vocab-size");
  expect_bad({.dataset = DatasetKind::kSharedPrefix, .num_prompts = 4, .num_groups = 5},
             "num-groups");
  expect_bad({.dataset = DatasetKind::kSharedPrefix, .suffix_len = 0}, "suffix-len");
  const WorkloadConfig rag{.dataset = DatasetKind::kRag, .format = PromptFormat::kText};
  WorkloadConfig bad = rag;
  bad.rag_docs_per_request = 17;
  expect_bad(bad, "rag-docs-per-request");
  bad = rag;
  bad.rag_doc_len = 0;
  expect_bad(bad, "rag-doc-len");
  bad = rag;
  bad.format = PromptFormat::kTokenIds;
  expect_bad(bad, "text");
  EXPECT_TRUE((WorkloadConfig{.format = PromptFormat::kText, .vocab_size = 0}).validate().ok());
}

TEST(WorkloadTest, RagPromptsTakeDistinctDocumentsFromOnePool) {
  WorkloadConfig c{
      .dataset = DatasetKind::kRag, .format = PromptFormat::kText, .num_prompts = 40, .seed = 5};
  c.rag_num_docs = 6;
  c.rag_docs_per_request = 3;
  c.rag_doc_len = 20;
  c.rag_question_len = 4;
  auto w = generate_workload(c);
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  std::map<int64_t, std::string> pool;
  std::set<std::vector<int64_t>> orders;
  for (const PromptSpec& p : *w) {
    ASSERT_EQ(p.documents.size(), 3u);
    ASSERT_EQ(p.doc_ids.size(), 3u);
    EXPECT_EQ(std::set<int64_t>(p.doc_ids.begin(), p.doc_ids.end()).size(), 3u);  // distinct
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(words_of(p.documents[i]).size(), 20u);
      // The same document id is the same text in every prompt.
      auto [it, fresh] = pool.emplace(p.doc_ids[i], p.documents[i]);
      if (!fresh) {
        EXPECT_EQ(it->second, p.documents[i]);
      }
    }
    EXPECT_EQ(words_of(p.text).size(), 4u);
    EXPECT_EQ(p.prompt_len, 64);
    orders.insert(p.doc_ids);
  }
  EXPECT_EQ(pool.size(), 6u);
  EXPECT_GT(orders.size(), 20u);  // random selections and orders
  EXPECT_EQ(generate_workload(c)->front().documents, w->front().documents);  // seeded
}

}  // namespace
}  // namespace keel::loadgen
