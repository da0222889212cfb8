// SpecFields: the strict reader of a versioned spec's JSON object (te_spec.h, je_spec.h). Each
// field is read by name and optional (the default stands when absent); a field nobody asked for
// is refused by finish(), and check_version() reads "v": present, an integer >= 1, and not newer
// than the reader's version (FailedPrecondition naming both versions). Errors are InvalidArgument
// naming the object and the field.
//
// Thread safety: one reader per thread; the object must outlive it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::net {

inline constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

class SpecFields {
 public:
  // `what` names the object in errors ("te spec: membership"); `version` is the reader's.
  SpecFields(const nlohmann::json& obj, std::string what, int version)
      : obj_(obj), what_(std::move(what)), version_(version) {}

  [[nodiscard]] Status check_version();
  [[nodiscard]] Status str(const char* key, std::string* out);
  [[nodiscard]] Status boolean(const char* key, bool* out);
  template <typename Int>
  [[nodiscard]] Status integer(const char* key, int64_t lo, int64_t hi, Int* out) {
    int64_t n = 0;
    bool present = false;
    KEEL_TRY(read_integer(key, lo, hi, &n, &present));
    if (present) *out = static_cast<Int>(n);
    return {};
  }
  [[nodiscard]] Status number(const char* key, double lo, double* out);
  [[nodiscard]] Status strings(const char* key, std::vector<std::string>* out);
  // The nested object `key`, or null when absent.
  [[nodiscard]] Result<const nlohmann::json*> object(const char* key);
  [[nodiscard]] Status one_of(const char* key, std::initializer_list<std::string_view> allowed,
                              std::string* out);
  // InvalidArgument naming the first field that no read asked for.
  [[nodiscard]] Status finish() const;

 private:
  const nlohmann::json* take(const char* key);
  Status read_integer(const char* key, int64_t lo, int64_t hi, int64_t* out, bool* present);
  [[nodiscard]] Status bad(std::string_view key, const std::string& why) const;

  const nlohmann::json& obj_;
  std::string what_;
  int version_;
  std::set<std::string> seen_;
};

}  // namespace keel::net
