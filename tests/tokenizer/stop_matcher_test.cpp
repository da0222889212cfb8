// StopMatcher: matches across chunk boundaries, holds back possible stop prefixes, never releases
// a stop string, and gives the same result however the text is chunked (checked against a naive
// reference on random inputs).
#include "tokenizer/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace keel::tokenizer {
namespace {

struct Outcome {
  std::string released;
  std::optional<size_t> match;
};

Outcome run(const std::vector<std::string>& stops, const std::vector<std::string>& chunks) {
  StopMatcher m(stops);
  Outcome o;
  for (const std::string& c : chunks) {
    StopMatcher::Output out = m.push(c);
    o.released += out.text;
    if (out.match) {
      EXPECT_FALSE(o.match.has_value()) << "matched twice";
      o.match = out.match;
    }
  }
  o.released += m.flush();
  return o;
}

// Reference: the stop string whose first occurrence ends earliest (ties: the longest).
Outcome reference(const std::vector<std::string>& stops, const std::string& text) {
  Outcome best{text, std::nullopt};
  size_t best_end = std::string::npos;
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    const size_t pos = text.find(stops[i]);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stops[i].size();
    if (best_end == std::string::npos || end < best_end ||
        (end == best_end && stops[i].size() > stops[*best.match].size())) {
      best_end = end;
      best = Outcome{text.substr(0, pos), i};
    }
  }
  return best;
}

TEST(StopMatcherTest, NoStopsReleasesEverythingImmediately) {
  StopMatcher m({});
  EXPECT_EQ(m.push("Hello").text, "Hello");
  EXPECT_EQ(m.push(" world").text, " world");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcherTest, MatchInsideOneChunkReleasesOnlyThePrefix) {
  StopMatcher m({"STOP"});
  StopMatcher::Output out = m.push("Hello STOP world");
  EXPECT_EQ(out.text, "Hello ");
  ASSERT_TRUE(out.match.has_value());
  EXPECT_EQ(*out.match, 0u);
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.push("more").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcherTest, HoldsBackAPossibleStopPrefixAcrossChunks) {
  StopMatcher m({"STOP"});
  StopMatcher::Output a = m.push("Hello S");
  EXPECT_EQ(a.text, "Hello ");
  EXPECT_EQ(m.held_bytes(), 1u);
  StopMatcher::Output b = m.push("T");
  EXPECT_EQ(b.text, "");
  EXPECT_EQ(m.held_bytes(), 2u);
  StopMatcher::Output c = m.push("OP and more");
  EXPECT_EQ(c.text, "");
  ASSERT_TRUE(c.match.has_value());
}

TEST(StopMatcherTest, ReleasesAFalseStartOnceItCannotMatch) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST").text, "");
  EXPECT_EQ(m.push("ART").text, "START");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, OverlappingSelfPrefixIsFound) {
  EXPECT_EQ(run({"aab"}, {"a", "a", "a", "b", "c"}).released, "a");
  EXPECT_EQ(run({"abab"}, {"aba", "bab"}).released, "");
  EXPECT_EQ(run({"abab"}, {"abaa", "bab", "ab"}).released, "aba");
}

TEST(StopMatcherTest, FirstCompletedStopWinsAndTiesPreferTheLongest) {
  Outcome o = run({"abcd", "bc"}, {"abcd"});
  EXPECT_EQ(o.released, "a");
  EXPECT_EQ(o.match, 1u);
  o = run({"cd", "bcd"}, {"ab", "cd"});
  EXPECT_EQ(o.released, "a");
  EXPECT_EQ(o.match, 1u);
}

TEST(StopMatcherTest, FlushReleasesHeldTextWhenTheStreamEnds) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("the end ST").text, "the end ");
  EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcherTest, EmptyStopStringsAreIgnored) {
  Outcome o = run({"", "x"}, {"abc"});
  EXPECT_EQ(o.released, "abc");
  EXPECT_FALSE(o.match.has_value());
  o = run({"", "b"}, {"abc"});
  EXPECT_EQ(o.match, 1u);
}

TEST(StopMatcherTest, Utf8TextIsCutOnCharacterBoundaries) {
  // "é" is C3 A9; the stop string starts with it, so "caf" is released and "é" held.
  StopMatcher m({"\xC3\xA9!"});
  EXPECT_EQ(m.push("caf").text, "caf");
  EXPECT_EQ(m.push("\xC3\xA9").text, "");
  StopMatcher::Output out = m.push("!");
  EXPECT_TRUE(out.match.has_value());
  EXPECT_EQ(out.text, "");
}

TEST(StopMatcherTest, ResultDoesNotDependOnChunkingRandomized) {
  std::mt19937 rng(1234);
  auto rand_string = [&](size_t max_len) {
    std::string s(std::uniform_int_distribution<size_t>(0, max_len)(rng), 'a');
    for (char& c : s) c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng));
    return s;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<std::string> stops;
    const int n = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < n; ++i) stops.push_back(rand_string(4));
    const std::string text = rand_string(24);
    std::vector<std::string> chunks;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::uniform_int_distribution<size_t>(1, 5)(rng);
      chunks.push_back(text.substr(pos, len));
      pos += len;
    }
    const Outcome want = reference(stops, text);
    const Outcome got = run(stops, chunks);
    ASSERT_EQ(got.released, want.released) << "text " << text << " iter " << iter;
    ASSERT_EQ(got.match, want.match) << "text " << text << " iter " << iter;
    const Outcome whole = run(stops, {text});
    ASSERT_EQ(whole.released, want.released);
  }
}

}  // namespace
}  // namespace keel::tokenizer
