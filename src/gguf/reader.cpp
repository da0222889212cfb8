// GGUF parsing: a bounds-checked buffered cursor over the file, then validation of every count,
// size and offset against what remains of the file before anything is allocated.
#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace keel::gguf {
namespace {

constexpr int kMaxArrayDepth = 8;
constexpr size_t kBufferSize = size_t{1} << 20;

// Sequential reader over a RandomAccessFile that never reads past the end.
class Cursor {
 public:
  explicit Cursor(const RandomAccessFile& file) : file_(file) {}

  [[nodiscard]] uint64_t position() const { return pos_; }
  [[nodiscard]] uint64_t remaining() const { return file_.size() - pos_; }

  Status read(void* dst, size_t n, std::string_view what) {
    if (n > remaining()) {
      return Status::corrupt(file_.path() + ": truncated file: " + std::string(what) +
                             " at offset " + std::to_string(pos_) + " needs " + std::to_string(n) +
                             " bytes, only " + std::to_string(remaining()) + " remain");
    }
    auto* out = static_cast<std::byte*>(dst);
    while (n > 0) {
      if (buf_pos_ == buf_.size()) KEEL_TRY(refill());
      const size_t take = std::min(n, buf_.size() - buf_pos_);
      std::memcpy(out, buf_.data() + buf_pos_, take);
      buf_pos_ += take;
      pos_ += take;
      out += take;
      n -= take;
    }
    return {};
  }

  template <typename T>
  Status read_pod(T* out, std::string_view what) {
    return read(out, sizeof(T), what);
  }

 private:
  Status refill() {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBufferSize, remaining()));
    buf_.resize(n);
    buf_pos_ = 0;
    return file_.read_at(pos_, n, buf_.data());
  }

  const RandomAccessFile& file_;
  uint64_t pos_ = 0;
  std::vector<std::byte> buf_;
  size_t buf_pos_ = 0;
};

// Smallest encoded size of one value of a type (for bounding element counts).
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
    case ValueType::kString:
      return 8;  // length prefix
    case ValueType::kArray:
      return 12;  // element type + count
  }
  return 1;
}

}  // namespace

// Parses header, metadata and tensor infos into a GgufFile (a friend, so it can fill it).
class HeaderParser {
 public:
  HeaderParser(const RandomAccessFile& file, GgufFile& out) : file_(file), cur_(file), out_(out) {}

  Status parse() {
    uint32_t magic = 0;
    KEEL_TRY(cur_.read_pod(&magic, "magic"));
    if (magic != kMagic) return error(Status::corrupt("bad magic: not a GGUF file"));
    KEEL_TRY(cur_.read_pod(&out_.version_, "version"));
    if (out_.version_ == 1) {
      return error(Status::unsupported("GGUF version 1 is not supported (re-convert the model)"));
    }
    if (out_.version_ != 2 && out_.version_ != 3) {
      return error(Status::unsupported("unknown GGUF version " + std::to_string(out_.version_) +
                                       (out_.version_ > 0xffff ? " (big-endian file?)" : "")));
    }
    uint64_t num_tensors = 0, num_kv = 0;
    KEEL_TRY(cur_.read_pod(&num_tensors, "tensor count"));
    KEEL_TRY(cur_.read_pod(&num_kv, "metadata count"));
    // Every metadata pair takes ≥ 8 (key) + 4 (type) + 1 bytes; every tensor info ≥ 8 + 4 + 4 + 8.
    if (num_kv > cur_.remaining() / 13) {
      return error(Status::corrupt("metadata count " + std::to_string(num_kv) +
                                   " is larger than the file can hold"));
    }
    if (num_tensors > cur_.remaining() / 24) {
      return error(Status::corrupt("tensor count " + std::to_string(num_tensors) +
                                   " is larger than the file can hold"));
    }
    KEEL_TRY(parse_metadata(num_kv));
    KEEL_TRY(parse_alignment());
    KEEL_TRY(parse_tensor_infos(num_tensors));
    return check_tensor_layout();
  }

 private:
  Status error(const Status& s) const { return s.with_prefix(file_.path()); }

  Status read_string(std::string* out, std::string_view what) {
    uint64_t len = 0;
    KEEL_TRY(cur_.read_pod(&len, what));
    if (len > cur_.remaining()) {
      return error(Status::corrupt(std::string(what) + " of length " + std::to_string(len) +
                                   " at offset " + std::to_string(cur_.position() - 8) +
                                   " runs past the end of the file"));
    }
    out->resize(static_cast<size_t>(len));
    return cur_.read(out->data(), static_cast<size_t>(len), what);
  }

