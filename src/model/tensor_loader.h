// TensorLoader: looks up a model's tensors by name in a GgufFile, checks each one's shape (GGML
// order, trailing 1s ignored) and type, and hands out kernels::Matrix views or f32 vector copies.
// It remembers which tensors were consumed, so the loader can warn about the rest. Used by
// load_weights (weights.cpp) and the mixture-of-experts tensors (moe_weights.cpp).
//
// Errors name the file and the tensor: NotFound (missing), InvalidArgument (wrong shape),
// Unsupported (a type keel cannot multiply). Thread safety: one loader per load, one thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/result.h"
#include "gguf/reader.h"
#include "kernels/kernels.h"

namespace keel::model {

class TensorLoader {
 public:
  explicit TensorLoader(const gguf::GgufFile& file) : file_(file) {}

  [[nodiscard]] const gguf::GgufFile& file() const { return file_; }
  [[nodiscard]] bool has(const std::string& name) const {
    return file_.find_tensor(name) != nullptr;
  }

  // A [rows][cols] matrix (GGUF shape {cols, rows}).
  Result<kernels::Matrix> matrix(const std::string& name, int64_t rows, int64_t cols);
  // A 3-D tensor of `n` matrices of [rows][cols] each (GGUF shape {cols, rows, n}), stored one
  // after another: n views, matrix e starting e·rows rows after the first.
  Result<std::vector<kernels::Matrix>> matrices(const std::string& name, int64_t n, int64_t rows,
                                                int64_t cols);
  // A vector of n floats (F32, F16 or BF16 in the file).
  Result<std::vector<float>> vector(const std::string& name, int64_t n);
  // An empty vector when the tensor is absent.
  Result<std::vector<float>> optional_vector(const std::string& name, int64_t n);

  // Logs each tensor of the file that no call above consumed (it is ignored).
  void warn_unused() const;

 private:
  Result<const gguf::TensorInfo*> find(const std::string& name, const std::vector<int64_t>& shape);

  const gguf::GgufFile& file_;
  std::unordered_set<std::string> used_;
};

// "[a, b, c]"
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace keel::model
