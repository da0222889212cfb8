// StopStringDetector, the engine's stop-string rule, on a synthetic SPM vocabulary whose token
// boundaries the tests control: a stop string completes on the token that finishes it, across
// token boundaries and inside multi-byte characters made of byte-fallback tokens; the first to
// complete wins; text the decoder holds at the end of generation can complete one; after a match
// nothing else matches; resume() continues across the boundary with an earlier attempt's tokens.
#include "engine/stop_strings.h"

#include <gtest/gtest.h>

#include "../tokenizer/synthetic_vocab.h"

namespace keel::engine {
namespace {

class StopStringDetectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer::testing::SyntheticVocab v = tokenizer::testing::spm_base();
    const std::string space = "\xE2\x96\x81";  // SPM's "▁"
    the_ = v.add(space + "The");
    end_ = v.add(space + "end");
    st_ = v.add("ST");
    op_ = v.add("OP");
    auto tok = tokenizer::testing::load_tokenizer(v);
    ASSERT_TRUE(tok.ok()) << tok.error().to_string();
    tok_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok).value());
  }
  static int32_t byte(uint8_t b) { return 3 + b; }
  // The index of the first push that matched, and which stop string.
  std::pair<int, std::optional<int32_t>> run(std::vector<std::string> stops,
                                             const std::vector<int32_t>& ids) {
    StopStringDetector d(*tok_, std::move(stops));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (std::optional<int32_t> m = d.push(ids[i])) return {static_cast<int>(i), m};
    }
    return {-1, d.finish()};
  }
  int32_t the_ = 0, end_ = 0, st_ = 0, op_ = 0;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(StopStringDetectorTest, CompletesOnTheTokenThatFinishesTheString) {
  EXPECT_EQ(run({"STOP"}, {the_, end_, st_, op_, the_}),
            (std::pair<int, std::optional<int32_t>>{3, 0}));
  // Spanning a word boundary, with the leading space generated text keeps.
  EXPECT_EQ(run({"e end"}, {the_, end_}).first, 1);
  EXPECT_EQ(run({" The"}, {the_}).first, 0);
  EXPECT_EQ(run({"nowhere"}, {the_, end_, st_}), (std::pair<int, std::optional<int32_t>>{-1, {}}));
}

TEST_F(StopStringDetectorTest, MatchesInsideMultiByteCharacters) {
  // "é" is two byte-fallback tokens; "€" three. A stop string ending in a character completes
  // with the character's last byte, not before.
  const std::vector<int32_t> ids = {the_,       byte(0xC3), byte(0xA9), byte(0xE2),
                                    byte(0x82), byte(0xAC), end_};
  EXPECT_EQ(run({"\xC3\xA9"}, ids).first, 2);
  EXPECT_EQ(run({"The\xC3\xA9\xE2\x82\xAC"}, ids).first, 5);
  EXPECT_EQ(run({"\xE2\x82\xAC end"}, ids).first, 6);
}

TEST_F(StopStringDetectorTest, FirstToCompleteWinsAndNothingAfterIt) {
  EXPECT_EQ(run({"OP", "STO"}, {st_, op_}).second, 1);         // "STO" completes before "OP"
  EXPECT_EQ(run({"x", "TOP", "STOP"}, {st_, op_}).second, 2);  // same byte: the longer one
  StopStringDetector d(*tok_, {"ST", "The"});
  EXPECT_EQ(d.push(st_), 0);
  EXPECT_FALSE(d.push(the_).has_value());
  EXPECT_FALSE(d.finish().has_value());
}

TEST_F(StopStringDetectorTest, EndOfGenerationFlushCanComplete) {
  // A lone lead byte is held by the decoder until the end, where it becomes U+FFFD: a stop
  // string of U+FFFD completes only at finish().
  StopStringDetector d(*tok_, {"\xEF\xBF\xBD"});
  EXPECT_FALSE(d.push(the_).has_value());
  EXPECT_FALSE(d.push(byte(0xC3)).has_value());
  EXPECT_EQ(d.finish(), 0);
}

// A resumed request: the detector fed the earlier attempt's tokens through resume() then the
// rest through push() decides exactly as one fed everything through push() — a stop string or a
// multi-byte character split across the boundary still completes on the same token; one that
// completed inside the resumed tokens is reported by resume() (the engine refuses the request).
TEST_F(StopStringDetectorTest, ResumeContinuesAcrossTheBoundary) {
  const std::vector<int32_t> ids = {the_, end_, st_, op_, byte(0xC3), byte(0xA9), byte(0xE2), the_};
  const std::vector<std::vector<std::string>> stop_sets = {
      {"STOP"}, {"e end"}, {"\xC3\xA9"}, {"nowhere", "OP\xC3\xA9"}, {"\xEF\xBF\xBD The"}};
  for (const auto& stops : stop_sets) {
    const auto [at, which] = run(stops, ids);
    for (size_t k = 0; k < ids.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << stops.front() << " cut " << k);
      StopStringDetector d(*tok_, stops);
      const std::optional<int32_t> inside = d.resume(std::span<const int32_t>(ids.data(), k));
      if (at >= 0 && static_cast<size_t>(at) < k) {  // completed inside the resumed tokens
        EXPECT_EQ(inside, which);
        continue;
      }
      EXPECT_FALSE(inside.has_value());
      std::optional<int32_t> m;
      size_t i = k;
      for (; i < ids.size() && !m; ++i) m = d.push(ids[i]);
      if (at >= 0) {
        EXPECT_EQ(m, which);
        EXPECT_EQ(i - 1, static_cast<size_t>(at));
      } else {
        EXPECT_FALSE(m.has_value());
        EXPECT_EQ(d.finish(), which);
      }
    }
  }
  // The cases above do match somewhere (the test can fail).
  EXPECT_EQ(run({"e end"}, ids).first, 1);
  EXPECT_EQ(run({"\xEF\xBF\xBD The"}, ids).first, 7);  // a lone lead byte, then " The"
}

}  // namespace
}  // namespace keel::engine
