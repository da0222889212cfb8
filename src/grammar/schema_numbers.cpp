// Numeric keywords → GBNF (schema_numbers.h): bounds read exactly (decimal.h), split by sign
// into magnitude ranges, then digit ranges (digit_ranges.h) and fraction automata.
#include "grammar/schema_numbers.h"

#include <fmt/format.h>

#include <numeric>
#include <optional>
#include <vector>

#include "grammar/decimal.h"
#include "grammar/digit_ranges.h"

namespace keel::grammar {
namespace {

constexpr int64_t kSafeInt = 9007199254740991;      // 2^53 − 1
constexpr int64_t kMaxMagnitude = 999999999999999;  // 15 digits
constexpr int kMaxDigits = 15;                      // significant digits of a bounded number

struct Side {
  Decimal v;
  bool inclusive = true;
};

struct Limits {
  std::optional<Side> lower, upper;
  std::optional<Decimal> multiple;
  std::string names;  // the keywords present, for messages ("`minimum`, `maximum`")
};

Status keyword_error(std::string_view key, std::string_view what) {
  return Status::invalid_argument(fmt::format("JSON Schema keyword `{}` {}", key, what));
}

Result<Decimal> read_number(const SchemaJson& s, const char* key) {
  const SchemaJson& v = s[key];
  std::optional<Decimal> d;
  if (v.is_number()) d = Decimal::parse(v.dump());
  if (!d) return keyword_error(key, "must be a number");
  return *d;
}

// Keeps the tighter of two lower (or upper) bounds.
void tighten(std::optional<Side>* cur, Side s, bool lower) {
  if (!*cur) {
    *cur = s;
    return;
  }
  const int c = compare(s.v, (*cur)->v);
  if (c == 0) {
    (*cur)->inclusive = (*cur)->inclusive && s.inclusive;
  } else if ((c > 0) == lower) {
    *cur = s;
  }
}

Result<Limits> read_limits(const SchemaJson& s) {
  Limits l;
  auto note = [&](const char* key) {
    l.names += fmt::format("{}`{}`", l.names.empty() ? "" : ", ", key);
  };
  for (const char* key : {"minimum", "maximum"}) {
    if (!s.contains(key)) continue;
    note(key);
    KEEL_ASSIGN_OR_RETURN(Decimal d, read_number(s, key));
    const bool lower = std::string_view(key) == "minimum";
    const char* excl = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    const bool draft4 = s.contains(excl) && s[excl].is_boolean() && s[excl].get<bool>();
    tighten(lower ? &l.lower : &l.upper, Side{d, !draft4}, lower);
  }
  for (const char* key : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (!s.contains(key) || s[key].is_boolean()) continue;
    note(key);
    KEEL_ASSIGN_OR_RETURN(Decimal d, read_number(s, key));
    const bool lower = std::string_view(key) == "exclusiveMinimum";
    tighten(lower ? &l.lower : &l.upper, Side{d, false}, lower);
  }
  if (s.contains("multipleOf")) {
    note("multipleOf");
    KEEL_ASSIGN_OR_RETURN(Decimal d, read_number(s, "multipleOf"));
    if (d.negative || d.is_zero()) return keyword_error("multipleOf", "must be above 0");
    l.multiple = d;
  }
  if (s.contains("format") && s["format"] == "int32") {
    tighten(&l.lower, Side{Decimal::from_int(-2147483648LL), true}, true);
    tighten(&l.upper, Side{Decimal::from_int(2147483647LL), true}, false);
  }
  return l;
}

std::string join(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return alts.size() > 1 ? "(" + out + ")" : out;
}

// "-" (pieces) for the negative magnitudes [neg_lo, neg_hi] and (pieces) for [lo, hi].
std::vector<std::string> signed_pieces(RuleWriter& w, int64_t lo, int64_t hi, const DigitForm& f) {
  std::vector<std::string> alts;
  auto add = [&](uint64_t a, uint64_t b, const char* sign) {
    std::vector<std::string> p;
    for (DigitPiece& d : digit_range(w, a, b, f)) p.push_back(std::move(d.expr));
    if (!p.empty()) alts.push_back(sign + join(p));
  };
  if (lo < 0)
    add(static_cast<uint64_t>(std::max<int64_t>(1, -hi)), static_cast<uint64_t>(-lo), "\"-\" ");
  if (hi >= 0) add(static_cast<uint64_t>(std::max<int64_t>(0, lo)), static_cast<uint64_t>(hi), "");
  return alts;
}

// Integer bounds of x·10^shift under the limits (exclusive bounds moved by one), clamped.
std::pair<int64_t, int64_t> scaled_bounds(const Limits& l, int32_t shift, int64_t cap) {
  int64_t lo = -cap, hi = cap;
  if (l.lower) {
    lo = l.lower->v.ceil_scaled(shift, cap + 1);
    if (!l.lower->inclusive && l.lower->v.floor_scaled(shift, cap + 1) == lo) ++lo;
  }
  if (l.upper) {
    hi = l.upper->v.floor_scaled(shift, cap + 1);
    if (!l.upper->inclusive && l.upper->v.ceil_scaled(shift, cap + 1) == hi) --hi;
  }
  return {std::max(lo, -cap), std::min(hi, cap)};
}

// multipleOf = c·10^-j → the modulus on x·10^j (numbers) or on x (integers), with the powers of
// ten taken out as trailing zeros.
Result<DigitForm> multiple_form(const Decimal& m, bool integer_values) {
  if (m.digits.size() > 18) return keyword_error("multipleOf", "has too many digits");
  uint64_t c = std::stoull(m.digits);
  DigitForm f;
  if (m.exp >= 0) {
    f.zeros = m.exp;
  } else if (integer_values) {
    // x·10^j ≡ 0 (mod c)  ⇔  x ≡ 0 (mod c / gcd(c, 10^j)); j steps of gcd(c, 10) remove it.
    for (int i = 0; i < -m.exp; ++i) c /= std::gcd(c, uint64_t{10});
  } else {
    f.point = -m.exp;
  }
  while (c % 10 == 0 && f.point == 0) {
    c /= 10;
    ++f.zeros;
  }
  if (f.zeros > 15 || f.point > 15 || c > kMaxModulus) {
    return keyword_error("multipleOf",
                         fmt::format("{} is not supported: keel's grammar handles multiples of "
                                     "c·10^k with c at most {}",
                                     m.to_string(), kMaxModulus));
  }
  f.modulus = static_cast<uint32_t>(c);
  return f;
}

Result<std::string> integer_multiples(RuleWriter& w, const Limits& l, bool integer_values) {
  DigitForm f;
  if (l.multiple) {
    KEEL_ASSIGN_OR_RETURN(f, multiple_form(*l.multiple, integer_values));
  }
  std::vector<std::string> alts;
  if (f.point > 0) {
    auto [lo, hi] = scaled_bounds(l, f.point, kMaxMagnitude);
    alts = signed_pieces(w, lo, hi, f);
  } else {
    auto [lo, hi] = scaled_bounds(l, 0, kSafeInt);
    // x = M·10^zeros: M over [ceil(lo / 10^zeros), floor(hi / 10^zeros)].
    const Decimal dlo = Decimal::from_int(lo), dhi = Decimal::from_int(hi);
    alts = signed_pieces(w, dlo.ceil_scaled(-f.zeros, kSafeInt),
                         dhi.floor_scaled(-f.zeros, kSafeInt), f);
  }
  if (alts.empty()) {
    return Status::invalid_argument(
        fmt::format("JSON Schema keywords {} leave no {} to generate", l.names,
                    integer_values ? "integer" : "number (of at most 15 digits)"));
  }
  return join(alts);
}

// Fraction digits (after the point) of at most `max_len` digits within a fraction interval.
class FractionWriter {
 public:
  FractionWriter(RuleWriter& w, std::string lo, bool lo_incl, std::optional<std::string> hi,
                 bool hi_incl, int max_len)
      : w_(w),
        lo_(std::move(lo)),
        lo_incl_(lo_incl),
        hi_(std::move(hi)),
        hi_incl_(hi_incl),
        max_(max_len) {}

