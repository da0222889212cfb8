// libFuzzer target: disk-tier block files (kv/block_file.h) as DiskTier finds them after a
// restart. Input: one flag byte, then the bytes of one block file. The file is placed, next to a
// good block written by DiskTier::put, in an in-memory directory that DiskTier::open indexes;
// then both keys are read back. The flags let the fuzzer get past the checksums: bit 0 writes
// the store's identity and the file's key into the header, bit 1 recomputes the payload
// checksum, bit 2 the header checksum, bit 3 names the file as an interrupted write (.tmp),
// bits 4-6 set the capacity in blocks (0: open must refuse it). Checks: the index's byte
// accounting stays exact and within capacity, and a payload is served only when its file is a
// valid block of this store — never a damaged, foreign or misnamed one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kv/block_file.h"
#include "kv/disk_tier.h"
#include "test_file_systems.h"

namespace {

using keel::kv::BlockFileHeader;
using keel::kv::BlockHash;
using keel::kv::kBlockFileHeaderBytes;

constexpr size_t kPayload = 64;
constexpr BlockHash kIdentity{0x1111, 0x2222};
constexpr BlockHash kGoodKey{0xa, 0xb};
constexpr BlockHash kFuzzKey{0xc, 0xd};

void put_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

// The fix-ups of the flag byte (only on bytes that are there).
void fix_up(uint8_t flags, std::vector<std::byte>* file) {
  if (file->size() < kBlockFileHeaderBytes) return;
  std::byte* p = file->data();
  if (flags & 1) {
    put_u64(p + 16, kIdentity.lo);
    put_u64(p + 24, kIdentity.hi);
    put_u64(p + 32, kFuzzKey.lo);
    put_u64(p + 40, kFuzzKey.hi);
  }
  if (flags & 2) {
    put_u64(p + 56,
            keel::kv::block_payload_checksum(std::span(*file).subspan(kBlockFileHeaderBytes)));
  }
  if (flags & 4) {
    // The header checksum as encode_block_file_header computes it, over this header's fields.
    BlockFileHeader h;
    auto u64 = [p](size_t at) {
      uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[at + i]) << (8 * i);
      return v;
    };
    h.identity = {u64(16), u64(24)};
    h.key = {u64(32), u64(40)};
    h.payload_bytes = u64(48);
    h.payload_checksum = u64(56);
    h.sequence = u64(64);
    const std::vector<std::byte> good = keel::kv::encode_block_file_header(h);
    std::memcpy(p + 72, good.data() + 72, 8);  // keeps the fuzzed magic, version and size
  }
}

// True when `file` is exactly a valid block of key `key` in this store.
bool valid_block(const std::vector<std::byte>& file, const BlockHash& key) {
  if (file.size() != kBlockFileHeaderBytes + kPayload) return false;
  auto h = keel::kv::decode_block_file_header(file, "fuzz");
  if (!h.ok()) return false;
  const auto payload = std::span(file).subspan(kBlockFileHeaderBytes);
  return h->identity == kIdentity && h->key == key && h->payload_bytes == kPayload &&
         h->payload_checksum == keel::kv::block_payload_checksum(payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::vector<std::byte> file(size - 1);
  if (!file.empty()) std::memcpy(file.data(), data + 1, file.size());
  (void)keel::kv::decode_block_file_header(file, "fuzz");  // the raw bytes, unfixed
  fix_up(flags, &file);

  keel::gguf::test_util::MemoryFileSystem fs;
  keel::kv::DiskTierConfig config;
  config.dir = "/kv";
  config.identity = kIdentity;
  config.payload_bytes = kPayload;
  const int64_t file_bytes = kBlockFileHeaderBytes + kPayload;
  config.capacity_bytes = file_bytes * ((flags >> 4) & 7);
  std::vector<std::byte> good(kPayload, std::byte{0x5a});
  {
    auto tier = keel::kv::DiskTier::open(&fs, config);
    if (config.capacity_bytes < file_bytes) {  // refused: not even one block fits
      if (tier.ok()) std::abort();
      return 0;
    }
    if (!tier.ok()) std::abort();
    if (!(*tier)->put(kGoodKey, good, nullptr).ok()) std::abort();
  }
  const std::string dir = config.dir + "/" + keel::kv::block_hash_hex(kIdentity);
  std::string name = keel::kv::block_hash_hex(kFuzzKey) + ".kvb";
  if (flags & 8) name += ".3.kvb.tmp";
  fs.put(dir + "/" + name, file);

  auto tier = keel::kv::DiskTier::open(&fs, config);
  if (!tier.ok()) std::abort();
  keel::kv::TierStats s = (*tier)->stats();
  if (s.used_bytes != s.blocks * file_bytes || s.used_bytes > s.capacity_bytes) std::abort();
  std::vector<std::byte> out(kPayload);
  if ((*tier)->contains(kGoodKey) && (*tier)->get(kGoodKey, out).ok() && out != good) std::abort();
  if ((*tier)->contains(kFuzzKey) && (*tier)->get(kFuzzKey, out).ok()) {
    if ((flags & 8) || !valid_block(file, kFuzzKey)) std::abort();
    if (std::memcmp(out.data(), file.data() + kBlockFileHeaderBytes, kPayload) != 0) std::abort();
  }
  s = (*tier)->stats();
  if (s.used_bytes != s.blocks * file_bytes || s.used_bytes > s.capacity_bytes) std::abort();
  return 0;
}
