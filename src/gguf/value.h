// GGUF metadata values: the 13 value types of the format, including arrays (of any type, nested
// arrays included). Plain data; the reader produces them and the writer consumes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace keel::gguf {

// Numbering as in the GGUF specification; also the index of the alternative in Value::data.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kNumValueTypes = 13;

std::string_view value_type_name(ValueType type);

struct Value;

struct Array {
  ValueType type = ValueType::kUint8;  // element type (kArray for nested arrays)
  std::vector<Value> items;
};

struct Value {
  using Data = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                            std::string, Array, uint64_t, int64_t, double>;
  Data data;

  Value() = default;
  template <typename T>
  Value(T v) : data(std::move(v)) {}  // NOLINT(implicit): Value{uint32_t{3}}, Value{"text"s}
  Value(const char* s) : data(std::string(s)) {}  // NOLINT(implicit)

  [[nodiscard]] ValueType type() const { return static_cast<ValueType>(data.index()); }
  // Integer value of any integer type (bools excluded); nullopt for other types or when a uint64
  // does not fit.
  [[nodiscard]] std::optional<int64_t> as_int() const;
  // Any numeric type (integers and floats) as double.
  [[nodiscard]] std::optional<double> as_double() const;
  [[nodiscard]] std::optional<bool> as_bool() const;
  [[nodiscard]] const std::string* as_string() const { return std::get_if<std::string>(&data); }
  [[nodiscard]] const Array* as_array() const { return std::get_if<Array>(&data); }
};

struct KeyValue {
  std::string key;
  Value value;
};

// Builds an array value from a vector of scalars or strings.
template <typename T>
Value make_array(ValueType type, const std::vector<T>& items) {
  Array a;
  a.type = type;
  a.items.reserve(items.size());
  for (const auto& it : items) a.items.emplace_back(it);
  return Value(std::move(a));
}

}  // namespace keel::gguf
