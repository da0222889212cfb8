// StopStringDetector, the engine's stop-string rule, on a synthetic SPM vocabulary whose token
// boundaries the tests control: a stop string completes on the token that finishes it, across
// token boundaries and inside multi-byte characters made of byte-fallback tokens; the first to
// complete wins; text the decoder holds at the end of generation can complete one; after a match
// nothing else matches.
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

}  // namespace
}  // namespace keel::engine
