// The demand board: notes posted and read back whole, stale and malformed notes skipped, other
// files in the store directory (entries among them) ignored, a withdrawn note gone.
#include "store/demand_board.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/store_key.h"
#include "support/test_support.h"

namespace keel::store {
namespace {

TEST(DemandBoardTest, FreshNotesAreReadBackAndStaleOrMalformedOnesSkipped) {
  const std::string dir = testing::make_temp_dir("demand-board");
  const std::string a = entry_name({0xa, 1, "avx2"});
  const std::string b = entry_name({0xb, 1, "avx2"});
  ASSERT_TRUE(post_demand(dir, {a, "/models/a.gguf", 1000, 2.5, 100.0}).ok());
  ASSERT_TRUE(post_demand(dir, {b, "/models/b.gguf", 2000, 0.25, 90.0}).ok());
  std::ofstream(dir + "/" + demand_note_name("keel-store-bad")) << "not numbers\n/x.gguf\n";
  std::ofstream(dir + "/" + demand_note_name("keel-store-short")) << "1.0 10 100.0\n";
  std::ofstream(dir + "/" + a) << "an entry, not a note";

  std::vector<DemandNote> fresh = read_demands(dir, 101.0, 5.0);
  ASSERT_EQ(fresh.size(), 1u) << "b's note is 11 s old";
  EXPECT_EQ(fresh[0].entry, a);
  EXPECT_EQ(fresh[0].model, "/models/a.gguf");
  EXPECT_EQ(fresh[0].bytes, 1000u);
  EXPECT_DOUBLE_EQ(fresh[0].rate, 2.5);
  EXPECT_EQ(read_demands(dir, 101.0, 20.0).size(), 2u);
  EXPECT_TRUE(read_demands(dir, 50.0, 20.0).empty()) << "notes from the future are skipped";

  // A newer post replaces the note.
  ASSERT_TRUE(post_demand(dir, {a, "/models/a.gguf", 1000, 7.0, 102.0}).ok());
  fresh = read_demands(dir, 102.0, 5.0);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_DOUBLE_EQ(fresh[0].rate, 7.0);

  withdraw_demand(dir, a);
  EXPECT_TRUE(read_demands(dir, 102.0, 50.0).size() == 1u) << "only b's is left";
  EXPECT_FALSE(post_demand(dir, {"../escape", "/x.gguf", 1, 1.0, 1.0}).ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + a)) << "the entry file is not touched";
}

}  // namespace
}  // namespace keel::store
