// Format checks (format_check.h), by hand-written parsers.
#include "grammar/format_check.h"

#include <cctype>
#include <cstdlib>
#include <vector>

namespace keel::grammar::testing {
namespace {

bool digits(const std::string& s, size_t at, size_t n) {
  if (at + n > s.size()) return false;
  for (size_t i = at; i < at + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

int num(const std::string& s, size_t at, size_t n) { return std::atoi(s.substr(at, n).c_str()); }

bool date_ok(const std::string& s) {
  if (s.size() != 10 || !digits(s, 0, 4) || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' ||
      !digits(s, 8, 2)) {
    return false;
  }
  const int y = num(s, 0, 4), m = num(s, 5, 2), d = num(s, 8, 2);
  if (m < 1 || m > 12 || d < 1) return false;
  const bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return d <= days[m - 1];
}

bool time_ok(const std::string& s) {
  if (s.size() < 9 || !digits(s, 0, 2) || s[2] != ':' || !digits(s, 3, 2) || s[5] != ':' ||
      !digits(s, 6, 2)) {
    return false;
  }
  if (num(s, 0, 2) > 23 || num(s, 3, 2) > 59 || num(s, 6, 2) > 59) return false;
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start) return false;
  }
  const std::string off = s.substr(i);
  if (off == "Z" || off == "z") return true;
  return off.size() == 6 && (off[0] == '+' || off[0] == '-') && digits(off, 1, 2) &&
         off[3] == ':' && digits(off, 4, 2) && num(off, 1, 2) <= 23 && num(off, 4, 2) <= 59;
}

// PnYnMnDTnHnMnS (in order, at least one, T followed by at least one) or PnW.
bool duration_ok(const std::string& s) {
  if (s.size() < 3 || s[0] != 'P') return false;
  size_t i = 1;
  auto component = [&](char unit) {
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j == i || j >= s.size() || s[j] != unit) return false;
    i = j + 1;
    return true;
  };
  if (component('W')) return i == s.size();
  int any = 0;
  for (char u : {'Y', 'M', 'D'}) any += component(u) ? 1 : 0;
  if (i < s.size() && s[i] == 'T') {
    ++i;
    int t = 0;
    for (char u : {'H', 'M', 'S'}) t += component(u) ? 1 : 0;
    if (t == 0) return false;
    any += t;
  }
  return any > 0 && i == s.size();
}

bool hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

bool uuid_ok(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !hex(s[i])) return false;
  }
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

bool label_ok(const std::string& l) {
  if (l.empty() || l.size() > 63 || l.front() == '-' || l.back() == '-') return false;
  for (char c : l) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

bool hostname_ok(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (const std::string& l : split(s, '.')) {
    if (!label_ok(l)) return false;
  }
  return true;
}

bool email_ok(const std::string& s) {
  const size_t at = s.find('@');
  if (at == std::string::npos || s.find('@', at + 1) != std::string::npos) return false;
  const std::string local = s.substr(0, at), domain = s.substr(at + 1);
  for (const std::string& atom : split(local, '.')) {
    if (atom.empty()) return false;
    for (char c : atom) {
      if (!std::isalnum(static_cast<unsigned char>(c)) &&
          std::string("!#$%&'*+/=?^_`{|}~-").find(c) == std::string::npos) {
        return false;
      }
    }
  }
  return domain.find('.') != std::string::npos && hostname_ok(domain);
}

bool ipv4_ok(const std::string& s) {
  const std::vector<std::string> parts = split(s, '.');
  if (parts.size() != 4) return false;
  for (const std::string& p : parts) {
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0') || !digits(p, 0, p.size())) {
      return false;
    }
    if (std::atoi(p.c_str()) > 255) return false;
  }
  return true;
}

bool ipv6_ok(const std::string& s) {
  const size_t dc = s.find("::");
  if (dc != std::string::npos && s.find("::", dc + 1) != std::string::npos) return false;
  auto groups = [](const std::string& part, size_t* n) {
    *n = 0;
    if (part.empty()) return true;
    for (const std::string& g : split(part, ':')) {
      if (g.empty() || g.size() > 4) return false;
      for (char c : g) {
        if (!hex(c)) return false;
      }
      ++*n;
    }
    return true;
  };
  size_t a = 0, b = 0;
  if (dc == std::string::npos) return groups(s, &a) && a == 8;
  return groups(s.substr(0, dc), &a) && groups(s.substr(dc + 2), &b) && a + b <= 7;
}

bool uri_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string("-._~!$&'()*+,;=:@/?#%[]").find(c) != std::string::npos;
}

// scheme ":" then URI characters with well-formed %-escapes; an authority's host is a hostname.
bool uri_ok(const std::string& s) {
  const size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (size_t i = 1; i < colon; ++i) {
    if (!std::isalnum(static_cast<unsigned char>(s[i])) &&
        std::string("+-.").find(s[i]) == std::string::npos) {
      return false;
    }
  }
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (!uri_char(s[i])) return false;
    if (s[i] == '%' && !(i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2]))) return false;
  }
  if (s.compare(colon, 3, "://") == 0) {
    const size_t start = colon + 3;
    size_t end = s.find_first_of(":/?#", start);
    if (end == std::string::npos) end = s.size();
    return hostname_ok(s.substr(start, end - start));
  }
  return true;
}

bool byte_ok(const std::string& s) {
  if (s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool b64 = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
    const bool pad = c == '=' && i + 2 >= s.size() && (i + 1 == s.size() || s[i + 1] == '=');
    if (!b64 && !pad) return false;
  }
  return true;
}

}  // namespace

bool format_valid(const std::string& f, const std::string& s) {
  if (f == "date") return date_ok(s);
  if (f == "time" || f == "iso-time") return time_ok(s);
  if (f == "date-time" || f == "iso-date-time") {
    const size_t t = s.find_first_of("Tt");
    return t == 10 && date_ok(s.substr(0, 10)) && time_ok(s.substr(11));
  }
  if (f == "duration") return duration_ok(s);
  if (f == "uuid") return uuid_ok(s);
  if (f == "email") return email_ok(s);
  if (f == "hostname") return hostname_ok(s);
  if (f == "ipv4") return ipv4_ok(s);
  if (f == "ipv6") return ipv6_ok(s);
  if (f == "uri" || f == "uri-reference") return uri_ok(s);
  if (f == "byte") return byte_ok(s);
  return true;
}

}  // namespace keel::grammar::testing
