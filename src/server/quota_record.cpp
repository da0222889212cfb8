// A tenant's shared quota window and its text codec (see quota_record.h).
#include "server/quota_record.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

namespace keel::server {
namespace {

// The record's window and total in flight as the one-gateway limiter sees them.
LimiterState as_limiter(const QuotaRecord& r) {
  LimiterState s;
  s.window = r.window;
  s.next_id = r.next_id;
  for (const auto& [owner, n] : r.in_flight) s.in_flight += n;
  return s;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

template <typename T>
bool parse_number(std::string_view s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One line after the version line into `r`; false when it is malformed.
bool decode_line(const std::vector<std::string_view>& f, QuotaRecord* r) {
  if (f.size() == 2 && f[0] == "next") return parse_number(f[1], &r->next_id);
  if (f.size() == 3 && f[0] == "owner") {
    int32_t n = 0;
    if (!parse_number(f[2], &n) || n < 0) return false;
    if (n > 0) r->in_flight[std::string(f[1])] = n;
    return true;
  }
  if (f.size() == 4 && f[0] == "entry") {
    LimiterState::Entry e;
    if (!parse_number(f[1], &e.at_ms) || !parse_number(f[2], &e.tokens) ||
        !parse_number(f[3], &e.id)) {
      return false;
    }
    if (!r->window.empty() && e.at_ms < r->window.back().at_ms) return false;  // oldest first
    r->window.push_back(e);
    return true;
  }
  return false;
}

}  // namespace

std::string encode_quota_record(const QuotaRecord& r) {
  std::string out = fmt::format("keel-quota {}\nnext {}\n", kQuotaRecordVersion, r.next_id);
  for (const auto& [owner, n] : r.in_flight) {
    if (n > 0) out += fmt::format("owner {} {}\n", owner, n);
  }
  for (const LimiterState::Entry& e : r.window) {
    out += fmt::format("entry {} {} {}\n", e.at_ms, e.tokens, e.id);
  }
  return out;
}

Result<QuotaRecord> decode_quota_record(std::string_view text) {
  QuotaRecord r;
  if (text.empty()) return r;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      return Status::corrupt(fmt::format("quota record: line {} is cut short", line_no + 1));
    }
    const std::vector<std::string_view> f = fields(text.substr(0, nl));
    text.remove_prefix(nl + 1);
    ++line_no;
    if (line_no == 1) {
      int version = 0;
      if (f.size() != 2 || f[0] != "keel-quota" || !parse_number(f[1], &version)) {
        return Status::corrupt("quota record: line 1 is not `keel-quota VERSION`");
      }
      if (version != kQuotaRecordVersion) {
        return Status::unsupported(fmt::format("quota record: version {} (this keel reads {})",
                                               version, kQuotaRecordVersion));
      }
      continue;
    }
    if (!decode_line(f, &r)) {
      return Status::corrupt(fmt::format("quota record: line {} is malformed", line_no));
    }
  }
  return r;
}

QuotaAdmission record_admit(QuotaRecord* r, const std::string& owner, const TenantLimits& limits,
                            int64_t now_ms, int64_t tokens) {
  LimiterState s = as_limiter(*r);
  const QuotaAdmission a = limiter_admit(&s, limits, now_ms, tokens);
  r->window = std::move(s.window);
  r->next_id = s.next_id;
  if (a.hit == LimitHit::kNone) ++r->in_flight[owner];
  return a;
}

void record_settle(QuotaRecord* r, const std::string& owner, uint64_t entry_id, int64_t tokens) {
  for (LimiterState::Entry& e : r->window) {
    if (e.id == entry_id) e.tokens = tokens;
  }
  const auto it = r->in_flight.find(owner);
  if (it != r->in_flight.end() && --it->second <= 0) r->in_flight.erase(it);
}

bool record_drop_owner(QuotaRecord* r, const std::string& owner) {
  return r->in_flight.erase(owner) > 0;
}

RateLimitView record_view(const QuotaRecord& r, const TenantLimits& limits, int64_t now_ms) {
  return limiter_view(as_limiter(r), limits, now_ms);
}

}  // namespace keel::server
