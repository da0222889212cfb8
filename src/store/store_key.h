// StoreKey: what names a model store entry — the content hash of the GGUF it was built from, the
// weight layout version its bytes are in, and the ISA (kernel dispatch table) it was built for —
// and its file name "keel-store-<16 hex digits>-l<version>-<isa>" in the store directory.
//
// The content hash is a *sampled* XXH3-64 (cheap: ~6 MiB read whatever the model's size): the
// file size, its first 4 MiB (header, metadata and tensor index of typical files) and 32 windows of
// 64 KiB spread evenly over the rest. Two files that differ only outside the samples collide; a
// re-quantized or edited model changes its header or its tensor bytes everywhere, so in practice
// they do not. Stable across processes, hosts and copies of the file.
//
// Thread safety: pure functions (content_hash reads the file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/file_system.h"
#include "core/result.h"

namespace keel::store {

inline constexpr std::string_view kEntryPrefix = "keel-store-";

struct StoreKey {
  uint64_t content_hash = 0;   // content_hash() of the source GGUF
  int64_t layout_version = 0;  // model::kGroupedLayoutVersion when built
  std::string isa;             // kernels::isa_name of the dispatch table ("avx512")
  friend bool operator==(const StoreKey&, const StoreKey&) = default;
};

// "keel-store-<hash hex>-l<version>-<isa>".
[[nodiscard]] std::string entry_name(const StoreKey& key);
// The key of an entry file name; nullopt for any other name (temporaries included).
[[nodiscard]] std::optional<StoreKey> parse_entry_name(std::string_view name);

// The sampled content hash of the file at `path` (see above). IoError / NotFound from `fs`.
[[nodiscard]] Result<uint64_t> content_hash(FileSystem& fs, const std::string& path);

// The key for `path` built for `isa` at the current layout version.
[[nodiscard]] Result<StoreKey> key_for_file(FileSystem& fs, const std::string& path,
                                            std::string_view isa);

}  // namespace keel::store
