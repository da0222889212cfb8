// `keel cluster up` (control/up/cluster_up.h): the whole tree on one machine, with what only the
// keel binary knows — itself as the children's program, the built-in models, the served model's
// name and the gateway's HTTP front from keel serve's flags.
#include <spdlog/spdlog.h>

#include "builtin_models.h"
#include "cluster_commands.h"
#include "control/up/cluster_up.h"
#include "http_front_flags.h"
#include "proc/stop_signals.h"
#include "self_exe.h"
#include "state_flags.h"

namespace keel::cli {
namespace {

server::ServerConfig gateway_config(const ServeOptions& o) {
  server::ServerConfig c;
  c.host = o.host;
  c.port = o.port;
  c.api_key = o.api_key;
  c.api_keys_file = o.api_keys_file;
  c.quota_dir = o.quota_dir;
  apply_http_front(o, raise_descriptor_limit(), &c);
  c.pic_mode = o.pic;
  c.state_dir = serve_state_dir(o);
  c.responses_dir = o.responses_dir;
  return c;
}

}  // namespace

int run_cluster_up(const ClusterUpOptions& opts) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  control::UpHooks hooks;
  hooks.keel_command = {self_exe()};
  hooks.resolve_model = [](const std::string& model, ThreadPool& pool) {
    return resolve_model_path(model, pool);
  };
  hooks.model_name = served_model_name;
  hooks.gateway = gateway_config(opts.serve);
  const Status s = control::run_cluster_up(opts, hooks, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
