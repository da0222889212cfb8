// GGUF parsing: a bounds-checked buffered cursor over the file, then validation of every count,
// size and offset against what remains of the file before anything is allocated. Vectors grow
// with what was actually read (never reserved from a count in the file), so memory stays
// proportional to the bytes parsed. Errors name the file, then the key or tensor being parsed.
#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include "core/check.h"

namespace keel::gguf {
namespace {

constexpr size_t kBufferSize = size_t{1} << 20;
// Most elements reserved up front for a vector whose count comes from the file.
constexpr uint64_t kMaxReserve = 4096;
// Smallest encodings: a metadata pair is key length (8) + type (4) + a 1-byte value; a tensor
// info is name length (8) + dimension count (4) + one dimension (8) + type (4) + offset (8).
constexpr uint64_t kMinPairBytes = 13;
constexpr uint64_t kMinTensorInfoBytes = 32;

// Sequential buffered reader over a RandomAccessFile. Callers check has() first; read() then
// fails only when the file system does (its Status, which names the file, is passed through).
class Cursor {
 public:
  explicit Cursor(const RandomAccessFile& file) : file_(file) {}

  [[nodiscard]] uint64_t position() const { return pos_; }
  [[nodiscard]] uint64_t remaining() const { return file_.size() - pos_; }
  [[nodiscard]] bool has(uint64_t n) const { return n <= remaining(); }

  Status read(void* dst, size_t n) {
    KEEL_CHECK(has(n));
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

 private:
  Status refill() {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBufferSize, remaining()));
    buf_.resize(n);
    buf_pos_ = 0;
    Status s = file_.read_at(pos_, n, buf_.data());
    if (!s.ok()) buf_.clear();  // never serve bytes a failed read left undefined
    return s;
  }

  const RandomAccessFile& file_;
  uint64_t pos_ = 0;  // file offset of the next byte read()
  std::vector<std::byte> buf_;
  size_t buf_pos_ = 0;  // next unread byte of buf_
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

size_t reserve_size(uint64_t count) { return static_cast<size_t>(std::min(count, kMaxReserve)); }

// A key or tensor name from the file as it may appear in a message: quoted, at most 96 bytes,
// control and non-ASCII bytes escaped as \xNN (names are ASCII by the spec).
std::string quoted(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  constexpr size_t kMaxShown = 96;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
    }
  }
  out += name.size() > kMaxShown ? "'... (" + std::to_string(name.size()) + " bytes)" : "'";
  return out;
}

// The first four bytes of a file, as hex in file order ("47 47 55 46").
std::string hex_bytes(uint32_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const unsigned b = (v >> (8 * i)) & 0xff;
    if (i > 0) s += ' ';
    s += {kHex[b >> 4], kHex[b & 0xf]};
  }
  return s;
}

}  // namespace

// Parses header, metadata and tensor infos into a GgufFile (a friend, so it can fill it).
class HeaderParser {
 public:
  HeaderParser(const RandomAccessFile& file, const ReadOptions& options, GgufFile& out)
      : file_(file), options_(options), cur_(file), out_(out) {}

  Status parse() {
    uint32_t magic = 0;
    KEEL_TRY(read_pod(&magic, "magic"));
    if (magic != kMagic) {
      return corrupt("bad magic: not a GGUF file (first bytes " + hex_bytes(magic) + ")");
    }
    KEEL_TRY(read_pod(&out_.version_, "version"));
    if (out_.version_ == 1) {
      return error(Status::unsupported("GGUF version 1 is not supported (re-convert the model)"));
    }
    if (out_.version_ != 2 && out_.version_ != 3) {
      return error(Status::unsupported("unknown GGUF version " + std::to_string(out_.version_) +
                                       (out_.version_ > 0xffff ? " (big-endian file?)" : "")));
    }
    uint64_t num_tensors = 0, num_kv = 0;
    KEEL_TRY(read_pod(&num_tensors, "tensor count"));
    KEEL_TRY(read_pod(&num_kv, "metadata count"));
    const uint64_t rem = cur_.remaining();
    if (num_kv > rem / kMinPairBytes) {
      return corrupt("metadata count " + std::to_string(num_kv) +
                     " is larger than the file can hold (" + std::to_string(rem) +
                     " bytes follow the header; truncated file?)");
    }
    if (num_tensors > (rem - num_kv * kMinPairBytes) / kMinTensorInfoBytes) {
      return corrupt("tensor count " + std::to_string(num_tensors) +
                     " is larger than the file can hold (" + std::to_string(rem) +
                     " bytes follow the header; truncated file?)");
    }
    KEEL_TRY(parse_metadata(num_kv));
    KEEL_TRY(parse_alignment());
    KEEL_TRY(parse_tensor_infos(num_tensors));
    return check_tensor_layout();
  }

