// digit_range (digit_ranges.h): per-length tight chains over the bounds' digits, free tails
// through a memoised residue automaton.
#include "grammar/digit_ranges.h"

#include <fmt/format.h>

#include <map>
#include <optional>

namespace keel::grammar {
namespace {

constexpr int kMaxLength = 19;

class DigitWriter {
 public:
  DigitWriter(RuleWriter& w, const DigitForm& form) : w_(w), f_(form) {
    const uint32_t k = f_.modulus;
    ok_.assign(kMaxLength + 1, std::vector<char>(k, 0));
    ok_[0][0] = 1;
    for (int rem = 1; rem <= kMaxLength; ++rem) {
      for (uint32_t r = 0; r < k; ++r) {
        for (uint32_t d = 0; d < 10 && !ok_[rem][r]; ++d)
          ok_[rem][r] = ok_[rem - 1][(10 * r + d) % k];
      }
    }
  }

  // The texts of the L-digit n in [x, y] (x, y of length L).
  std::optional<std::string> piece(const std::string& x, const std::string& y) {
    const int len = static_cast<int>(x.size());
    std::optional<std::string> body = tight(0, x, y, true, true, 0);
    if (!body) return std::nullopt;
    std::string out;
    if (f_.point > 0 && len <= f_.point) {
      out = fmt::format("\"0.{}\" ", std::string(static_cast<size_t>(f_.point - len), '0'));
    }
    out += *body;
    if (f_.zeros > 0)
      out += fmt::format(" \"{}\"", std::string(static_cast<size_t>(f_.zeros), '0'));
    return out;
  }

 private:
  // The fraction point goes before the digit with `rem` digits left (this one included).
  [[nodiscard]] std::string dot(int rem, int i) const {
    return f_.point > 0 && rem == f_.point && i >= 1 ? "\".\" " : "";
  }

  static std::string digit_class(int lo, int hi) {
    if (lo == hi) return fmt::format("\"{}\"", lo);
    return fmt::format("[{}-{}]", lo, hi);
  }

  // Exactly `rem` more digits after at least one (so a point may come first), from residue r.
  std::optional<std::string> free(int rem, uint32_t r) {
    if (!ok_[rem][r]) return std::nullopt;
    if (rem == 0) return std::string();
    const uint32_t k = f_.modulus;
    if (k == 1) {
      if (f_.point > 0 && rem >= f_.point) {
        std::string head = any_digits(rem - f_.point);
        return (head.empty() ? "" : head + " ") + "\".\" " + any_digits(f_.point);
      }
      return any_digits(rem);
    }
    auto key = std::make_pair(rem, r);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const std::string name = w_.fresh("mod");
    memo_[key] = name;
    std::string alts;
    std::map<uint32_t, std::string> by_next;  // next residue → its digits as a class
    for (uint32_t d = 0; d < 10; ++d) {
      const uint32_t next = (10 * r + d) % k;
      if (ok_[rem - 1][next]) by_next[next] += static_cast<char>('0' + d);
    }
    for (const auto& [next, ds] : by_next) {
      std::string cls = ds.size() == 1 ? fmt::format("\"{}\"", ds) : "[" + ds + "]";
      std::optional<std::string> tail = free(rem - 1, next);
      alts += fmt::format("{}{}{}{}", alts.empty() ? "" : " | ", dot(rem, 1), cls,
                          tail->empty() ? "" : " " + *tail);
    }
    w_.define(name, alts);
    return name;
  }

  static bool all_of(const std::string& s, size_t from, char c) {
    for (size_t i = from; i < s.size(); ++i) {
      if (s[i] != c) return false;
    }
    return true;
  }

  // Digits from position i on, having matched x's prefix (tlo) and/or y's (thi), residue r.
  std::optional<std::string> tight(int i, const std::string& x, const std::string& y, bool tlo,
                                   bool thi, uint32_t r) {
    const int len = static_cast<int>(x.size());
    tlo = tlo && !all_of(x, static_cast<size_t>(i), '0');
    thi = thi && !all_of(y, static_cast<size_t>(i), '9');
    if (i == len) return r == 0 ? std::optional<std::string>("") : std::nullopt;
    if (!tlo && !thi && i >= 1) return free(len - i, r);
    const int lo = tlo ? x[i] - '0' : 0;
    const int hi = thi ? y[i] - '0' : 9;
    const uint32_t k = f_.modulus;
    const std::string dt = dot(len - i, i);
    std::vector<std::string> alts;
    auto add = [&](const std::string& digits, const std::optional<std::string>& child) {
      if (child) alts.push_back(dt + digits + (child->empty() ? "" : " " + *child));
    };
    // The bound digits keep the chain tight; the digits strictly between them are free.
    if (tlo)
      add(fmt::format("\"{}\"", lo), tight(i + 1, x, y, true, thi && lo == hi, (10 * r + lo) % k));
    if (thi && !(tlo && lo == hi))
      add(fmt::format("\"{}\"", hi), tight(i + 1, x, y, false, true, (10 * r + hi) % k));
    const int mid_lo = lo + (tlo ? 1 : 0), mid_hi = hi - (thi ? 1 : 0);
    std::map<uint32_t, std::string> by_next;  // next residue → its free digits
    for (int d = mid_lo; d <= mid_hi; ++d) by_next[(10 * r + d) % k] += static_cast<char>('0' + d);
    for (const auto& [next, ds] : by_next) {
      std::string cls = ds.size() == 1 ? fmt::format("\"{}\"", ds)
                        : k == 1       ? digit_class(ds.front() - '0', ds.back() - '0')
                                       : "[" + ds + "]";
      add(cls, free(len - i - 1, next));
    }
    if (alts.empty()) return std::nullopt;
    if (alts.size() == 1) return alts[0];
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    return w_.add("dig", body);
  }

  RuleWriter& w_;
  DigitForm f_;
  std::vector<std::vector<char>> ok_;  // ok_[rem][r]: rem more digits can reach residue 0
  std::map<std::pair<int, uint32_t>, std::string> memo_;
};

std::string pow10_minus_one(int len) { return std::string(static_cast<size_t>(len), '9'); }
std::string pow10(int len) { return "1" + std::string(static_cast<size_t>(len - 1), '0'); }

}  // namespace

std::string any_digits(int64_t n) {
  if (n <= 0) return "";
  if (n == 1) return "[0-9]";
  return fmt::format("[0-9]{{{}}}", n);
}

std::vector<DigitPiece> digit_range(RuleWriter& w, uint64_t lo, uint64_t hi,
                                    const DigitForm& form) {
  std::vector<DigitPiece> out;
  if (lo > hi) return out;
  if (lo == 0) {
    out.push_back({1, form.point > 0 ? fmt::format("\"0.{}\"", std::string(form.point, '0'))
                                     : std::string("\"0\"")});
    if (hi == 0) return out;
    lo = 1;
  }
  DigitWriter dw(w, form);
  const std::string slo = std::to_string(lo), shi = std::to_string(hi);
  for (int len = static_cast<int>(slo.size()); len <= static_cast<int>(shi.size()); ++len) {
    const std::string x = len == static_cast<int>(slo.size()) ? slo : pow10(len);
    const std::string y = len == static_cast<int>(shi.size()) ? shi : pow10_minus_one(len);
    if (std::optional<std::string> p = dw.piece(x, y)) out.push_back({len, std::move(*p)});
  }
  return out;
}

}  // namespace keel::grammar
