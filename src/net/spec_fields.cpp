// SpecFields; see spec_fields.h.
#include "net/spec_fields.h"

#include <fmt/format.h>

namespace keel::net {

using Json = nlohmann::json;

Status SpecFields::check_version() {
  if (obj_.find("v") == obj_.end()) {
    return Status::invalid_argument(what_ + ": no version ('v')");
  }
  int64_t version = 0;
  KEEL_TRY(integer("v", 1, kMaxI64, &version));
  if (version > version_) {
    return Status::failed_precondition(
        fmt::format("{} version {} is newer than this keel reads ({}): upgrade keel here", what_,
                    version, version_));
  }
  return {};
}

Status SpecFields::str(const char* key, std::string* out) {
  const Json* v = take(key);
  if (v == nullptr) return {};
  if (!v->is_string()) return bad(key, "is not a string");
  *out = v->get<std::string>();
  return {};
}

Status SpecFields::boolean(const char* key, bool* out) {
  const Json* v = take(key);
  if (v == nullptr) return {};
  if (!v->is_boolean()) return bad(key, "is not true or false");
  *out = v->get<bool>();
  return {};
}

Status SpecFields::read_integer(const char* key, int64_t lo, int64_t hi, int64_t* out,
                                bool* present) {
  const Json* v = take(key);
  *present = v != nullptr;
  if (v == nullptr) return {};
  if (!v->is_number_integer()) return bad(key, "is not an integer");
  const int64_t n = v->get<int64_t>();
  if (n < lo || n > hi) return bad(key, fmt::format("is {}, not in [{}, {}]", n, lo, hi));
  *out = n;
  return {};
}

Status SpecFields::number(const char* key, double lo, double* out) {
  const Json* v = take(key);
  if (v == nullptr) return {};
  if (!v->is_number()) return bad(key, "is not a number");
  const double d = v->get<double>();
  if (!(d >= lo)) return bad(key, fmt::format("is below {}", lo));
  *out = d;
  return {};
}

Status SpecFields::strings(const char* key, std::vector<std::string>* out) {
  const Json* v = take(key);
  if (v == nullptr) return {};
  if (!v->is_array()) return bad(key, "is not a list");
  out->clear();
  for (const Json& s : *v) {
    if (!s.is_string()) return bad(key, "holds a non-string");
    out->push_back(s.get<std::string>());
  }
  return {};
}

Result<const Json*> SpecFields::object(const char* key) {
  const Json* v = take(key);
  if (v != nullptr && !v->is_object()) return bad(key, "is not an object");
  return v;
}

Status SpecFields::one_of(const char* key, std::initializer_list<std::string_view> allowed,
                          std::string* out) {
  KEEL_TRY(str(key, out));
  for (std::string_view a : allowed) {
    if (*out == a) return {};
  }
  return bad(key, "is '" + *out + "'");
}

Status SpecFields::finish() const {
  for (const auto& [key, value] : obj_.items()) {
    if (seen_.count(key) == 0) {
      return bad(key, "is not a field of version " + std::to_string(version_));
    }
  }
  return {};
}

const Json* SpecFields::take(const char* key) {
  seen_.insert(key);
  const auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

Status SpecFields::bad(std::string_view key, const std::string& why) const {
  return Status::invalid_argument(fmt::format("{}: '{}' {}", what_, key, why));
}

}  // namespace keel::net
