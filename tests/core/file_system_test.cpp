// PosixFileSystem: directory listing (regular files only, NotFound for a missing directory) and
// atomic replacement by rename, the two operations the disk KV tier relies on.
#include "core/file_system.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support/test_support.h"

namespace keel {
namespace {

TEST(PosixFileSystemTest, ListDirectoryNamesRegularFilesOnly) {
  PosixFileSystem fs;
  const std::string dir = testing::make_temp_dir("fs_list");
  std::ofstream(dir + "/a.kvb") << "x";
  std::ofstream(dir + "/b.tmp") << "y";
  ASSERT_TRUE(fs.create_directories(dir + "/sub").ok());
  Result<std::vector<std::string>> names = fs.list_directory(dir);
  ASSERT_TRUE(names.ok()) << names.status().message();
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, (std::vector<std::string>{"a.kvb", "b.tmp"}));
  EXPECT_EQ(fs.list_directory(dir + "/missing").status().code(), StatusCode::kNotFound);
}

TEST(PosixFileSystemTest, RenameReplacesTheTarget) {
  PosixFileSystem fs;
  const std::string dir = testing::make_temp_dir("fs_rename");
  std::ofstream(dir + "/new") << "new";
  std::ofstream(dir + "/old") << "old";
  ASSERT_TRUE(fs.rename(dir + "/new", dir + "/old").ok());
  EXPECT_FALSE(fs.exists(dir + "/new"));
  EXPECT_EQ(testing::read_file(dir + "/old"), "new");
}

}  // namespace
}  // namespace keel
