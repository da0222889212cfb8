// SemiPdSplit parsing, core sets and thread pinning (see semi_pd_split.h).
#include "engine/semi_pd_split.h"

#include <pthread.h>
#include <sched.h>

#include <charconv>

namespace keel::engine {

Status SemiPdSplit::validate(int32_t num_cores) const {
  if (prefill < 1 || decode < 1 || prefill > num_cores || decode > num_cores) {
    return Status::invalid_argument("semi-PD split " + std::to_string(prefill) + "," +
                                    std::to_string(decode) + ": each side needs 1 to " +
                                    std::to_string(num_cores) + " cores");
  }
  return {};
}

namespace {

bool parse_int(std::string_view s, int32_t* out) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<SemiPdSplit> parse_semi_pd_split(const std::string& text) {
  const size_t comma = text.find(',');
  SemiPdSplit split;
  if (comma == std::string::npos ||
      !parse_int(std::string_view(text).substr(0, comma), &split.prefill) ||
      !parse_int(std::string_view(text).substr(comma + 1), &split.decode)) {
    return Status::invalid_argument("--semi-pd-split '" + text +
                                    "': expected X,Y (cores for prefill, decode), e.g. 1,1");
  }
  return split;
}

std::vector<int> allowed_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  if (cores.empty()) cores.push_back(0);
  return cores;
}

SemiPdCoreSets semi_pd_core_sets(const SemiPdSplit& split, const std::vector<int>& cores) {
  const auto n = static_cast<int32_t>(cores.size());
  SemiPdCoreSets sets;
  for (int32_t i = 0; i < split.prefill && i < n; ++i) sets.prefill.push_back(cores[i]);
  for (int32_t i = std::max(0, n - split.decode); i < n; ++i) sets.decode.push_back(cores[i]);
  return sets;
}

bool pin_current_thread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

}  // namespace keel::engine
