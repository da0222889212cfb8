// Test-only helpers for the GGUF tests: a raw little-endian byte builder for hand-crafted (and
// deliberately broken) files, temp-file helpers, a small valid model, deep Value comparison and an
// assertion that an open() failed with a given code and a message naming the file and problem.
//
// Thread safety: none; each test builds its own objects.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace keel::gguf::test_util {

// Appends raw GGUF encodings; nothing is validated, so any broken layout can be written.
class ByteBuilder {
 public:
  template <typename T>
  ByteBuilder& pod(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  ByteBuilder& u8(uint8_t v) { return pod(v); }
  ByteBuilder& u32(uint32_t v) { return pod(v); }
  ByteBuilder& u64(uint64_t v) { return pod(v); }
  // A GGUF string: uint64 length, then the bytes.
  ByteBuilder& str(std::string_view s);
  // Magic, version, tensor count, metadata count.
  ByteBuilder& header(uint32_t version, uint64_t num_tensors, uint64_t num_kv);
  // A metadata pair with a uint32 value.
  ByteBuilder& kv_u32(std::string_view key, uint32_t v);
  // A tensor info: name, dimension count, dimensions, type id, data offset.
  ByteBuilder& tensor_info(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                           uint64_t offset);
  // Zero bytes up to the next multiple of `alignment`.
  ByteBuilder& pad_to(uint64_t alignment);
  ByteBuilder& zeros(size_t n);

  [[nodiscard]] const std::vector<std::byte>& bytes() const { return bytes_; }
  [[nodiscard]] size_t size() const { return bytes_.size(); }

 private:
  std::vector<std::byte> bytes_;
};

// Writes `bytes` to `path` (created or truncated); fails the test on error.
void write_bytes(const std::string& path, const std::vector<std::byte>& bytes);
std::vector<std::byte> read_bytes(const std::string& path);

// A small valid model: metadata (scalars, a string array, a nested array) and three tensors
// "a" (F32 4x2), "b" (Q8_0 32x1) and "c" (F32 3, so the file ends in padding).
GgufWriter small_model(uint32_t version = 3);
// Writes small_model() to "<dir>/small.gguf" and returns the path.
std::string write_small_model(const std::string& dir);

// Deep equality of values: same type at every level, floats compared bit for bit.
::testing::AssertionResult values_equal(const Value& a, const Value& b);

// Success when `r` failed with `code` and a message that starts with "<path>: " and contains
// `needle`.
::testing::AssertionResult fails_with(const Result<GgufFile>& r, StatusCode code,
                                      const std::string& path, std::string_view needle);

}  // namespace keel::gguf::test_util