  Status read_value(ValueType type, Value* out, int depth) {
    switch (type) {
      case ValueType::kUint8:
        return read_scalar<uint8_t>(out);
      case ValueType::kInt8:
        return read_scalar<int8_t>(out);
      case ValueType::kUint16:
        return read_scalar<uint16_t>(out);
      case ValueType::kInt16:
        return read_scalar<int16_t>(out);
      case ValueType::kUint32:
        return read_scalar<uint32_t>(out);
      case ValueType::kInt32:
        return read_scalar<int32_t>(out);
      case ValueType::kFloat32:
        return read_scalar<float>(out);
      case ValueType::kUint64:
        return read_scalar<uint64_t>(out);
      case ValueType::kInt64:
        return read_scalar<int64_t>(out);
      case ValueType::kFloat64:
        return read_scalar<double>(out);
      case ValueType::kBool: {
        uint8_t b = 0;
        KEEL_TRY(cur_.read_pod(&b, "bool value"));
        if (b > 1)
          return error(Status::corrupt("bool value " + std::to_string(b) + " is not 0 or 1"));
        out->data = b != 0;
        return {};
      }
      case ValueType::kString: {
        std::string s;
        KEEL_TRY(read_string(&s, "string value"));
        out->data = std::move(s);
        return {};
      }
      case ValueType::kArray:
        return read_array(out, depth);
    }
    return error(Status::corrupt("unknown value type"));
  }

  template <typename T>
  Status read_scalar(Value* out) {
    T v{};
    KEEL_TRY(cur_.read_pod(&v, "scalar value"));
    out->data = v;
    return {};
  }

  Status read_value_type(ValueType* out) {
    uint32_t raw = 0;
    KEEL_TRY(cur_.read_pod(&raw, "value type"));
    if (raw >= kNumValueTypes) {
      return error(Status::corrupt("unknown metadata value type " + std::to_string(raw) +
                                   " at offset " + std::to_string(cur_.position() - 4)));
    }
    *out = static_cast<ValueType>(raw);
    return {};
  }

  Status read_array(Value* out, int depth) {
    if (depth >= kMaxArrayDepth) {
      return error(Status::corrupt("arrays nested deeper than " + std::to_string(kMaxArrayDepth)));
    }
    Array arr;
    KEEL_TRY(read_value_type(&arr.type));
    uint64_t count = 0;
    KEEL_TRY(cur_.read_pod(&count, "array length"));
    if (count > cur_.remaining() / min_encoded_size(arr.type)) {
      return error(Status::corrupt("array of " + std::to_string(count) + " " +
                                   std::string(value_type_name(arr.type)) +
                                   " values is larger than the file can hold"));
    }
    arr.items.resize(static_cast<size_t>(count));
    for (auto& item : arr.items) KEEL_TRY(read_value(arr.type, &item, depth + 1));
    out->data = std::move(arr);
    return {};
  }

  Status parse_metadata(uint64_t num_kv) {
    out_.metadata_.reserve(static_cast<size_t>(num_kv));
    for (uint64_t i = 0; i < num_kv; ++i) {
      KeyValue kv;
      KEEL_TRY(read_string(&kv.key, "metadata key"));
      ValueType type{};
      KEEL_TRY(read_value_type(&type));
      KEEL_TRY(read_value(type, &kv.value, 0).with_prefix("key '" + kv.key + "'"));
      if (!out_.metadata_index_.emplace(kv.key, out_.metadata_.size()).second) {
        return error(Status::corrupt("duplicate metadata key '" + kv.key + "'"));
      }
      out_.metadata_.push_back(std::move(kv));
    }
    return {};
  }

  Status parse_alignment() {
    const Value* v = out_.find("general.alignment");
    if (!v) return {};
    auto a = v->as_int();
    if (!a || *a <= 0 || (*a & (*a - 1)) != 0 || *a > (int64_t{1} << 30)) {
      return error(Status::corrupt("general.alignment must be a power of two"));
    }
    out_.alignment_ = static_cast<uint64_t>(*a);
    return {};
  }

