// MessagePack envelope and FieldReader (see wire_json.h).
#include "engine/wire_json.h"

#include <cmath>
#include <exception>
#include <utility>

#include "net/bounded_msgpack.h"

namespace keel::engine::wire::detail {
namespace {

constexpr MessageType kTypes[] = {
    MessageType::kGenerationRequest, MessageType::kTokenEvent, MessageType::kEngineStats,
    MessageType::kMetrics,           MessageType::kStatus,     MessageType::kContextCaches};

Status invalid(const std::string& what) { return Status::invalid_argument("wire: " + what); }

}  // namespace

std::string describe(const Json& v) {
  constexpr size_t kMaxChars = 64;
  std::string text = v.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

Bytes pack(MessageType type, Json body) {
  Json envelope = Json::object();
  envelope["v"] = kVersion;
  envelope["type"] = std::string(message_type_name(type));
  envelope["body"] = std::move(body);
  return Json::to_msgpack(envelope);
}

Result<Json> parse_bounded(std::span<const uint8_t> bytes) {
  Result<Json> doc = net::parse_bounded_msgpack(bytes, kMaxDepth);
  if (!doc.ok()) return invalid(doc.status().message());
  return doc;
}

Result<Unpacked> unpack(std::span<const uint8_t> bytes) {
  KEEL_ASSIGN_OR_RETURN(Json doc, parse_bounded(bytes));
  if (!doc.is_object()) return invalid("a message is a map, got " + std::string(doc.type_name()));
  const auto v = doc.find("v");
  if (v == doc.end() || !v->is_number_integer()) return invalid("no version (`v`)");
  if (v->get<int64_t>() != kVersion) {
    return invalid("unsupported version " + describe(*v) + " (this build speaks " +
                   std::to_string(kVersion) + ")");
  }
  const auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) return invalid("no message type (`type`)");
  const auto body = doc.find("body");
  if (body == doc.end() || !body->is_object()) return invalid("no message body (`body`)");
  for (MessageType t : kTypes) {
    if (type->get_ref<const std::string&>() == message_type_name(t)) {
      return Unpacked{t, std::move(*body)};
    }
  }
  return invalid("unknown message type " + describe(*type));
}

Result<Json> unpack_body(std::span<const uint8_t> bytes, MessageType expected) {
  KEEL_ASSIGN_OR_RETURN(Unpacked u, unpack(bytes));
  if (u.type != expected) {
    return invalid("expected a " + std::string(message_type_name(expected)) + ", got a " +
                   std::string(message_type_name(u.type)));
  }
  return std::move(u.body);
}

FieldReader::FieldReader(const Json& object, std::string where)
    : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) {
    status_ = invalid(where_ + " must be a map, got " + std::string(object_.type_name()));
  }
}

void FieldReader::fail(const char* key, const std::string& what) {
  if (status_.ok()) status_ = invalid(where_ + "." + key + ": " + what);
}