 private:
  // "<path>: [<context>: ]<message>" with the given code.
  Status error(const Status& s) const {
    return context_.empty() ? s.with_prefix(file_.path())
                            : s.with_prefix(context_).with_prefix(file_.path());
  }
  Status corrupt(const std::string& msg) const { return error(Status::corrupt(msg)); }

  // Reads n bytes, or fails (kCorrupt) without reading when fewer remain.
  Status read_bytes(void* dst, uint64_t n, std::string_view what) {
    if (!cur_.has(n)) {
      return corrupt("truncated file: " + std::string(what) + " at offset " +
                     std::to_string(cur_.position()) + " needs " + std::to_string(n) +
                     " bytes, only " + std::to_string(cur_.remaining()) + " remain");
    }
    return cur_.read(dst, static_cast<size_t>(n));
  }

  template <typename T>
  Status read_pod(T* out, std::string_view what) {
    return read_bytes(out, sizeof(T), what);
  }

  Status read_string(std::string* out, std::string_view what) {
    uint64_t len = 0;
    KEEL_TRY(read_pod(&len, what));
    if (!cur_.has(len)) {
      return corrupt(std::string(what) + " of length " + std::to_string(len) + " at offset " +
                     std::to_string(cur_.position() - 8) + " runs past the end of the file (" +
                     std::to_string(cur_.remaining()) + " bytes remain; truncated file?)");
    }
    out->resize(static_cast<size_t>(len));
    return read_bytes(out->data(), len, what);
  }

  // Counts one metadata value against ReadOptions::max_metadata_values.
  Status count_values(uint64_t n) {
    if (n > options_.max_metadata_values - num_values_) {
      return error(Status::out_of_range("metadata holds more than " +
                                        std::to_string(options_.max_metadata_values) +
                                        " values (ReadOptions::max_metadata_values)"));
    }
    num_values_ += n;
    return {};
  }

