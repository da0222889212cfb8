// Entry names (round trip; other names, temporaries included, are not entries) and the sampled
// content hash (stable; changes with the size, the header or a sampled byte).
#include "store/store_key.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"

namespace keel::store {
namespace {

TEST(StoreKeyTest, EntryNamesRoundTrip) {
  const StoreKey key{0x0123456789abcdefULL, 1, "avx512"};
  EXPECT_EQ(entry_name(key), "keel-store-0123456789abcdef-l1-avx512");
  const std::optional<StoreKey> back = parse_entry_name(entry_name(key));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, key);
}

TEST(StoreKeyTest, OtherNamesAreNotEntries) {
  for (const char* name :
       {"keel-store-0123456789abcdef-l1-", "keel-store-0123456789abcdeX-l1-avx2",
        ".keel-store-0123456789abcdef-l1-avx2.partial.12", "keel-store-0123456789abcdef-lx-avx2",
        "keel-store-0123456789abcdef-l1-avx2.tmp.3", "other-0123456789abcdef-l1-avx2", ""}) {
    EXPECT_FALSE(parse_entry_name(name).has_value()) << name;
  }
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(StoreKeyTest, ContentHashIsStableAndSeesSampledBytes) {
  const std::string dir = testing::make_temp_dir("store-key");
  std::string big((size_t{12} << 20) + 12345, 'a');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>(i * 7);
  PosixFileSystem fs;
  write_bytes(dir + "/a", big);
  write_bytes(dir + "/b", big);
  const auto a = content_hash(fs, dir + "/a");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, *content_hash(fs, dir + "/b"));  // same bytes, another file: same hash
  std::string header = big;
  header[100] ^= 1;
  write_bytes(dir + "/b", header);
  EXPECT_NE(*a, *content_hash(fs, dir + "/b"));
  std::string tail = big;
  tail[tail.size() - 1] ^= 1;  // the last window ends at the last byte
  write_bytes(dir + "/b", tail);
  EXPECT_NE(*a, *content_hash(fs, dir + "/b"));
  write_bytes(dir + "/b", big + "x");
  EXPECT_NE(*a, *content_hash(fs, dir + "/b"));
  EXPECT_FALSE(content_hash(fs, dir + "/missing").ok());
}

}  // namespace
}  // namespace keel::store