  // `int_text` followed by an allowed fraction (or none, when the bare integer is allowed).
  std::optional<std::string> piece(const std::string& int_text) {
    const bool tlo = !(lo_.empty() && lo_incl_);
    Node n = node(0, tlo, hi_.has_value());
    std::string lit = fmt::format("\"{}\"", int_text);
    if (n.alts.empty()) return n.stop ? std::optional(lit) : std::nullopt;
    const std::string frac = fmt::format("\".\" {}", alternatives(n.alts));
    return n.stop ? fmt::format("{} ({})?", lit, frac) : fmt::format("{} {}", lit, frac);
  }

 private:
  struct Node {
    bool stop = false;              // the digits so far may end here
    std::vector<std::string> alts;  // continuations, each starting with a digit
    int free = 0;                   // > 0: any 0..free more digits (alts holds their 1.. form)
  };

  static std::string alternatives(const std::vector<std::string>& alts) {
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
    return alts.size() > 1 ? "(" + out + ")" : out;
  }

  // After i digits equal to lo's (tlo) and/or hi's (thi) first digits.
  Node node(int i, bool tlo, bool thi) {
    const int nlo = static_cast<int>(lo_.size());
    const int nhi = hi_ ? static_cast<int>(hi_->size()) : 0;
    if (tlo && i >= nlo && lo_incl_) tlo = false;  // equal so far, any continuation is ≥ lo
    Node n;
    n.stop = !tlo && (!thi || i < nhi || hi_incl_);
    if (i == max_) return n;
    if (!tlo && !thi) {
      n.free = max_ - i;
      n.alts.push_back(fmt::format("[0-9]{{1,{}}}", n.free));
      return n;
    }
    const int dlo = tlo && i < nlo ? lo_[i] - '0' : 0;
    const int dhi = thi ? (i < nhi ? (*hi_)[i] - '0' : 0) : 9;
    if (dlo > dhi) return n;
    auto add = [&](const std::string& digits, bool child_lo, bool child_hi) {
      Node c = node(i + 1, child_lo, child_hi);
      if (c.alts.empty() && !c.stop) return;
      std::string rest;
      if (c.free > 0) {
        rest = fmt::format("[0-9]{{0,{}}}", c.free);
      } else if (!c.alts.empty()) {
        rest = alternatives(c.alts);
        if (c.alts.size() > 1 || c.stop) rest = w_.add("frac", c.stop ? rest + " | " : rest);
      }
      n.alts.push_back(digits + (rest.empty() ? "" : " " + rest));
    };
    if (tlo) add(fmt::format("\"{}\"", dlo), true, thi && dlo == dhi);
    if (thi && !(tlo && dlo == dhi)) add(fmt::format("\"{}\"", dhi), false, true);
    const int mid_lo = dlo + (tlo ? 1 : 0), mid_hi = dhi - (thi ? 1 : 0);
    if (mid_lo <= mid_hi) {
      const std::string cls =
          mid_lo == mid_hi ? fmt::format("\"{}\"", mid_lo) : fmt::format("[{}-{}]", mid_lo, mid_hi);
      add(cls, false, false);
    }
    return n;
  }

