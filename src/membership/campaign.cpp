// campaign(): polling try_lead; see campaign.h.
#include "membership/campaign.h"

#include <thread>

#include "core/log.h"

namespace keel::membership {

Status campaign(Membership& m, const std::string& name, const std::string& value,
                const CampaignOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  Status last;
  while (true) {
    if (options.stop && options.stop()) {
      return Status::cancelled("campaign for '" + name + "' stopped");
    }
    Result<bool> won = m.try_lead(name, value);
    if (won.ok() && *won) return {};
    if (!won.ok()) {
      if (last.ok() || last.message() != won.status().message()) {
        KEEL_LOG_WARN("membership: campaign for '{}': {} (retrying)", name,
                      won.status().to_string());
      }
      last = won.status();
    }
    if (std::chrono::steady_clock::now() + options.poll > deadline) {
      return Status::unavailable("campaign for '" + name + "' not won in time" +
                                 (last.ok() ? std::string() : ": " + last.message()));
    }
    std::this_thread::sleep_for(options.poll);
  }
}

}  // namespace keel::membership
