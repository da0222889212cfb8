// MembershipConfig::validate; see membership.h.
#include "membership/membership.h"

namespace keel::membership {

Status MembershipConfig::validate() const {
  KEEL_TRY(validate_prefix(prefix));
  if (ttl_s < 2 || ttl_s > 3600) {
    return Status::invalid_argument("membership TTL " + std::to_string(ttl_s) +
                                    " s out of range [2, 3600]");
  }
  return {};
}

}  // namespace keel::membership
