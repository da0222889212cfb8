// Decimal (decimal.h): parsing JSON number text and exact comparisons and roundings.
#include "grammar/decimal.h"

#include <algorithm>
#include <limits>

namespace keel::grammar {
namespace {

void normalize(Decimal* d) {
  const size_t first = d->digits.find_first_not_of('0');
  if (first == std::string::npos) {
    *d = Decimal{};
    return;
  }
  d->digits.erase(0, first);
  while (d->digits.back() == '0') {
    d->digits.pop_back();
    ++d->exp;
  }
}

// |value| × 10^shift rounded toward zero, and whether anything was cut off; clamped to limit.
std::pair<int64_t, bool> truncate_scaled(const Decimal& d, int32_t shift, int64_t limit) {
  if (d.is_zero()) return {0, false};
  const int64_t e = int64_t{d.exp} + shift;  // value × 10^shift = digits × 10^e
  const int64_t n = static_cast<int64_t>(d.digits.size());
  if (n + e > 19) return {limit, false};  // at least 10^19 > any limit
  const int64_t keep = std::min<int64_t>(n, n + e);
  int64_t v = 0;
  for (int64_t i = 0; i < keep; ++i) {
    v = v * 10 + (d.digits[static_cast<size_t>(i)] - '0');
    if (v > limit) return {limit, false};
  }
  for (int64_t i = 0; i < e; ++i) {
    if (v > limit / 10) return {limit, false};
    v *= 10;
  }
  return {std::min(v, limit), keep < n};
}

}  // namespace

std::optional<Decimal> Decimal::parse(std::string_view t) {
  Decimal d;
  size_t i = 0;
  if (i < t.size() && t[i] == '-') {
    d.negative = true;
    ++i;
  }
  bool any = false, point = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c >= '0' && c <= '9') {
      d.digits += c;
      if (point) --d.exp;
      any = true;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      break;
    }
  }
  if (!any) return std::nullopt;
  if (i < t.size()) {
    if (t[i] != 'e' && t[i] != 'E') return std::nullopt;
    ++i;
    bool neg = false;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
    int32_t e = 0;
    if (i >= t.size()) return std::nullopt;
    for (; i < t.size(); ++i) {
      if (t[i] < '0' || t[i] > '9' || e > 100000) return std::nullopt;
      e = e * 10 + (t[i] - '0');
    }
    d.exp += neg ? -e : e;
  }
  const bool negative = d.negative;
  normalize(&d);
  d.negative = negative && !d.is_zero();
  return d;
}

Decimal Decimal::from_int(int64_t v) {
  Decimal d;
  d.negative = v < 0;
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  d.digits = std::to_string(u);
  normalize(&d);
  return d;
}

Decimal Decimal::abs() const {
  Decimal d = *this;
  d.negative = false;
  return d;
}

Decimal Decimal::negated() const {
  Decimal d = *this;
  d.negative = !negative && !is_zero();
  return d;
}

int64_t Decimal::floor_scaled(int32_t shift, int64_t limit) const {
  auto [v, cut] = truncate_scaled(*this, shift, limit);
  if (!negative) return v;
  return -std::min(limit, v + (cut ? 1 : 0));
}

int64_t Decimal::ceil_scaled(int32_t shift, int64_t limit) const {
  auto [v, cut] = truncate_scaled(*this, shift, limit);
  if (negative) return -v;
  return std::min(limit, v + (cut ? 1 : 0));
}

std::string Decimal::int_digits() const {
  if (is_zero()) return "0";
  const int64_t n = static_cast<int64_t>(digits.size()) + exp;  // integer digits
  if (n <= 0) return "0";
  if (exp >= 0) return digits + std::string(static_cast<size_t>(exp), '0');
  return digits.substr(0, static_cast<size_t>(n));
}

std::string Decimal::frac_digits() const {
  if (exp >= 0) return "";
  const int64_t n = static_cast<int64_t>(digits.size()) + exp;
  if (n >= 0) return digits.substr(static_cast<size_t>(n));
  return std::string(static_cast<size_t>(-n), '0') + digits;
}

std::string Decimal::to_string() const {
  std::string s = negative ? "-" : "";
  s += int_digits();
  const std::string f = frac_digits();
  if (!f.empty()) s += "." + f;
  return s;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int sign = a.negative ? -1 : 1;
  if (a.is_zero() || b.is_zero()) {
    if (a.is_zero() && b.is_zero()) return 0;
    return a.is_zero() ? -sign : sign;
  }
  // Compare magnitudes: the position of the leading digit, then the digits.
  const int64_t la = static_cast<int64_t>(a.digits.size()) + a.exp;
  const int64_t lb = static_cast<int64_t>(b.digits.size()) + b.exp;
  if (la != lb) return la < lb ? -sign : sign;
  const size_t n = std::max(a.digits.size(), b.digits.size());
  for (size_t i = 0; i < n; ++i) {
    const char da = i < a.digits.size() ? a.digits[i] : '0';
    const char db = i < b.digits.size() ? b.digits[i] : '0';
    if (da != db) return da < db ? -sign : sign;
  }
  return 0;
}

}  // namespace keel::grammar
