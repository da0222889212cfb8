// The cluster subcommands' flags: `keel te` (a task executor), `keel je` (a job executor) and
// `keel cluster up | status | profile-pd | preload | scale | bench-scale | gateway`.
// add_cluster_commands registers them; run_cluster_commands runs the one that was parsed (nullopt
// when none was).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster_commands.h"
#include "control/up/gateway_server.h"

namespace keel::cli {

struct ClusterCli {
  std::shared_ptr<TeOptions> te = std::make_shared<TeOptions>();
  std::shared_ptr<JeOptions> je = std::make_shared<JeOptions>();
  std::shared_ptr<ClusterUpOptions> up = std::make_shared<ClusterUpOptions>();
  std::shared_ptr<NodeAgentOptions> agent = std::make_shared<NodeAgentOptions>();
  std::shared_ptr<ClusterStatusOptions> status = std::make_shared<ClusterStatusOptions>();
  std::shared_ptr<ClusterProfilePdOptions> profile_pd = std::make_shared<ClusterProfilePdOptions>();
  std::shared_ptr<ClusterScaleOptions> scale = std::make_shared<ClusterScaleOptions>();
  std::shared_ptr<ClusterPreloadOptions> preload = std::make_shared<ClusterPreloadOptions>();
  std::shared_ptr<ClusterBenchScaleOptions> bench_scale =
      std::make_shared<ClusterBenchScaleOptions>();
  std::shared_ptr<control::GatewayOptions> gateway = std::make_shared<control::GatewayOptions>();
  CLI::App* te_cmd = nullptr;
  CLI::App* je_cmd = nullptr;
  CLI::App* up_cmd = nullptr;
  CLI::App* agent_cmd = nullptr;
  CLI::App* status_cmd = nullptr;
  CLI::App* profile_pd_cmd = nullptr;
  CLI::App* preload_cmd = nullptr;
  CLI::App* scale_cmd = nullptr;
  CLI::App* bench_scale_cmd = nullptr;
  CLI::App* gateway_cmd = nullptr;
};

ClusterCli add_cluster_commands(CLI::App& app);
std::optional<int> run_cluster_commands(const ClusterCli& cli);

// `keel cluster gateway` (tools/cluster_gateway_command.cpp).
void add_gateway_command(CLI::App* cluster, ClusterCli* cli);
int run_cluster_gateway(const control::GatewayOptions& opts);

}  // namespace keel::cli
