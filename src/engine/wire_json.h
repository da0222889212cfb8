// The codec's lower layer (wire.h is the upper): MessagePack bytes ⇄ a JSON document with a bounded
// parse (net/bounded_msgpack.h: nesting deeper than kMaxDepth is refused before it is built, so
// hostile input cannot exhaust the stack), the envelope {"v", "type", "body"}, and FieldReader —
// typed, range-checked reads of a body's fields that remember the first error. wire.cpp and the
// cluster's messages (src/cluster/protocol/messages.cpp, which carry engine messages inside their
// own) include this file; no exception leaves it (nlohmann's are caught here).
//
// Thread safety: pure functions; a FieldReader has one owner.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "engine/wire.h"

namespace keel::engine::wire::detail {

using Json = nlohmann::json;

// A MessagePack document with nesting at most kMaxDepth; InvalidArgument for anything else.
[[nodiscard]] Result<Json> parse_bounded(std::span<const uint8_t> bytes);
// The envelope of `body` as MessagePack.
[[nodiscard]] Bytes pack(MessageType type, Json body);
// The envelope's type and body (an object); InvalidArgument for anything else.
struct Unpacked {
  MessageType type = MessageType::kStatus;
  Json body;
};
[[nodiscard]] Result<Unpacked> unpack(std::span<const uint8_t> bytes);
// unpack(), and the type must be `expected`.
[[nodiscard]] Result<Json> unpack_body(std::span<const uint8_t> bytes, MessageType expected);

// A short, printable rendering of `v` for error messages (invalid UTF-8 replaced, long values
// cut); never throws.
[[nodiscard]] std::string describe(const Json& v);

// One value as an int32 / a float: false when it is not a number of that kind (or out of range).
[[nodiscard]] bool to_i32(const Json& v, int32_t* out);
[[nodiscard]] bool to_f32(const Json& v, float* out);

// Reads fields of one JSON object. A missing field leaves its output untouched (the default); a
// present one of the wrong type or out of range records an error, after which reads do nothing.
class FieldReader {
 public:
  // `where` names the object in error messages ("generation_request.sampling").
  FieldReader(const Json& object, std::string where);

  void i64(const char* key, int64_t* out, int64_t lo = std::numeric_limits<int64_t>::min(),
           int64_t hi = std::numeric_limits<int64_t>::max());
  void i32(const char* key, int32_t* out, int32_t lo = std::numeric_limits<int32_t>::min(),
           int32_t hi = std::numeric_limits<int32_t>::max());
  void u64(const char* key, uint64_t* out);
  void optional_u64(const char* key, std::optional<uint64_t>* out);
  void optional_i32(const char* key, std::optional<int32_t>* out);
  void f32(const char* key, float* out);  // any number; NaN and ±inf pass (msgpack floats)
  void f64(const char* key, double* out);
  void boolean(const char* key, bool* out);
  void str(const char* key, std::string* out);
  void i32_list(const char* key, std::vector<int32_t>* out);
  void u64_list(const char* key, std::vector<uint64_t>* out);
  void f64_list(const char* key, std::vector<double>* out);
  void str_list(const char* key, std::vector<std::string>* out);
  // The field when it is an array / an object; nullptr when missing, mistyped (an error) or after
  // an error.
  [[nodiscard]] const Json* array(const char* key);
  [[nodiscard]] const Json* object(const char* key);

  // True when the object has field `key` (and no error was recorded).
  [[nodiscard]] bool has(const char* key) const;
  // Records an error about `key` (for checks the typed reads cannot make, e.g. enum names).
  void fail(const char* key, const std::string& what);
  [[nodiscard]] bool ok() const { return status_.ok(); }
  [[nodiscard]] const Status& status() const { return status_; }
  [[nodiscard]] const std::string& where() const { return where_; }

 private:
  const Json* field(const char* key) const;  // nullptr when missing or after an error
  std::optional<int64_t> integer(const char* key, const Json& v, int64_t lo, int64_t hi);

  const Json& object_;
  std::string where_;
  Status status_;
};

// Every finish reason, for the codecs that name them (events, metrics).
inline constexpr FinishReason kFinishReasons[] = {FinishReason::kStop, FinishReason::kLength,
                                                  FinishReason::kAbort, FinishReason::kError};

// The stats and metrics bodies (wire_stats.cpp).
Json encode_stats_body(const EngineStats& s);
Status decode_stats_body(const Json& j, EngineStats* s);
Json encode_metrics_body(const MetricsSnapshot& m);
Status decode_metrics_body(const Json& j, MetricsSnapshot* m);

}  // namespace keel::engine::wire::detail
