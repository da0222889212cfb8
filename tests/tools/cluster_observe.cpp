// See cluster_observe.h.
#include "cluster_observe.h"

#include <fstream>

#include "serve_process.h"

namespace keel::testing {

std::vector<nlohmann::json> read_event_log(const std::string& path, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_object() && (kind.empty() || e.value("event", "") == kind)) {
      out.push_back(std::move(e));
    }
  }
  return out;
}

int healthy_tes(int port) {
  const nlohmann::json s =
      nlohmann::json::parse(http_request(port, "GET", "/v1/cluster/status").body, nullptr, false);
  if (!s.is_object()) return 0;
  int n = 0;
  for (const nlohmann::json& te : s.value("task_executors", nlohmann::json::array())) {
    n += te.value("healthy", false) ? 1 : 0;
  }
  return n;
}

}  // namespace keel::testing
