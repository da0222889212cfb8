// The JE restart rule (see je_replacement.h).
#include "cluster/policy/je_replacement.h"

#include <algorithm>

#include "cluster/health/te_health.h"

namespace keel::cluster {

JeSpec je_replacement_spec(JeSpec spec, uint16_t port, const std::vector<std::string>& te_addresses,
                           std::chrono::milliseconds connect_timeout) {
  spec.port = port;
  spec.tes = te_addresses;
  spec.te_connect_timeout_ms = connect_timeout.count();
  return spec;
}

std::vector<std::string> replacement_te_addresses(const FleetSnapshot& fleet,
                                                  const std::vector<std::string>& known) {
  std::vector<std::string> out;
  for (const TeInfo& te : fleet.tes) {
    if (health::serving(te.state) && !te.address.empty()) out.push_back(te.address);
  }
  for (const std::string& address : known) {
    const bool listed = std::any_of(fleet.tes.begin(), fleet.tes.end(),
                                    [&](const TeInfo& te) { return te.address == address; });
    if (!listed && std::find(out.begin(), out.end(), address) == out.end()) {
      out.push_back(address);
    }
  }
  return out;
}

}  // namespace keel::cluster
