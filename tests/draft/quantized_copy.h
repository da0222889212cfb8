// Test helper: a "quantized copy" of a GGUF model — the same metadata (vocabulary included) and
// tensors, with every 2-D F32 matrix whose rows are a multiple of 32 wide rewritten as Q8_0. It
// computes nearly the model's function: a draft model for it that agrees often but not always.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/kernels.h"

namespace keel::testing {

inline Status write_q8_0_copy(const std::string& from, const std::string& to) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile src, gguf::GgufFile::open(from));
  gguf::GgufWriter w;
  for (const gguf::KeyValue& kv : src.metadata()) w.set(kv.key, kv.value);
  std::vector<std::vector<std::byte>> quantized;  // alive until the write
  quantized.reserve(src.tensors().size());
  for (const gguf::TensorInfo& t : src.tensors()) {
    const std::span<const std::byte> data = src.tensor_data(t);
    if (t.dtype != DType::kF32 || t.shape.size() != 2 || t.shape[0] % 32 != 0) {
      KEEL_TRY(w.add_tensor(t.name, t.dtype, t.shape, data));
      continue;
    }
    const int64_t cols = t.shape[0], rows = t.shape[1];
    const size_t row_bytes = dtype_row_bytes(DType::kQ8_0, cols);
    std::vector<std::byte>& q = quantized.emplace_back(row_bytes * static_cast<size_t>(rows));
    const auto* f = reinterpret_cast<const float*>(data.data());
    for (int64_t r = 0; r < rows; ++r) {
      kernels::quantize_row(DType::kQ8_0, f + r * cols,
                            q.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
    KEEL_TRY(w.add_tensor(t.name, DType::kQ8_0, t.shape, q));
  }
  return w.write(to);
}

}  // namespace keel::testing