  Status read_value(ValueType type, Value* out, int depth) {
    switch (type) {
      case ValueType::kUint8:
        return read_scalar<uint8_t>(out, "uint8 value");
      case ValueType::kInt8:
        return read_scalar<int8_t>(out, "int8 value");
      case ValueType::kUint16:
        return read_scalar<uint16_t>(out, "uint16 value");
      case ValueType::kInt16:
        return read_scalar<int16_t>(out, "int16 value");
      case ValueType::kUint32:
        return read_scalar<uint32_t>(out, "uint32 value");
      case ValueType::kInt32:
        return read_scalar<int32_t>(out, "int32 value");
      case ValueType::kFloat32:
        return read_scalar<float>(out, "float32 value");
      case ValueType::kUint64:
        return read_scalar<uint64_t>(out, "uint64 value");
      case ValueType::kInt64:
        return read_scalar<int64_t>(out, "int64 value");
      case ValueType::kFloat64:
        return read_scalar<double>(out, "float64 value");
      case ValueType::kBool: {
        uint8_t b = 0;
        KEEL_TRY(read_pod(&b, "bool value"));
        if (b > 1) {
          return corrupt("bool value " + std::to_string(b) + " at offset " +
                         std::to_string(cur_.position() - 1) + " is not 0 or 1");
        }
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
    return corrupt("unknown value type");  // unreachable: read_value_type() checked it
  }

  template <typename T>
  Status read_scalar(Value* out, std::string_view what) {
    T v{};
    KEEL_TRY(read_pod(&v, what));
    out->data = v;
    return {};
  }

  Status read_value_type(ValueType* out, std::string_view what) {
    uint32_t raw = 0;
    KEEL_TRY(read_pod(&raw, what));
    if (raw >= kNumValueTypes) {
      return corrupt("unknown " + std::string(what) + " " + std::to_string(raw) + " at offset " +
                     std::to_string(cur_.position() - 4));
    }
    *out = static_cast<ValueType>(raw);
    return {};
  }

  // depth: how many arrays enclose this one.
  Status read_array(Value* out, int depth) {
    if (depth >= kMaxArrayDepth) {
      return corrupt("arrays nested more than " + std::to_string(kMaxArrayDepth) +
                     " levels deep at offset " + std::to_string(cur_.position()));
    }
    Array arr;
    KEEL_TRY(read_value_type(&arr.type, "array element type"));
    uint64_t count = 0;
    KEEL_TRY(read_pod(&count, "array length"));
    if (count > cur_.remaining() / min_encoded_size(arr.type)) {
      return corrupt("array of " + std::to_string(count) + " " +
                     std::string(value_type_name(arr.type)) + " values at offset " +
                     std::to_string(cur_.position() - 12) + " is larger than the file can hold (" +
                     std::to_string(cur_.remaining()) + " bytes remain; truncated file?)");
    }
    KEEL_TRY(count_values(count));
    arr.items.reserve(reserve_size(count));
    for (uint64_t i = 0; i < count; ++i) {
      KEEL_TRY(read_value(arr.type, &arr.items.emplace_back(), depth + 1));
    }
    out->data = std::move(arr);
    return {};
  }

  Status parse_metadata(uint64_t num_kv) {
    out_.metadata_.reserve(reserve_size(num_kv));
    for (uint64_t i = 0; i < num_kv; ++i) {
      context_ = "metadata pair " + std::to_string(i);
      KeyValue kv;
      KEEL_TRY(read_string(&kv.key, "metadata key"));
      context_ = "metadata key " + quoted(kv.key);
      ValueType type{};
      KEEL_TRY(read_value_type(&type, "metadata value type"));
      KEEL_TRY(count_values(1));
      KEEL_TRY(read_value(type, &kv.value, 0));
      if (!out_.metadata_index_.emplace(kv.key, out_.metadata_.size()).second) {
        return corrupt("duplicate metadata key, first defined by metadata pair " +
                       std::to_string(out_.metadata_index_[kv.key]));
      }
      out_.metadata_.push_back(std::move(kv));
    }
    context_.clear();
    return {};
  }

  Status parse_alignment() {
    const Value* v = out_.find("general.alignment");
    if (!v) return {};
    context_ = "metadata key 'general.alignment'";
    std::optional<uint64_t> a;
    if (const auto* u = std::get_if<uint64_t>(&v->data)) {
      a = *u;
    } else if (const auto i = v->as_int(); i && *i >= 0) {
      a = static_cast<uint64_t>(*i);
    }
    if (!a || *a == 0 || (*a & (*a - 1)) != 0 || *a > kMaxAlignment) {
      const auto i = v->as_int();
      const std::string got = a   ? std::to_string(*a)
                              : i ? std::to_string(*i)
                                  : "a " + std::string(value_type_name(v->type()));
      return corrupt("alignment must be a power of two from 1 to " + std::to_string(kMaxAlignment) +
                     ", got " + got);
    }
    out_.alignment_ = *a;
    context_.clear();
    return {};
  }

  // Reads the dimensions of tensor `t` into t->shape and t->num_elements.
  Status read_shape(TensorInfo* t) {
    uint32_t n_dims = 0;
    KEEL_TRY(read_pod(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return corrupt("has " + std::to_string(n_dims) + " dimensions (1 to " +
                     std::to_string(kMaxDims) + " allowed)");
    }
    t->shape.resize(n_dims);
    uint64_t elements = 1;
    constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      KEEL_TRY(read_pod(&ne, "tensor dimension"));
      if (ne > kMax) {
        return corrupt("dimension " + std::to_string(d) + " is negative (" +
                       std::to_string(static_cast<int64_t>(ne)) + ")");
      }
      if (ne != 0 && elements > kMax / ne) {
        return corrupt("element count overflows: dimension " + std::to_string(d) + " of " +
                       std::to_string(ne) + " times " + std::to_string(elements) +
                       " elements so far");
      }
      t->shape[d] = static_cast<int64_t>(ne);
      elements *= ne;
    }
    t->num_elements = static_cast<int64_t>(elements);
    return {};
  }

  // Reads the type of tensor `t` into t->dtype and t->num_bytes (shape already read).
  Status read_dtype(TensorInfo* t) {
    uint32_t raw_type = 0;
    KEEL_TRY(read_pod(&raw_type, "tensor type"));
    const auto info = dtype_info(raw_type);
    if (!info) {
      return error(Status::unsupported("unknown tensor type id " + std::to_string(raw_type)));
    }
    t->dtype = info->dtype;
    if (t->shape[0] % info->block_size != 0) {
      return corrupt("row of " + std::to_string(t->shape[0]) +
                     " elements is not a multiple of the " + std::string(info->name) +
                     " block size " + std::to_string(info->block_size));
    }
    const auto blocks = static_cast<uint64_t>(t->num_elements / info->block_size);
    const auto block_bytes = static_cast<uint64_t>(info->block_bytes);
    if (blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
      return corrupt("byte size of " + std::to_string(t->num_elements) + " " +
                     std::string(info->name) + " elements overflows 64 bits");
    }
    t->num_bytes = blocks * block_bytes;
    return {};
  }

  Status parse_tensor_infos(uint64_t num_tensors) {
    out_.tensors_.reserve(reserve_size(num_tensors));
    for (uint64_t i = 0; i < num_tensors; ++i) {
      context_ = "tensor info " + std::to_string(i);
      TensorInfo t;
      KEEL_TRY(read_string(&t.name, "tensor name"));
      context_ = "tensor " + quoted(t.name);
      KEEL_TRY(read_shape(&t));
      KEEL_TRY(read_dtype(&t));
      KEEL_TRY(read_pod(&t.offset, "tensor offset"));
      if (t.offset % out_.alignment_ != 0) {
        return corrupt("data offset " + std::to_string(t.offset) + " is not aligned to " +
                       std::to_string(out_.alignment_));
      }
      if (!out_.tensor_index_.emplace(t.name, out_.tensors_.size()).second) {
        return corrupt("duplicate tensor name, first defined by tensor info " +
                       std::to_string(out_.tensor_index_[t.name]));
      }
      out_.tensors_.push_back(std::move(t));
    }
    context_.clear();
    return {};
  }

  // Places the data section and checks that every tensor lies inside it. Overlap is allowed.
  Status check_tensor_layout() {
    const uint64_t header_end = cur_.position();
    const uint64_t a = out_.alignment_;  // ≤ kMaxAlignment, header_end ≤ file size: no overflow
    out_.data_offset_ = (header_end + a - 1) / a * a;
    out_.file_size_ = file_.size();
    if (!out_.tensors_.empty() && out_.data_offset_ > file_.size()) {
      return corrupt("truncated file: the tensor data section is missing (it would start at " +
                     std::to_string(out_.data_offset_) + ", the file has " +
                     std::to_string(file_.size()) + " bytes)");
    }
    const uint64_t data_size =
        out_.data_offset_ <= file_.size() ? file_.size() - out_.data_offset_ : 0;
    for (const auto& t : out_.tensors_) {
      if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
        return corrupt("tensor " + quoted(t.name) + " (" + std::to_string(t.num_bytes) +
                       " bytes at data offset " + std::to_string(t.offset) +
                       ") lies outside the file's " + std::to_string(data_size) +
                       "-byte data section (truncated file?)");
      }
    }
    return {};
  }

  const RandomAccessFile& file_;
  const ReadOptions& options_;
  Cursor cur_;
  GgufFile& out_;
  std::string context_;      // the pair or tensor being parsed, for error messages
  uint64_t num_values_ = 0;  // metadata values read so far (array elements included)
};

namespace {

// The parts of the data section to read: all of it, less ReadOptions::skip's ranges (each must
// lie within the section). Sorted and disjoint.
Result<std::vector<ByteRange>> ranges_to_read(const RandomAccessFile& file,
                                              const ReadOptions& options,
                                              const std::vector<TensorInfo>& tensors,
                                              uint64_t data_size) {
  if (!options.skip) return std::vector<ByteRange>{{0, data_size}};
  const std::vector<ByteRange> skip = options.skip(tensors);
  for (const ByteRange& r : skip) {
    if (r.offset > data_size || r.bytes > data_size - r.offset) {
      return Status::invalid_argument(file.path() + ": ReadOptions::skip range of " +
                                      std::to_string(r.bytes) + " bytes at data offset " +
                                      std::to_string(r.offset) + " lies outside the " +
                                      std::to_string(data_size) + "-byte data section");
    }
  }
  return complement_ranges(skip, data_size);
}

// Reads or maps the data section of a parsed file.
Status load_data(const RandomAccessFile& file, const ReadOptions& options,
                 const std::vector<TensorInfo>& tensors, AlignedBuffer* owned,
                 std::unique_ptr<MappedRegion>* mapping, const std::byte** data,
                 uint64_t data_offset) {
  const uint64_t data_size = file.size() - data_offset;
  if (options.mode == DataMode::kMmap) {
    KEEL_ASSIGN_OR_RETURN(*mapping, file.map());
    if (!*mapping || (*mapping)->size() < file.size()) {
      return Status::io_error(file.path() + ": mapping holds " +
                              std::to_string(*mapping ? (*mapping)->size() : 0) +
                              " bytes, the file " + std::to_string(file.size()));
    }
    *data = (*mapping)->data() + data_offset;
    return {};
  }
  KEEL_ASSIGN_OR_RETURN(const std::vector<ByteRange> reads,
                        ranges_to_read(file, options, tensors, data_size));
  // Skipped bytes stay as allocated: zero, and untouched (not resident) in a large buffer.
  KEEL_ASSIGN_OR_RETURN(*owned, AlignedBuffer::allocate(static_cast<size_t>(data_size)));
  if (options.skip) {  // a huge page half kept, half skipped would bring the skipped half in
    for (const ByteRange& r : reads) {
      owned->split_huge_page_at(static_cast<size_t>(r.offset));
      owned->split_huge_page_at(static_cast<size_t>(r.end()));
    }
  }
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  const uint64_t total = total_bytes(reads);
  uint64_t done = 0;
  for (const ByteRange& r : reads) {
    for (uint64_t at = r.offset; at < r.end();) {
      const uint64_t n = std::min(kChunk, r.end() - at);
      KEEL_TRY(file.read_at(data_offset + at, static_cast<size_t>(n), owned->data() + at));
      at += n;
      done += n;
      if (options.progress) options.progress(done, total);
    }
  }
  *data = owned->data();
  return {};
}

}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path, const ReadOptions& options) {
  try {
    PosixFileSystem posix;
    FileSystem* fs = options.fs ? options.fs : &posix;
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs->open_readable(path));
    GgufFile out;
    out.path_ = path;
    KEEL_TRY(HeaderParser(*file, options, out).parse());
    if (options.mode == DataMode::kNone || out.tensors_.empty()) return out;
    KEEL_TRY(load_data(*file, options, out.tensors_, &out.owned_data_, &out.mapping_, &out.data_,
                       out.data_offset_));
    return out;
  } catch (const std::bad_alloc&) {
    return Status::resource_exhausted(path + ": out of memory while reading the GGUF file");
  }
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
  const uint64_t data_size = file_size_ - data_offset_;
  KEEL_CHECK_MSG(info.offset <= data_size && info.num_bytes <= data_size - info.offset,
                 "tensor_data() given a TensorInfo that is not from this file");
  return {data_ + info.offset, static_cast<size_t>(info.num_bytes)};
}

std::span<std::byte> GgufFile::mutable_tensor_data(const TensorInfo& info) {
  if (owned_data_.data() == nullptr || data_ != owned_data_.data()) return {};
  const std::span<const std::byte> bytes = tensor_data(info);
  return {owned_data_.data() + (bytes.data() - data_), bytes.size()};
}

}  // namespace keel::gguf
