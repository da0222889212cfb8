// `keel cluster profile-pd` (control/profile/pd_profile_run.h): the PD heatmap, with what only the
// keel binary knows — itself as the fleets' program and what -m names (a built-in model).
#include <cstdio>

#include "builtin_models.h"
#include "cluster_commands.h"
#include "control/profile/pd_profile_run.h"
#include "core/thread_pool.h"
#include "self_exe.h"

namespace keel::cli {
namespace {

Status profile_pd(const ClusterProfilePdOptions& opts) {
  control::PdProfileConfig config = opts;
  {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(config.model_path, resolve_model_path(opts.model_path, pool));
  }
  return control::run_pd_profile(config, {self_exe()}).status();
}

}  // namespace

int run_cluster_profile_pd(const ClusterProfilePdOptions& opts) {
  const Status s = profile_pd(opts);
  if (s.ok()) return 0;
  std::fprintf(stderr, "keel: cluster profile-pd: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace keel::cli
