// Test-only helpers for the GGUF tests (see gguf_test_util.h).
#include "gguf_test_util.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <variant>

namespace keel::gguf::test_util {

ByteBuilder& ByteBuilder::str(std::string_view s) {
  u64(s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  bytes_.insert(bytes_.end(), p, p + s.size());
  return *this;
}

ByteBuilder& ByteBuilder::header(uint32_t version, uint64_t num_tensors, uint64_t num_kv) {
  return u32(kMagic).u32(version).u64(num_tensors).u64(num_kv);
}

ByteBuilder& ByteBuilder::kv_u32(std::string_view key, uint32_t v) {
  return str(key).u32(static_cast<uint32_t>(ValueType::kUint32)).u32(v);
}

ByteBuilder& ByteBuilder::tensor_info(std::string_view name, const std::vector<uint64_t>& dims,
                                      uint32_t type, uint64_t offset) {
  str(name).u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) u64(d);
  return u32(type).u64(offset);
}

ByteBuilder& ByteBuilder::pad_to(uint64_t alignment) {
  while (bytes_.size() % alignment != 0) bytes_.push_back(std::byte{0});
  return *this;
}

ByteBuilder& ByteBuilder::zeros(size_t n) {
  bytes_.insert(bytes_.end(), n, std::byte{0});
  return *this;
}

void write_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

GgufWriter small_model(uint32_t version) {
  GgufWriter w(version);
  w.set("general.architecture", "llama");
  w.set("llama.block_count", uint32_t{2});
  w.set("tokenizer.ggml.tokens", make_array<std::string>(ValueType::kString, {"<s>", "", "a"}));
  w.set("test.scores", make_array<float>(ValueType::kFloat32, {0.5f, -1.0f}));
  Array inner;
  inner.type = ValueType::kInt16;
  inner.items = {int16_t{-3}, int16_t{7}};
  Array outer;
  outer.type = ValueType::kArray;
  outer.items = {Value(inner), Value(Array{ValueType::kInt16, {}})};
  w.set("test.nested", Value(outer));
  w.set("test.flag", true);
  std::vector<float> a(8), c(3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) + 0.25f;
  for (size_t i = 0; i < c.size(); ++i) c[i] = -static_cast<float>(i);
  std::vector<std::byte> b(34);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i * 7 + 1);
  EXPECT_TRUE(w.add_tensor("a", DType::kF32, {4, 2}, std::as_bytes(std::span(a))).ok());
  EXPECT_TRUE(w.add_tensor("b", DType::kQ8_0, {32, 1}, b).ok());
  EXPECT_TRUE(w.add_tensor("c", DType::kF32, {3}, std::as_bytes(std::span(c))).ok());
  return w;
}

std::string write_small_model(const std::string& dir) {
  const std::string path = dir + "/small.gguf";
  const Status s = small_model().write(path);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return path;
}

::testing::AssertionResult values_equal(const Value& a, const Value& b) {
  if (a.type() != b.type()) {
    return ::testing::AssertionFailure()
           << "type " << value_type_name(a.type()) << " vs " << value_type_name(b.type());
  }
  if (const Array* x = a.as_array()) {
    const Array* y = b.as_array();
    if (x->type != y->type) {
      return ::testing::AssertionFailure()
             << "element type " << value_type_name(x->type) << " vs " << value_type_name(y->type);
    }
    if (x->items.size() != y->items.size()) {
      return ::testing::AssertionFailure()
             << "length " << x->items.size() << " vs " << y->items.size();
    }
    for (size_t i = 0; i < x->items.size(); ++i) {
      auto r = values_equal(x->items[i], y->items[i]);
      if (!r) return ::testing::AssertionFailure() << "[" << i << "]: " << r.message();
    }
    return ::testing::AssertionSuccess();
  }
  if (const auto* f = std::get_if<float>(&a.data)) {
    if (std::bit_cast<uint32_t>(*f) == std::bit_cast<uint32_t>(std::get<float>(b.data))) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "float bits differ";
  }
  if (const auto* d = std::get_if<double>(&a.data)) {
    if (std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(b.data))) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "double bits differ";
  }
  const bool same = std::visit(
      [&b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Array>) {
          return false;  // handled above
        } else {
          return x == std::get<T>(b.data);
        }
      },
      a.data);
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << value_type_name(a.type()) << " values differ";
}

::testing::AssertionResult fails_with(const Result<GgufFile>& r, StatusCode code,
                                      const std::string& path, std::string_view needle) {
  if (r.ok()) return ::testing::AssertionFailure() << "open succeeded; expected " << needle;
  const Status& s = r.error();
  const std::string& msg = s.message();
  if (s.code() != code) {
    return ::testing::AssertionFailure() << "code " << status_code_name(s.code()) << ", expected "
                                         << status_code_name(code) << ": " << msg;
  }
  if (msg.rfind(path + ": ", 0) != 0) {
    return ::testing::AssertionFailure() << "message does not start with the path: " << msg;
  }
  if (msg.find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << msg;
  }
  return ::testing::AssertionSuccess() << msg;
}

}  // namespace keel::gguf::test_util
