// campaign(): waits to become a named singleton's leader through any Membership — one try_lead
// every `poll` until it wins, `timeout` passes (DeadlineExceeded-style Unavailable), or `stop`
// says so (Cancelled). A standby blocked here takes over once the leader resigns or its lease
// expires. Store errors are retried (the store may be restarting) until the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "membership/membership.h"

namespace keel::membership {

struct CampaignOptions {
  std::chrono::milliseconds poll{200};
  std::chrono::milliseconds timeout{std::chrono::hours(24 * 365)};
  std::function<bool()> stop;  // optional; true cancels the campaign
};

Status campaign(Membership& m, const std::string& name, const std::string& value,
                const CampaignOptions& options = {});

}  // namespace keel::membership
