// GgufWriter serialization: little-endian encoding of every value type, then aligned tensor data.
#include "gguf/writer.h"

#include <unistd.h>

#include <cstring>
#include <limits>

#include "gguf/reader.h"

namespace keel::gguf {
namespace {

// Checks that every element of every array (nested ones included) has the array's declared
// type; a mismatch would encode a file no reader can parse. `where` names the value.
Status check_array_types(const Value& v, const std::string& where) {
  const Array* a = v.as_array();
  if (!a) return {};
  for (size_t i = 0; i < a->items.size(); ++i) {
    const Value& item = a->items[i];
    const std::string item_where = where + "[" + std::to_string(i) + "]";
    if (item.type() != a->type) {
      return Status::invalid_argument(item_where + " has type " +
                                      std::string(value_type_name(item.type())) +
                                      " in an array of " + std::string(value_type_name(a->type)));
    }
    KEEL_TRY(check_array_types(item, item_where));
  }
  return {};
}

class Encoder {
 public:
  template <typename T>
  void pod(const T& v) {
    append(&v, sizeof(T));
  }
  void string(const std::string& s) {
    pod<uint64_t>(s.size());
    append(s.data(), s.size());
  }
  // resize + memcpy rather than insert(ptr, ptr): GCC 12 -O3 reports a false stringop-overflow
  // for the latter.
  void append(const void* src, size_t n) {
    if (n == 0) return;
    const size_t at = bytes.size();
    bytes.resize(at + n);
    std::memcpy(bytes.data() + at, src, n);
  }
  void value(const Value& v) {
    std::visit(
        [this](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            string(x);
          } else if constexpr (std::is_same_v<T, Array>) {
            pod<uint32_t>(static_cast<uint32_t>(x.type));
            pod<uint64_t>(x.items.size());
            for (const auto& item : x.items) value(item);
          } else if constexpr (std::is_same_v<T, bool>) {
            pod<uint8_t>(x ? 1 : 0);
          } else {
            pod<T>(x);
          }
        },
        v.data);
  }
  std::vector<std::byte> bytes;
};

}  // namespace

void GgufWriter::set(const std::string& key, Value value) {
  for (auto& kv : metadata_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({key, std::move(value)});
}

uint64_t GgufWriter::alignment() const {
  for (const auto& kv : metadata_) {
    if (kv.key == "general.alignment") {
      auto a = kv.value.as_int();
      if (a && *a > 0 && static_cast<uint64_t>(*a) <= kMaxAlignment) {
        return static_cast<uint64_t>(*a);
      }
    }
  }
  return kDefaultAlignment;
}

Status GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                              FillFn fill) {
  for (const auto& t : tensors_) {
    if (t.name == name) return Status::invalid_argument("duplicate tensor name '" + name + "'");
  }
  const DTypeInfo& info = dtype_info(dtype);
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) return Status::invalid_argument("tensor '" + name + "' has a negative dimension");
    if (d != 0 && elements > std::numeric_limits<int64_t>::max() / d) {
      return Status::invalid_argument("tensor '" + name + "' has too many elements");
    }
    elements *= d;
  }
  if (shape.empty() || shape.size() > static_cast<size_t>(kMaxDims) || shape[0] % info.block_size) {
    return Status::invalid_argument("tensor '" + name + "' has a shape " + std::string(info.name) +
                                    " cannot store");
  }
  const auto blocks = static_cast<uint64_t>(elements / info.block_size);
  const auto block_bytes = static_cast<uint64_t>(info.block_bytes);
  if (blocks > (std::numeric_limits<uint64_t>::max() >> 1) / block_bytes) {
    return Status::invalid_argument("tensor '" + name + "' is too large");
  }
  PendingTensor t{name, dtype, std::move(shape), blocks * block_bytes, 0, std::move(fill)};
  t.offset = data_size_;  // re-aligned in serialize() once the alignment is final
  data_size_ += t.num_bytes;
  tensors_.push_back(std::move(t));
  return {};
}

Status GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                              std::span<const std::byte> data) {
  std::vector<std::byte> copy(data.begin(), data.end());
  const size_t n = copy.size();
  return add_tensor(name, dtype, std::move(shape),
                    [copy = std::move(copy), n, name](std::span<std::byte> out) -> Status {
                      if (out.size() != n) {
                        return Status::invalid_argument("tensor '" + name + "' needs " +
                                                        std::to_string(out.size()) +
                                                        " bytes, got " + std::to_string(n));
                      }
                      std::memcpy(out.data(), copy.data(), n);
                      return {};
                    });
}

Status GgufWriter::serialize(const Sink& sink, const ProgressFn& progress) const {
  for (const auto& kv : metadata_) {
    KEEL_TRY(check_array_types(kv.value, "metadata key '" + kv.key + "'"));
  }
  const uint64_t align = alignment();
  auto pad_to = [align](uint64_t n) { return (n + align - 1) / align * align; };
  Encoder e;
  e.pod<uint32_t>(kMagic);
  e.pod<uint32_t>(version_);
  e.pod<uint64_t>(tensors_.size());
  e.pod<uint64_t>(metadata_.size());
  for (const auto& kv : metadata_) {
    e.string(kv.key);
    e.pod<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    e.value(kv.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    e.string(t.name);
    e.pod<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) e.pod<uint64_t>(static_cast<uint64_t>(d));
    e.pod<uint32_t>(static_cast<uint32_t>(t.dtype));
    e.pod<uint64_t>(offset);
    offset = pad_to(offset + t.num_bytes);
  }
  e.bytes.resize(pad_to(e.bytes.size()));
  KEEL_TRY(sink(e.bytes));
  std::vector<std::byte> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    buf.assign(pad_to(t.num_bytes), std::byte{0});
    KEEL_TRY(t.fill(std::span<std::byte>(buf.data(), t.num_bytes))
                 .with_prefix("tensor '" + t.name + "'"));
    KEEL_TRY(sink(buf));
    if (progress) progress(i + 1, tensors_.size());
  }
  return {};
}

Result<std::vector<std::byte>> GgufWriter::to_bytes() const {
  std::vector<std::byte> out;
  KEEL_TRY(serialize(
      [&out](std::span<const std::byte> b) -> Status {
        out.insert(out.end(), b.begin(), b.end());
        return {};
      },
      {}));
  return out;
}

Status GgufWriter::write_to(WritableFile& file, const ProgressFn& progress) const {
  return serialize([&file](std::span<const std::byte> b) { return file.append(b); }, progress);
}

Status GgufWriter::write(const std::string& path, FileSystem* fs,
                         const ProgressFn& progress) const {
  PosixFileSystem posix;
  if (!fs) fs = &posix;
  // A per-process temporary name: concurrent writers of one path never share a temporary file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->open_writable(tmp));
  Status s = write_to(*file, progress);
  if (s.ok()) s = file->close();
  if (!s.ok()) {
    (void)fs->remove(tmp);
    return s;
  }
  return fs->rename(tmp, path);
}

}  // namespace keel::gguf