const Json* FieldReader::field(const char* key) const {
  if (!status_.ok() || !object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

bool FieldReader::has(const char* key) const { return field(key) != nullptr; }

bool to_i32(const Json& v, int32_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return false;
    *out = static_cast<int32_t>(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  const int64_t i = v.get<int64_t>();
  if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  *out = static_cast<int32_t>(i);
  return true;
}

bool to_f32(const Json& v, float* out) {
  if (!v.is_number()) return false;
  *out = static_cast<float>(v.get<double>());
  return true;
}

std::optional<int64_t> FieldReader::integer(const char* key, const Json& v, int64_t lo,
                                            int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (hi >= 0 && u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo) {
      return static_cast<int64_t>(u);
    }
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= lo && i <= hi) return i;
  } else {
    fail(key, "expected an integer, got " + std::string(v.type_name()));
    return std::nullopt;
  }
  fail(key, describe(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return std::nullopt;
}

void FieldReader::i64(const char* key, int64_t* out, int64_t lo, int64_t hi) {
  if (const Json* v = field(key)) {
    if (auto i = integer(key, *v, lo, hi)) *out = *i;
  }
}

void FieldReader::i32(const char* key, int32_t* out, int32_t lo, int32_t hi) {
  if (const Json* v = field(key)) {
    if (auto i = integer(key, *v, lo, hi)) *out = static_cast<int32_t>(*i);
  }
}

void FieldReader::u64(const char* key, uint64_t* out) {
  const Json* v = field(key);
  if (v == nullptr) return;
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
  } else {
    fail(key, "expected an unsigned integer, got " + describe(*v));
  }
}

void FieldReader::optional_u64(const char* key, std::optional<uint64_t>* out) {
  if (field(key) == nullptr) return;
  uint64_t v = 0;
  u64(key, &v);
  if (ok()) *out = v;
}

void FieldReader::optional_i32(const char* key, std::optional<int32_t>* out) {
  if (field(key) == nullptr) return;
  int32_t v = 0;
  i32(key, &v);
  if (ok()) *out = v;
}

void FieldReader::f64(const char* key, double* out) {
  const Json* v = field(key);
  if (v == nullptr) return;
  if (!v->is_number()) {
    fail(key, "expected a number, got " + std::string(v->type_name()));
    return;
  }
  *out = v->get<double>();
}

void FieldReader::f32(const char* key, float* out) {
  double d = *out;
  f64(key, &d);
  if (ok()) *out = static_cast<float>(d);  // out of float range becomes ±inf, as in any cast
}

void FieldReader::boolean(const char* key, bool* out) {
  const Json* v = field(key);
  if (v == nullptr) return;
  if (!v->is_boolean()) {
    fail(key, "expected a boolean, got " + std::string(v->type_name()));
    return;
  }
  *out = v->get<bool>();
}

void FieldReader::str(const char* key, std::string* out) {
  const Json* v = field(key);
  if (v == nullptr) return;
  if (!v->is_string()) {
    fail(key, "expected a string, got " + std::string(v->type_name()));
    return;
  }
  *out = v->get<std::string>();
}

const Json* FieldReader::array(const char* key) {
  const Json* v = field(key);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    fail(key, "expected an array, got " + std::string(v->type_name()));
    return nullptr;
  }
  return v;
}

const Json* FieldReader::object(const char* key) {
  const Json* v = field(key);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    fail(key, "expected a map, got " + std::string(v->type_name()));
    return nullptr;
  }
  return v;
}

void FieldReader::i32_list(const char* key, std::vector<int32_t>* out) {
  const Json* a = array(key);
  if (a == nullptr) return;
  std::vector<int32_t> values;
  values.reserve(a->size());
  for (const Json& e : *a) {
    const std::optional<int64_t> i =
        integer(key, e, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    if (!i) return;
    values.push_back(static_cast<int32_t>(*i));
  }
  *out = std::move(values);
}

void FieldReader::u64_list(const char* key, std::vector<uint64_t>* out) {
  const Json* a = array(key);
  if (a == nullptr) return;
  std::vector<uint64_t> values;
  values.reserve(a->size());
  for (const Json& e : *a) {
    if (!e.is_number_unsigned()) return fail(key, "expected unsigned integers, got " + describe(e));
    values.push_back(e.get<uint64_t>());
  }
  *out = std::move(values);
}

void FieldReader::f64_list(const char* key, std::vector<double>* out) {
  const Json* a = array(key);
  if (a == nullptr) return;
  std::vector<double> values;
  values.reserve(a->size());
  for (const Json& e : *a) {
    if (!e.is_number()) return fail(key, "expected numbers, got " + std::string(e.type_name()));
    values.push_back(e.get<double>());
  }
  *out = std::move(values);
}

void FieldReader::str_list(const char* key, std::vector<std::string>* out) {
  const Json* a = array(key);
  if (a == nullptr) return;
  std::vector<std::string> values;
  values.reserve(a->size());
  for (const Json& e : *a) {
    if (!e.is_string()) return fail(key, "expected strings, got " + std::string(e.type_name()));
    values.push_back(e.get<std::string>());
  }
  *out = std::move(values);
}

}  // namespace keel::engine::wire::detail
