// Decimal: the exact value of a JSON number as its text writes it (digits × 10^exp), for the
// numeric keywords of JSON Schema (minimum, maximum, multipleOf, ...). JSON Schema compares
// mathematical values; keel reads a bound from the shortest text that round-trips its double
// (nlohmann's dump), so 0.1 is exactly 1/10 here, not the double nearest to it.
// Thread safety: values; pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel::grammar {

struct Decimal {
  bool negative = false;  // never set for zero
  std::string digits;     // no leading or trailing zeros; "" for zero
  int32_t exp = 0;        // value = digits × 10^exp

  // Parses JSON number text ("-12.50", "1e-05", "3"); nullopt if it is not one.
  static std::optional<Decimal> parse(std::string_view text);
  static Decimal from_int(int64_t v);

  [[nodiscard]] bool is_zero() const { return digits.empty(); }
  [[nodiscard]] bool is_integer() const { return exp >= 0; }
  [[nodiscard]] Decimal abs() const;
  [[nodiscard]] Decimal negated() const;
  // floor(value × 10^shift) / ceil(value × 10^shift), clamped to ±limit.
  [[nodiscard]] int64_t floor_scaled(int32_t shift, int64_t limit) const;
  [[nodiscard]] int64_t ceil_scaled(int32_t shift, int64_t limit) const;
  // The integer part of |value| (digits, "0" for zero) and the fraction digits of |value|
  // (without trailing zeros, "" when the value is an integer).
  [[nodiscard]] std::string int_digits() const;
  [[nodiscard]] std::string frac_digits() const;
  // Number of significant digits after the point (0 for integers).
  [[nodiscard]] int32_t scale() const { return exp < 0 ? -exp : 0; }
  [[nodiscard]] std::string to_string() const;
};

// −1, 0, 1 as a < b, a == b, a > b (exact).
int compare(const Decimal& a, const Decimal& b);

}  // namespace keel::grammar
