#include "core/status.h"

#include <gtest/gtest.h>

#include "core/result.h"

namespace keel {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.to_string(), "ok");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = Status::corrupt("bad magic");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "bad magic");
  EXPECT_EQ(s.to_string(), "corrupt: bad magic");
  Status copy = s;
  EXPECT_EQ(copy.message(), "bad magic");
  EXPECT_EQ(s.with_prefix("model.gguf").message(), "model.gguf: bad magic");
  EXPECT_TRUE(Status().with_prefix("x").ok());
}

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::invalid_argument("not positive");
  return v;
}

Result<int> doubled(int v) {
  KEEL_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_both(int a, int b) {
  KEEL_TRY(parse_positive(a));
  KEEL_TRY(parse_positive(b).status());
  return {};
}

TEST(ResultTest, ValueAndErrorPropagate) {
  Result<int> ok = doubled(4);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 8);
  Result<int> bad = doubled(-1);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, 0).message(), "not positive");
}

TEST(ResultTest, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(ResultDeathTest, ValueOnErrorAborts) {
  Result<int> r = Status::not_found("x");
  EXPECT_DEATH((void)r.value(), "Result::value\\(\\) on an error");
}

}  // namespace
}  // namespace keel
