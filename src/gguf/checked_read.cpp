// Checked reads of keel's own small GGUF files (see checked_read.h).
#include "gguf/checked_read.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

namespace keel::gguf {

Status file_error(std::string_view kind, const std::string& path, const std::string& what) {
  return Status::invalid_argument(std::string(kind) + " " + path + ": " + what);
}

Result<GgufFile> open_keel_file(const std::string& path, std::string_view kind,
                                std::string_view arch, const std::string& version_key,
                                int64_t version) {
  Result<GgufFile> opened = GgufFile::open(path);
  if (!opened.ok()) {
    const StatusCode c = opened.error().code();
    if (c == StatusCode::kNotFound || c == StatusCode::kIoError) return opened.error();
    return file_error(kind, path, opened.error().message());
  }
  Result<std::string> a = opened->get_string("general.architecture");
  if (!a.ok() || *a != arch) return file_error(kind, path, "not a keel " + std::string(kind));
  Result<int64_t> v = read_int_key(*opened, kind, version_key, 0, INT64_MAX);
  if (!v.ok()) return v.error();
  if (*v != version) {
    return file_error(kind, path,
                      "unsupported version " + std::to_string(*v) + " (this keel reads " +
                          std::to_string(version) + ")");
  }
  return opened;
}

Status add_f32_tensor(GgufWriter& w, const std::string& name, const std::vector<float>& v,
                      std::vector<int64_t> shape) {
  return w.add_tensor(name, DType::kF32, std::move(shape), std::as_bytes(std::span(v)));
}

Status read_f32_tensor(const GgufFile& f, std::string_view kind, const std::string& name,
                       const std::vector<int64_t>& shape, std::vector<float>* out) {
  const TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return file_error(kind, f.path(), "tensor " + name + " is missing");
  if (t->dtype != DType::kF32 || t->shape != shape) {
    return file_error(kind, f.path(), "tensor " + name + " is not F32 of the expected shape");
  }
  const std::span<const std::byte> bytes = f.tensor_data(*t);
  out->resize(bytes.size() / sizeof(float));
  if (!out->empty()) std::memcpy(out->data(), bytes.data(), out->size() * sizeof(float));
  return Status();
}

Result<int64_t> read_int_key(const GgufFile& f, std::string_view kind, const std::string& key,
                             int64_t lo, int64_t hi) {
  Result<int64_t> v = f.get_int(key);
  if (!v.ok()) return file_error(kind, f.path(), v.error().message());
  if (*v < lo || *v > hi) {
    return file_error(kind, f.path(),
                      key + " = " + std::to_string(*v) + " is outside [" + std::to_string(lo) +
                          ", " + std::to_string(hi) + "]");
  }
  return *v;
}

Result<double> read_float_key(const GgufFile& f, std::string_view kind, const std::string& key) {
  Result<double> v = f.get_float(key);
  if (!v.ok()) return file_error(kind, f.path(), v.error().message());
  return *v;
}

Result<std::string> read_string_key(const GgufFile& f, std::string_view kind,
                                    const std::string& key) {
  Result<std::string> v = f.get_string(key);
  if (!v.ok()) return file_error(kind, f.path(), v.error().message());
  return *v;
}

}  // namespace keel::gguf
