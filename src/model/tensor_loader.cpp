// TensorLoader: tensor lookup, shape and type checks, Matrix views and f32 vector copies.
#include "model/tensor_loader.h"

#include <cstring>

#include "core/fp16.h"
#include "core/log.h"

namespace keel::model {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<kernels::Matrix> TensorLoader::matrix(const std::string& name, int64_t rows, int64_t cols) {
  KEEL_ASSIGN_OR_RETURN(std::vector<kernels::Matrix> one, matrices(name, 1, rows, cols));
  return one.front();
}

Result<std::vector<kernels::Matrix>> TensorLoader::matrices(const std::string& name, int64_t n,
                                                            int64_t rows, int64_t cols) {
  std::vector<int64_t> shape = {cols, rows};
  if (n > 1) shape.push_back(n);
  KEEL_ASSIGN_OR_RETURN(const gguf::TensorInfo* info, find(name, shape));
  if (!kernels::matmul_supports(info->dtype)) {
    return Status::unsupported(file_.path() + ": " + name + " has type " +
                               std::string(dtype_name(info->dtype)) +
                               ", which keel does not support");
  }
  kernels::Matrix m;
  m.dtype = info->dtype;
  m.rows = rows;
  m.cols = cols;
  m.data = file_.tensor_data(*info).data();
  m.row_bytes = dtype_row_bytes(info->dtype, cols);
  std::vector<kernels::Matrix> out(static_cast<size_t>(n), m);
  for (size_t e = 1; e < out.size(); ++e) {
    out[e].data = m.data + e * static_cast<size_t>(rows) * m.row_bytes;
  }
  return out;
}

Result<std::vector<float>> TensorLoader::vector(const std::string& name, int64_t n) {
  KEEL_ASSIGN_OR_RETURN(const gguf::TensorInfo* info, find(name, {n}));
  const auto bytes = file_.tensor_data(*info);
  std::vector<float> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h = 0;
    switch (info->dtype) {
      case DType::kF32:
        std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        break;
      case DType::kF16:
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = fp16_to_fp32(h);
        break;
      case DType::kBF16:
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = bf16_to_fp32(h);
        break;
      default:
        return Status::unsupported(file_.path() + ": " + name + " has type " +
                                   std::string(dtype_name(info->dtype)) +
                                   ", which keel does not support for a vector (F32, F16 or "
                                   "BF16 expected)");
    }
  }
  return out;
}

Result<std::vector<float>> TensorLoader::optional_vector(const std::string& name, int64_t n) {
  if (!file_.find_tensor(name)) return std::vector<float>();
  return vector(name, n);
}

void TensorLoader::warn_unused() const {
  for (const auto& t : file_.tensors()) {
    if (!used_.contains(t.name)) {
      KEEL_LOG_WARN("{}: tensor '{}' is not used and is ignored", file_.path(), t.name);
    }
  }
}

Result<const gguf::TensorInfo*> TensorLoader::find(const std::string& name,
                                                   const std::vector<int64_t>& shape) {
  const gguf::TensorInfo* info = file_.find_tensor(name);
  if (!info) return Status::not_found(file_.path() + ": tensor '" + name + "' is missing");
  used_.insert(name);
  // GGUF files may carry trailing dimensions of size 1; they do not change the layout.
  std::vector<int64_t> actual = info->shape;
  while (actual.size() > shape.size() && actual.back() == 1) actual.pop_back();
  if (actual != shape) {
    return Status::invalid_argument(file_.path() + ": tensor '" + name + "' has shape " +
                                    shape_string(info->shape) + ", expected " +
                                    shape_string(shape) + " from the hyper-parameters");
  }
  return info;
}

}  // namespace keel::model
