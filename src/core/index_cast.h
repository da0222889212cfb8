// sz(): an int64_t count or index (the model's shapes, token positions) as a size_t for indexing
// standard containers. The callers guarantee n >= 0 (shapes are validated at load).
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keel {

constexpr size_t sz(int64_t n) { return static_cast<size_t>(n); }

}  // namespace keel
