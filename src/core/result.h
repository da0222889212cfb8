// Result<T>: a value or a non-ok Status, shaped like C++23 std::expected<T, Status> so that a
// later move is mechanical (has_value, value, error, operator*, operator->).
//
// KEEL_TRY(expr)                 propagates a non-ok Status (or a Result's error) to the caller.
// KEEL_ASSIGN_OR_RETURN(lhs, e)  evaluates a Result, returns its error, or assigns its value.
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

#include "core/check.h"
#include "core/status.h"

namespace keel {

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "use Status directly");

 public:
  using value_type = T;

  Result(const T& value) : v_(std::in_place_index<0>, value) {}        // NOLINT(implicit)
  Result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
  template <typename U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, Status> &&
           !std::is_same_v<std::decay_t<U>, Result> && !std::is_same_v<std::decay_t<U>, T>)
      Result(U&& value)
      : v_(std::in_place_index<0>, std::forward<U>(value)) {}              // NOLINT(implicit)
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT(implicit)
    KEEL_CHECK_MSG(!std::get<1>(v_).ok(), "Result constructed from an ok Status");
  }

  [[nodiscard]] bool has_value() const { return v_.index() == 0; }
  [[nodiscard]] bool ok() const { return has_value(); }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    check_value();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check_value();
    return std::get<0>(v_);
  }
  T&& value() && {
    check_value();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; only valid when !has_value().
  const Status& error() const& {
    KEEL_CHECK_MSG(!has_value(), "Result::error() on a value");
    return std::get<1>(v_);
  }
  Status&& error() && {
    KEEL_CHECK_MSG(!has_value(), "Result::error() on a value");
    return std::get<1>(std::move(v_));
  }
  // Ok when holding a value, the error otherwise.
  [[nodiscard]] Status status() const { return has_value() ? Status() : std::get<1>(v_); }

 private:
  void check_value() const {
    if (!has_value()) [[unlikely]]
      internal::check_failed(__FILE__, __LINE__, "Result::value() on an error",
                             std::get<1>(v_).to_string().c_str());
  }
  std::variant<T, Status> v_;
};

namespace internal {
inline Status as_status(Status s) { return s; }
template <typename T>
Status as_status(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace keel

#define KEEL_CONCAT_IMPL(a, b) a##b
#define KEEL_CONCAT(a, b) KEEL_CONCAT_IMPL(a, b)

#define KEEL_TRY(expr)                                                   \
  do {                                                                   \
    ::keel::Status keel_try_status_ = ::keel::internal::as_status(expr); \
    if (!keel_try_status_.ok()) [[unlikely]]                             \
      return keel_try_status_;                                           \
  } while (0)

#define KEEL_ASSIGN_OR_RETURN(lhs, expr) \
  KEEL_ASSIGN_OR_RETURN_IMPL(KEEL_CONCAT(keel_result_, __LINE__), lhs, expr)
#define KEEL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.has_value()) [[unlikely]]               \
    return std::move(tmp).error();                 \
  lhs = std::move(tmp).value()
