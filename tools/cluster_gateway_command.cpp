// `keel cluster gateway` (control/up/gateway_server.h): one more gateway in front of a running
// cluster's job executors — its flags, and the run with what only the keel binary knows (the
// built-in models, the served model's name, the HTTP front from keel serve's flags).
#include <spdlog/spdlog.h>

#include "builtin_models.h"
#include "cli_flags.h"
#include "cluster_cli.h"
#include "http_front_flags.h"
#include "proc/stop_signals.h"
#include "state_flags.h"
#include "tenant_flags.h"

namespace keel::cli {

void add_gateway_command(CLI::App* cluster, ClusterCli* cli) {
  control::GatewayOptions& g = *cli->gateway;
  CLI::App* cmd = cli->gateway_cmd = cluster->add_subcommand(
      "gateway", "Another gateway (the OpenAI server) in front of a running cluster's JEs");
  cmd->add_option("-m,--model", g.serve.model_path,
                  "The cluster's GGUF model (its tokenizer and chat template), or builtin:NAME");
  cmd->add_option("--served-model-name", g.serve.served_model_name,
                  "Model id in the API (default: the file's stem)");
  add_chat_template_flags(cmd, &g.serve);
  cmd->add_option("--je", g.je_addresses,
                  "A job executor HOST:PORT of the cluster (repeatable or comma-separated; "
                  "`keel cluster status --json` lists them)")
      ->delimiter(',')
      ->required();
  cmd->add_option("--host", g.serve.host, "Address to listen on (TEs stream tokens here too)");
  cmd->add_option("--port", g.serve.port, "Port (0 = a free one)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", g.serve.api_key, "Require 'Authorization: Bearer KEY'");
  add_tenant_flags(cmd, &g.serve);
  add_http_front_flags(cmd, &g.serve);
  add_reasoning_parser_flag(cmd, &g.serve);
  add_state_flags(cmd, &g.serve);
  cmd->add_option("--drain-timeout", g.serve.drain_timeout_s,
                  "Seconds to finish in-flight requests on SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--start-timeout", g.start_timeout_s,
                  "Seconds to wait for a JE to report a serving TE")
      ->check(CLI::Range(1.0, 3600.0));
}

int run_cluster_gateway(const control::GatewayOptions& opts) {
  const sigset_t stop_signals = proc::block_stop_signals();
  spdlog::set_level(spdlog::level::info);
  control::UpHooks hooks;
  hooks.resolve_model = [](const std::string& model, ThreadPool& pool) {
    return resolve_model_path(model, pool);
  };
  hooks.model_name = served_model_name;
  server::ServerConfig& c = hooks.gateway;
  c.host = opts.serve.host;
  c.port = opts.serve.port;
  c.api_key = opts.serve.api_key;
  c.api_keys_file = opts.serve.api_keys_file;
  c.quota_dir = opts.serve.quota_dir;
  apply_http_front(opts.serve, raise_descriptor_limit(), &c);
  c.state_dir = serve_state_dir(opts.serve);
  c.responses_dir = opts.serve.responses_dir;
  const Status s = control::run_gateway(opts, hooks, stop_signals);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
