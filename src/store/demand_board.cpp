// The demand board (see demand_board.h).
#include "store/demand_board.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace keel::store {

namespace {
constexpr std::string_view kPrefix = "keel-demand-";
}

std::string demand_note_name(std::string_view entry) {
  return std::string(kPrefix) + std::string(entry);
}

Status post_demand(const std::string& dir, const DemandNote& note) {
  if (note.entry.empty() || note.entry.find('/') != std::string::npos) {
    return Status::invalid_argument("demand note: bad entry name '" + note.entry + "'");
  }
  const std::string path = dir + "/" + demand_note_name(note.entry);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    char head[96];
    std::snprintf(head, sizeof(head), "%.6f %llu %.3f\n", note.rate,
                  static_cast<unsigned long long>(note.bytes), note.posted_unix_s);
    out << head << note.model << "\n";
    if (!out.flush()) return Status::io_error(tmp + ": cannot write the demand note");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::io_error(path + ": cannot post the demand note");
  }
  return {};
}

std::vector<DemandNote> read_demands(const std::string& dir, double now_unix_s, double max_age_s) {
  std::vector<DemandNote> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || name.find(".tmp.") != std::string::npos) continue;
    std::ifstream in(it->path());
    DemandNote n;
    n.entry = name.substr(kPrefix.size());
    std::string head;
    if (!std::getline(in, head) || !std::getline(in, n.model) || n.model.empty()) continue;
    std::istringstream fields(head);
    if (!(fields >> n.rate >> n.bytes >> n.posted_unix_s)) continue;
    if (!std::isfinite(n.rate) || n.rate < 0) continue;
    const double age = now_unix_s - n.posted_unix_s;
    if (!(age <= max_age_s && age >= -1.0)) continue;  // stale, or posted ahead of this clock
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(),
            [](const DemandNote& a, const DemandNote& b) { return a.entry < b.entry; });
  return out;
}

void withdraw_demand(const std::string& dir, std::string_view entry) {
  std::error_code ec;
  std::filesystem::remove(dir + "/" + demand_note_name(entry), ec);
}

}  // namespace keel::store
