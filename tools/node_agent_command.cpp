// `keel node-agent`: a host's agent (control/placement/node_agent.h) run until SIGTERM or SIGINT.
#include <spdlog/spdlog.h>

#include "cluster_commands.h"
#include "control/placement/node_agent.h"
#include "core/log.h"
#include "proc/stop_signals.h"
#include "self_exe.h"

namespace keel::cli {

int run_node_agent(const NodeAgentOptions& opts) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  control::NodeAgentConfig config = opts;
  config.keel_command = {self_exe()};
  config.model_name = [](const std::string& path) { return served_model_name("", path, path); };
  control::NodeAgent agent(std::move(config));
  if (Status s = agent.start(); !s.ok()) {
    agent.shutdown();
    return report_error(s);
  }
  const int sig = agent.run(stop_signals);
  KEEL_LOG_INFO("node-agent {}: {}: stopping its TEs", opts.host_id, proc::signal_name(sig));
  agent.shutdown();
  return 0;
}

}  // namespace keel::cli