  RuleWriter& w_;
  std::string lo_;  // the lower bound's fraction digits ("" = 0)
  bool lo_incl_;
  std::optional<std::string> hi_;  // the upper bound's fraction digits; nullopt: no upper bound
  bool hi_incl_;
  int max_;
};

int fraction_room(size_t int_len) { return std::max(0, kMaxDigits - static_cast<int>(int_len)); }

// Decimal texts (no sign, no exponent) of the magnitudes in [lo, hi] (hi absent: unbounded).
std::vector<std::string> magnitudes(RuleWriter& w, const Side& lo, const std::optional<Side>& hi) {
  std::vector<std::string> alts;
  if (hi) {
    const int c = compare(lo.v, hi->v);
    if (c > 0 || (c == 0 && !(lo.inclusive && hi->inclusive))) return alts;
  }
  const std::string a = lo.v.int_digits();
  if (a.size() > kMaxDigits) return alts;
  const std::string b = hi ? hi->v.int_digits() : "";
  auto add = [&](std::optional<std::string> p) {
    if (p) alts.push_back(std::move(*p));
  };
  if (hi && a == b) {
    add(FractionWriter(w, lo.v.frac_digits(), lo.inclusive, hi->v.frac_digits(), hi->inclusive,
                       fraction_room(a.size()))
            .piece(a));
    return alts;
  }
  add(FractionWriter(w, lo.v.frac_digits(), lo.inclusive, std::nullopt, true,
                     fraction_room(a.size()))
          .piece(a));
  const uint64_t first = std::stoull(a) + 1;
  const bool b_fits = hi && b.size() <= kMaxDigits;
  const uint64_t last = b_fits ? std::stoull(b) - 1 : static_cast<uint64_t>(kMaxMagnitude);
  if (first <= last) {
    for (DigitPiece& p : digit_range(w, first, last, DigitForm{})) {
      const int room = fraction_room(static_cast<size_t>(p.length));
      alts.push_back(room > 0 ? fmt::format("{} (\".\" [0-9]{{1,{}}})?", p.expr, room) : p.expr);
    }
  }
  if (b_fits) {
    add(FractionWriter(w, "", true, hi->v.frac_digits(), hi->inclusive, fraction_room(b.size()))
            .piece(b));
  }
  return alts;
}

Result<std::string> bounded_numbers(RuleWriter& w, const Limits& l) {
  std::vector<std::string> alts;
  const Decimal zero;
  if (!l.lower || l.lower->v.negative) {
    const Side lo = l.upper && l.upper->v.negative ? Side{l.upper->v.abs(), l.upper->inclusive}
                                                   : Side{zero, false};
    std::optional<Side> hi;
    if (l.lower) hi = Side{l.lower->v.abs(), l.lower->inclusive};
    std::vector<std::string> neg = magnitudes(w, lo, hi);
    if (!neg.empty()) alts.push_back("\"-\" " + join(neg));
  }
  if (!l.upper || !l.upper->v.negative) {
    const Side lo = l.lower && !l.lower->v.negative ? *l.lower : Side{zero, true};
    for (std::string& p : magnitudes(w, lo, l.upper)) alts.push_back(std::move(p));
  }
  if (alts.empty()) {
    return Status::invalid_argument(fmt::format(
        "JSON Schema keywords {} leave no number of at most {} significant digits to generate",
        l.names, kMaxDigits));
  }
  return join(alts);
}

}  // namespace

bool has_numeric_keywords(const SchemaJson& s) {
  auto integer_format = [](const SchemaJson& s) {
    return s.contains("format") && (s["format"] == "int32" || s["format"] == "int64");
  };
  for (const char* key :
       {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
    if (s.contains(key)) return true;
  }
  return integer_format(s);
}

Result<std::string> number_expr(RuleWriter& w, const SchemaJson& s, bool integer) {
  if (!has_numeric_keywords(s)) return std::string(integer ? "json-integer" : "json-number");
  KEEL_ASSIGN_OR_RETURN(Limits l, read_limits(s));
  if (integer || (s.contains("format") && (s["format"] == "int32" || s["format"] == "int64"))) {
    return integer_multiples(w, l, true);
  }
  if (l.multiple) return integer_multiples(w, l, l.multiple->is_integer());
  return bounded_numbers(w, l);
}

}  // namespace keel::grammar
