// Block hash tests: the XXH3-128 primitive against published vectors, the byte encoding against a
// hand-written byte string, a pinned golden key (catches any change of encoding), chaining and
// extra-key isolation.
#include "kv/block_hash.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace keel::kv {
namespace {

std::span<const std::byte> as_bytes(const std::vector<uint8_t>& v) {
  return std::as_bytes(std::span<const uint8_t>(v));
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// Published XXH3-128 (seed 0) digests, as printed by `xxh128sum` (high 64 bits first).
TEST(BlockHashTest, HashBytesMatchesPublishedXxh3Vectors) {
  const BlockHash empty = hash_bytes({});
  EXPECT_EQ(empty.hi, 0x99aa06d3014798d8ULL);
  EXPECT_EQ(empty.lo, 0x6001c324468d497fULL);
  const BlockHash abc = hash_bytes(as_bytes(std::string_view("abc")));
  EXPECT_EQ(abc.hi, 0x06b05ab6733a6185ULL);
  EXPECT_EQ(abc.lo, 0x78af5f94892f3950ULL);
}

// hash_block must hash exactly the documented little-endian byte string.
TEST(BlockHashTest, EncodingIsExplicitLittleEndian) {
  const BlockHash parent{0x0807060504030201ULL, 0x100f0e0d0c0b0a09ULL};
  const BlockHash extra{0x1817161514131211ULL, 0x201f1e1d1c1b1a19ULL};
  const std::vector<int32_t> tokens = {0x04030201, -2};
  const std::vector<uint8_t> expected = {
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // parent.lo
      0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,  // parent.hi
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // extra.lo
      0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20,  // extra.hi
      0x02, 0x00, 0x00, 0x00,                          // token count
      0x01, 0x02, 0x03, 0x04,                          // tokens[0]
      0xfe, 0xff, 0xff, 0xff,                          // tokens[1] = -2
  };
  EXPECT_EQ(hash_block(parent, tokens, extra), hash_bytes(as_bytes(expected)));

  const BlockHash model{0x1122334455667788ULL, 0x99aabbccddeeff00ULL};
  const std::vector<uint8_t> extra_bytes = {
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // model.lo
      0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99,  // model.hi
      0x02, 0,    0,    0,    0,    0,    0,    0,     // salt length
      'h',  'i'};
  EXPECT_EQ(request_extra_key(model, "hi"), hash_bytes(as_bytes(extra_bytes)));
}

// Pinned once (computed with this encoding); a change of encoding, seed or hash function breaks
// every persisted or cross-process key, so it must fail here first.
TEST(BlockHashTest, GoldenKeyIsStable) {
  std::vector<int32_t> tokens(16);
  for (int32_t i = 0; i < 16; ++i) tokens[i] = 1000 + 7 * i;
  const BlockHash model = hash_bytes(as_bytes(std::string_view("keel-golden-model")));
  const BlockHash extra = request_extra_key(model, "tenant-a");
  const BlockHash first = hash_block(kRootHash, tokens, extra);
  const BlockHash second = hash_block(first, tokens, extra);
  EXPECT_EQ(first.lo, 0x3f7d26e22864d9bcULL);
  EXPECT_EQ(first.hi, 0x761bde54f64be69cULL);
  EXPECT_EQ(second.lo, 0xc4836232f1f0342aULL);
  EXPECT_EQ(second.hi, 0x57f6e05a97f69e1dULL);
}

TEST(BlockHashTest, ChainingDistinguishesParents) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {5, 6, 7, 8};
  const BlockHash extra = request_extra_key(BlockHash{1, 2}, "");
  const BlockHash pa = hash_block(kRootHash, a, extra);
  const BlockHash pb = hash_block(kRootHash, b, extra);
  // The same block tokens after different parents get different keys.
  EXPECT_NE(hash_block(pa, b, extra), hash_block(pb, b, extra));
  EXPECT_NE(hash_block(kRootHash, b, extra), hash_block(pa, b, extra));
  // Deterministic.
  EXPECT_EQ(hash_block(pa, b, extra), hash_block(pa, b, extra));
}

TEST(BlockHashTest, TokensOrderAndCountMatter) {
  const BlockHash extra{};
  EXPECT_NE(hash_block(kRootHash, std::vector<int32_t>{1, 2}, extra),
            hash_block(kRootHash, std::vector<int32_t>{2, 1}, extra));
  EXPECT_NE(hash_block(kRootHash, std::vector<int32_t>{1, 2}, extra),
            hash_block(kRootHash, std::vector<int32_t>{1, 2, 0}, extra));
}

TEST(BlockHashTest, ExtraKeysIsolateModelsAndSalts) {
  const BlockHash m1{1, 0};
  const BlockHash m2{2, 0};
  EXPECT_NE(request_extra_key(m1, ""), request_extra_key(m2, ""));
  EXPECT_NE(request_extra_key(m1, ""), request_extra_key(m1, "a"));
  EXPECT_NE(request_extra_key(m1, "a"), request_extra_key(m1, "b"));
  EXPECT_EQ(request_extra_key(m1, "a"), request_extra_key(m1, "a"));
  const std::vector<int32_t> t = {9, 9, 9};
  EXPECT_NE(hash_block(kRootHash, t, request_extra_key(m1, "a")),
            hash_block(kRootHash, t, request_extra_key(m1, "b")));
}

}  // namespace
}  // namespace keel::kv
