// KV element types: the accepted set and its names.
#include "model/kv_type.h"

#include <string>

namespace keel::model {

bool is_kv_type(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kQ8_0;
}

std::string_view kv_type_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kKvTypeNames[0];
    case DType::kF16:
      return kKvTypeNames[1];
    case DType::kQ8_0:
      return kKvTypeNames[2];
    default:
      return dtype_name(dtype);
  }
}

Result<DType> parse_kv_type(std::string_view name) {
  const std::optional<DType> dtype = dtype_from_name(name);
  if (!dtype.has_value() || !is_kv_type(*dtype)) {
    return Status::invalid_argument("unknown KV type '" + std::string(name) +
                                    "' (expected f32, f16 or q8_0)");
  }
  return *dtype;
}

}  // namespace keel::model
