// --state-dir and --no-state (see state_flags.h).
#include "state_flags.h"

#include "model_pull.h"
#include "state/default_dir.h"

namespace keel::cli {

void add_state_flags(CLI::App* cmd, ServeOptions* o) {
  CLI::Option* dir =
      cmd->add_option("--state-dir", o->state_dir,
                      "Directory keeping /v1/files, /v1/batches and stored /v1/responses across "
                      "restarts (locked: one server each); "
                      "default: ~/.cache/keel/state/port-<port>, memory only with --port 0");
  cmd->add_flag("--no-state", o->no_state, "Keep files, batches and responses in memory only")
      ->excludes(dir);
  cmd->add_option("--responses-dir", o->responses_dir,
                  "Keep stored /v1/responses in DIR instead, a directory the gateways of a "
                  "cluster share (not locked): a response created through one is retrieved, "
                  "deleted and continued through any (docs/responses.md)");
}

std::string serve_state_dir(const ServeOptions& o) {
  if (o.no_state) return {};
  if (!o.state_dir.empty()) return o.state_dir;
  return state::default_state_dir(keel_cache_dir(), o.port);
}

}  // namespace keel::cli
