#include "sampling/token_history.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::sampling {
namespace {

TEST(TokenHistoryTest, CountsOutputIncrementally) {
  TokenHistory h;
  const std::vector<int32_t> prompt = {5, 7, 5, 9};
  h.set_prompt(prompt);
  EXPECT_TRUE(h.in_prompt(5));
  EXPECT_TRUE(h.in_prompt(9));
  EXPECT_FALSE(h.in_prompt(6));
  EXPECT_EQ(h.output_count(5), 0);  // prompt occurrences are not output counts
  h.add_output(5);
  h.add_output(11);
  h.add_output(11);
  EXPECT_EQ(h.output_count(5), 1);
  EXPECT_EQ(h.output_count(11), 2);
  EXPECT_EQ(h.output_count(12), 0);
  EXPECT_FALSE(h.in_prompt(11));
  EXPECT_EQ(h.num_output_tokens(), 3);
  EXPECT_EQ(h.entries().size(), 4u);  // distinct ids 5, 7, 9, 11
}

TEST(TokenHistoryTest, SetPromptReplacesPromptButKeepsOutput) {
  TokenHistory h;
  const std::vector<int32_t> first = {1, 2};
  const std::vector<int32_t> second = {3};
  h.set_prompt(first);
  h.add_output(1);
  h.set_prompt(second);
  EXPECT_FALSE(h.in_prompt(1));
  EXPECT_FALSE(h.in_prompt(2));
  EXPECT_TRUE(h.in_prompt(3));
  EXPECT_EQ(h.output_count(1), 1);
  h.clear();
  EXPECT_EQ(h.output_count(1), 0);
  EXPECT_FALSE(h.in_prompt(3));
  EXPECT_TRUE(h.entries().empty());
  EXPECT_EQ(h.num_output_tokens(), 0);
}

}  // namespace
}  // namespace keel::sampling
