// The element types the paged KV cache stores (f32, f16, q8_0) and their command-line names: the
// one place that says which DTypes are KV types, so the flags, the engine config and the KV layout
// accept and refuse the same set.
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <string_view>

#include "core/dtype.h"
#include "core/result.h"

namespace keel::model {

// The names --kv-type accepts, in the order help texts list them.
inline constexpr std::array<std::string_view, 3> kKvTypeNames = {"f32", "f16", "q8_0"};

// True for F32, F16 and Q8_0.
[[nodiscard]] bool is_kv_type(DType dtype);
// "f32", "f16" or "q8_0" (lower case, as the flag takes it); the DType's own name otherwise.
[[nodiscard]] std::string_view kv_type_name(DType dtype);
// The KV type named `name` (case-insensitive); InvalidArgument naming the accepted types.
[[nodiscard]] Result<DType> parse_kv_type(std::string_view name);

}  // namespace keel::model