  Status parse_tensor_infos(uint64_t num_tensors) {
    out_.tensors_.reserve(static_cast<size_t>(num_tensors));
    for (uint64_t i = 0; i < num_tensors; ++i) {
      TensorInfo t;
      KEEL_TRY(read_string(&t.name, "tensor name"));
      uint32_t n_dims = 0;
      KEEL_TRY(cur_.read_pod(&n_dims, "tensor dimension count"));
      if (n_dims == 0 || n_dims > kMaxDims) {
        return error(Status::corrupt("tensor '" + t.name + "' has " + std::to_string(n_dims) +
                                     " dimensions (1 to 4 allowed)"));
      }
      t.shape.resize(n_dims);
      int64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t ne = 0;
        KEEL_TRY(cur_.read_pod(&ne, "tensor dimension"));
        if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
            (ne != 0 && static_cast<uint64_t>(elements) >
                            static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)) {
          return error(Status::corrupt("tensor '" + t.name + "' has an absurd shape"));
        }
        t.shape[d] = static_cast<int64_t>(ne);
        elements *= static_cast<int64_t>(ne);
      }
      t.num_elements = elements;
      uint32_t raw_type = 0;
      KEEL_TRY(cur_.read_pod(&raw_type, "tensor type"));
      auto info = dtype_info(raw_type);
      if (!info) {
        return error(Status::unsupported("tensor '" + t.name + "' has unknown type id " +
                                         std::to_string(raw_type)));
      }
      t.dtype = info->dtype;
      if (t.shape[0] % info->block_size != 0) {
        return error(
            Status::corrupt("tensor '" + t.name + "' row of " + std::to_string(t.shape[0]) +
                            " elements is not a multiple of the " + std::string(info->name) +
                            " block size " + std::to_string(info->block_size)));
      }
      t.num_bytes = static_cast<uint64_t>(elements / info->block_size) *
                    static_cast<uint64_t>(info->block_bytes);
      KEEL_TRY(cur_.read_pod(&t.offset, "tensor offset"));
      if (t.offset % out_.alignment_ != 0) {
        return error(Status::corrupt("tensor '" + t.name + "' offset " + std::to_string(t.offset) +
                                     " is not aligned to " + std::to_string(out_.alignment_)));
      }
      if (!out_.tensor_index_.emplace(t.name, out_.tensors_.size()).second) {
        return error(Status::corrupt("duplicate tensor name '" + t.name + "'"));
      }
      out_.tensors_.push_back(std::move(t));
    }
    return {};
  }

  Status check_tensor_layout() {
    const uint64_t header_end = cur_.position();
    const uint64_t a = out_.alignment_;
    out_.data_offset_ = (header_end + a - 1) / a * a;
    out_.file_size_ = file_.size();
    const uint64_t data_size =
        out_.data_offset_ <= file_.size() ? file_.size() - out_.data_offset_ : 0;
    if (!out_.tensors_.empty() && out_.data_offset_ > file_.size()) {
      return error(Status::corrupt("truncated file: the tensor data section is missing"));
    }
    for (const auto& t : out_.tensors_) {
      if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
        return error(Status::corrupt("tensor '" + t.name + "' (" + std::to_string(t.num_bytes) +
                                     " bytes at data offset " + std::to_string(t.offset) +
                                     ") lies outside the file (truncated?)"));
      }
    }
    return {};
  }

  const RandomAccessFile& file_;
  Cursor cur_;
  GgufFile& out_;
};

Result<GgufFile> GgufFile::open(const std::string& path, const ReadOptions& options) {
  PosixFileSystem posix;
  FileSystem* fs = options.fs ? options.fs : &posix;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs->open_readable(path));
  GgufFile out;
  out.path_ = path;
  KEEL_TRY(HeaderParser(*file, out).parse());
  if (options.mode == DataMode::kNone || out.tensors_.empty()) return out;

  const uint64_t data_size = out.file_size_ - out.data_offset_;
  if (options.mode == DataMode::kMmap) {
    KEEL_ASSIGN_OR_RETURN(out.mapping_, file->map());
    out.data_ = out.mapping_->data() + out.data_offset_;
    return out;
  }
  KEEL_ASSIGN_OR_RETURN(out.owned_data_, AlignedBuffer::allocate(static_cast<size_t>(data_size)));
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  for (uint64_t done = 0; done < data_size;) {
    const uint64_t n = std::min(kChunk, data_size - done);
    KEEL_TRY(file->read_at(out.data_offset_ + done, static_cast<size_t>(n),
                           out.owned_data_.data() + done));
    done += n;
    if (options.progress) options.progress(done, data_size);
  }
  out.data_ = out.owned_data_.data();
  return out;
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

namespace {
Status missing(const std::string& path, std::string_view key) {
  return Status::not_found(path + ": metadata key '" + std::string(key) + "' is missing");
}
Status mistyped(const std::string& path, std::string_view key, const Value& v, const char* want) {
  return Status::invalid_argument(path + ": metadata key '" + std::string(key) + "' has type " +
                                  std::string(value_type_name(v.type())) + ", expected " + want);
}
}  // namespace

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  auto i = v->as_int();
  if (!i) return mistyped(path_, key, *v, "an integer");
  return *i;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  auto d = v->as_double();
  if (!d) return mistyped(path_, key, *v, "a number");
  return *d;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  auto b = v->as_bool();
  if (!b) return mistyped(path_, key, *v, "a bool");
  return *b;
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  const std::string* s = v->as_string();
  if (!s) return mistyped(path_, key, *v, "a string");
  return *s;
}

Result<const Array*> GgufFile::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  const Array* a = v->as_array();
  if (!a) return mistyped(path_, key, *v, "an array");
  return a;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> GgufFile::tensor_data(const TensorInfo& info) const {
  if (!data_) return {};
  return {data_ + info.offset, static_cast<size_t>(info.num_bytes)};
}

}  // namespace keel::gguf
