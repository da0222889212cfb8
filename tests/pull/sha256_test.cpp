// Sha256 against FIPS 180-2 test vectors, streamed in pieces and over a file.
#include "pull/sha256.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"

namespace keel::pull {
namespace {

std::span<const std::byte> bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(Sha256Test, KnownVectors) {
  Sha256 empty;
  EXPECT_EQ(empty.finish_hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.update(bytes("a"));
  abc.update(bytes("bc"));
  EXPECT_EQ(abc.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, FileAndHexCheck) {
  const std::string path = testing::make_temp_dir("sha256") + "/f";
  std::ofstream(path) << "abc";
  PosixFileSystem fs;
  Result<std::string> h = sha256_file(fs, path);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(is_sha256_hex(*h));
  EXPECT_FALSE(is_sha256_hex(h->substr(1)));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'g')));
  EXPECT_FALSE(sha256_file(fs, path + ".missing").ok());
}

}  // namespace
}  // namespace keel::pull
