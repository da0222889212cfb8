// program_of (see program_id.h).
#include "server/program_id.h"

#include <algorithm>

#include "server/tenants.h"

namespace keel::server {

ApiResult<std::string> program_of(const HttpRequest& req, const TenantGrant* tenant,
                                  std::string_view fallback) {
  std::string_view id = fallback;
  if (req.has_header(kProgramIdHeader)) {
    id = req.header(kProgramIdHeader);
    const bool control = std::any_of(id.begin(), id.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (id.empty() || id.size() > kMaxProgramIdBytes || control) {
      return ApiError::bad_request(
          "X-Program-Id must be 1 to 256 bytes of printable text (the agent program this call "
          "belongs to)",
          "X-Program-Id");
    }
  }
  if (id.empty()) return std::string();
  if (tenant == nullptr) return std::string(id);
  return tenant->tenant + '\x1f' + std::string(id);
}

}  // namespace keel::server
