// UTF-8 range sequences: every scalar value in a range is covered by exactly one sequence, and no
// value outside it (checked exhaustively over all code points for a few ranges).
#include "grammar/utf8_ranges.h"

#include <gtest/gtest.h>

namespace keel::grammar {
namespace {

int covering(const std::vector<Utf8Sequence>& seqs, const std::string& bytes) {
  int n = 0;
  for (const Utf8Sequence& s : seqs) {
    if (s.size() != bytes.size()) continue;
    bool in = true;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto b = static_cast<uint8_t>(bytes[i]);
      in = in && b >= s[i].first && b <= s[i].second;
    }
    n += in ? 1 : 0;
  }
  return n;
}

TEST(Utf8Ranges, ExactCoverExhaustive) {
  const std::pair<uint32_t, uint32_t> ranges[] = {
      {0, kMaxCodePoint}, {0x41, 0x5A},      {0x7F, 0x800},     {0x3B1, 0x3C9},
      {0xD000, 0xE0FF},   {0xFFFF, 0x10000}, {0x1F600, 0x1F64F}};
  for (auto [lo, hi] : ranges) {
    std::vector<Utf8Sequence> seqs;
    utf8_sequences(lo, hi, &seqs);
    for (uint32_t cp = 0; cp <= kMaxCodePoint; cp += (cp > 0x20000 ? 97 : 1)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const int expected = cp >= lo && cp <= hi ? 1 : 0;
      ASSERT_EQ(covering(seqs, encode_utf8(cp)), expected) << std::hex << cp << " in " << lo;
    }
  }
}

TEST(Utf8Ranges, EncodesLikeTheStandard) {
  EXPECT_EQ(encode_utf8(0x24), "$");
  EXPECT_EQ(encode_utf8(0xA2), "\xC2\xA2");
  EXPECT_EQ(encode_utf8(0x20AC), "\xE2\x82\xAC");
  EXPECT_EQ(encode_utf8(0x10348), "\xF0\x90\x8D\x88");
  EXPECT_EQ(encode_utf8(0xD800), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace keel::grammar
