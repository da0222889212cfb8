// --api-keys-file and --quota-dir (see tenant_flags.h).
#include "tenant_flags.h"

namespace keel::cli {

void add_tenant_flags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--api-keys-file", o->api_keys_file,
                  "Tenants' API keys, weights and quotas (JSON Lines; docs/tenants.md); "
                  "re-read when the file changes");
  cmd->add_option(
      "--quota-dir", o->quota_dir,
      "With --api-keys-file: keep the tenants' quota windows in DIR, shared with the "
      "cluster's other gateways so quotas hold across them (default: "
      "<--responses-dir>/quotas when --responses-dir is given, else this process's own)");
}

}  // namespace keel::cli
