// StoreKey names and the sampled content hash (see store_key.h).
#include "store/store_key.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

#include "model/group_weights.h"

namespace keel::store {
namespace {

constexpr uint64_t kHeadBytes = uint64_t{4} << 20;
constexpr uint64_t kWindowBytes = uint64_t{64} << 10;
constexpr int kWindows = 32;

bool is_isa_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

std::string entry_name(const StoreKey& key) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(key.content_hash));
  return std::string(kEntryPrefix) + hex + "-l" + std::to_string(key.layout_version) + "-" +
         key.isa;
}

std::optional<StoreKey> parse_entry_name(std::string_view name) {
  if (!name.starts_with(kEntryPrefix)) return std::nullopt;
  name.remove_prefix(kEntryPrefix.size());
  StoreKey key;
  if (name.size() < 16 + 3) return std::nullopt;
  for (char c : name.substr(0, 16)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  std::from_chars(name.data(), name.data() + 16, key.content_hash, 16);
  name.remove_prefix(16);
  if (!name.starts_with("-l")) return std::nullopt;
  name.remove_prefix(2);
  const auto [end, ec] =
      std::from_chars(name.data(), name.data() + name.size(), key.layout_version);
  if (ec != std::errc() || end == name.data() || key.layout_version < 0) return std::nullopt;
  name.remove_prefix(static_cast<size_t>(end - name.data()));
  if (!name.starts_with("-") || name.size() < 2) return std::nullopt;
  name.remove_prefix(1);
  if (!std::all_of(name.begin(), name.end(), is_isa_char)) return std::nullopt;
  key.isa = std::string(name);
  return key;
}

Result<uint64_t> content_hash(FileSystem& fs, const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs.open_readable(path));
  const uint64_t size = file->size();
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return Status::resource_exhausted("content_hash: no memory");
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &size, sizeof(size));
  std::vector<std::byte> buf(kHeadBytes);
  auto add = [&](uint64_t offset, uint64_t n) -> Status {
    KEEL_TRY(file->read_at(offset, static_cast<size_t>(n), buf.data()));
    XXH3_64bits_update(state, buf.data(), static_cast<size_t>(n));
    return {};
  };
  Status s = add(0, std::min(size, kHeadBytes));
  if (s.ok() && size > kHeadBytes + kWindowBytes) {
    const uint64_t span = size - kHeadBytes - kWindowBytes;
    for (int i = 0; i < kWindows && s.ok(); ++i) {
      s = add(kHeadBytes + span * static_cast<uint64_t>(i) / (kWindows - 1), kWindowBytes);
    }
  }
  const uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!s.ok()) return s;
  return digest;
}

Result<StoreKey> key_for_file(FileSystem& fs, const std::string& path, std::string_view isa) {
  StoreKey key;
  KEEL_ASSIGN_OR_RETURN(key.content_hash, content_hash(fs, path));
  key.layout_version = model::kGroupedLayoutVersion;
  key.isa = std::string(isa);
  return key;
}

}  // namespace keel::store
