// profile_by_output_length and parse_prometheus_gauge (see length_profile.h).
#include "loadgen/length_profile.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace keel::loadgen {

std::vector<LengthBucket> profile_by_output_length(std::span<const RequestRecord> records,
                                                   int64_t bucket_tokens,
                                                   std::span<const GaugeSample> kv_usage) {
  std::vector<LengthBucket> out;
  if (bucket_tokens < 1) return out;
  std::vector<double> itl_sum, kv_sum;
  std::vector<int64_t> kv_count;
  auto bucket = [&](size_t b) -> LengthBucket& {
    while (out.size() <= b) {
      const auto first = static_cast<int64_t>(out.size()) * bucket_tokens;
      out.push_back({first, first + bucket_tokens, 0, 0.0, std::nullopt});
      itl_sum.push_back(0.0);
      kv_sum.push_back(0.0);
      kv_count.push_back(0);
    }
    return out[b];
  };
  for (const RequestRecord& r : records) {
    if (!r.success || r.num_content_chunks == 0) continue;
    const std::vector<double> t = r.chunk_times_s();  // one per content chunk (token)
    for (size_t k = 1; k < t.size(); ++k) {
      const auto b = static_cast<size_t>(static_cast<int64_t>(k) / bucket_tokens);
      LengthBucket& lb = bucket(b);
      ++lb.itl_count;
      itl_sum[b] += r.itl_s[k - 1] * 1e3;
    }
    for (size_t b = 0; b * static_cast<size_t>(bucket_tokens) < t.size(); ++b) {
      bucket(b);
      const double from = t[b * static_cast<size_t>(bucket_tokens)];
      const double to = t[std::min(t.size(), (b + 1) * static_cast<size_t>(bucket_tokens)) - 1];
      for (const GaugeSample& s : kv_usage) {
        if (s.t_s >= from && s.t_s <= to) {
          kv_sum[b] += s.value;
          ++kv_count[b];
        }
      }
    }
  }
  for (size_t b = 0; b < out.size(); ++b) {
    if (out[b].itl_count > 0)
      out[b].mean_itl_ms = itl_sum[b] / static_cast<double>(out[b].itl_count);
    if (kv_count[b] > 0) out[b].kv_usage = kv_sum[b] / static_cast<double>(kv_count[b]);
  }
  return out;
}

std::optional<double> parse_prometheus_gauge(std::string_view text, std::string_view metric) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line.front() == '#' || !line.starts_with(metric)) continue;
    const std::string_view rest = line.substr(metric.size());
    if (!rest.empty() && rest.front() != ' ' && rest.front() != '{') continue;  // a longer name
    const size_t space = line.rfind(' ');
    if (space == std::string_view::npos) return std::nullopt;
    // std::from_chars for double is in libstdc++ 11+.
    double v = 0;
    const std::string_view num = line.substr(space + 1);
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec != std::errc()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace keel::loadgen
