// The cluster's processes as keel subcommands (see docs/cluster.md):
//   keel te       one task executor: a model, an engine and the TE-shell (src/cluster)
//   keel je       one job executor: routes jobs to TEs, re-drives them when a TE dies
//   keel cluster up      the whole tree on one machine — TEs and JEs as child processes, the
//                        gateway (the OpenAI server in front of the fleet) in this process
//   keel cluster status  the fleet as the gateway's JE sees it
// Children print a KEEL_READY line when serving (cluster/ready_line.h); every process drains on
// SIGTERM/SIGINT.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands.h"

namespace keel::cli {

// Tier T3 (docs/cluster.md): peer fetching between TEs, and its link throttle (a fault hook).
struct PeerTierOptions {
  bool enabled = false;
  double throttle_bytes_per_s = 0;
};

struct TeOptions {
  ServeOptions engine;  // model, engine and compute flags (host/port are the TE's control port)
  std::string id = "te-0";
  std::string role = "colocated";  // colocated | prefill | decode
  int report_interval_ms = 50;
  PeerTierOptions peer;
};
int run_te(const TeOptions& opts);

struct JeOptions {
  std::string id = "je-0";
  std::string host = "127.0.0.1";
  int port = 0;
  std::vector<std::string> tes;  // host:port of each TE
  std::string model_path;        // the GGUF the TEs serve (its prefix-cache identity)
  std::string served_model_name;
  int32_t block_size = 16;
  std::string router = "deepserve";  // deepserve | round_robin | least_load | prefix
  double balance_threshold = 0.25;
  double balance_abs_tokens = 4096;
  std::string pd_heatmap;  // file written by `keel cluster profile-pd` (optional)
  int64_t stall_timeout_ms = 5000;
  std::string predictor;        // decode-length predictor file (keel train-predictor); "" = none
  std::string predictor_model;  // its side model; "" = model_path
};
int run_je(const JeOptions& opts);

struct ClusterUpOptions {
  ServeOptions serve;      // the gateway's HTTP flags and the TEs' engine flags
  int32_t colocated = -1;  // -1: 2, or 0 when prefill/decode TEs are asked for
  int32_t prefill = 0;
  int32_t decode = 0;
  int32_t jes = 1;
  int32_t threads_per_te = 0;  // 0 = the machine's threads / TEs (at least 1)
  std::string router = "deepserve";
  double balance_threshold = 0.25;
  double balance_abs_tokens = 4096;
  std::string pd_heatmap;
  int64_t stall_timeout_ms = 5000;
  std::string predictor;
  std::string predictor_model;
  double start_timeout_s = 120.0;
  PeerTierOptions peer;  // passed to every TE
};
int run_cluster_up(const ClusterUpOptions& opts);

struct ClusterStatusOptions {
  std::string url = "http://127.0.0.1:8080";
  bool json = false;
};
int run_cluster_status(const ClusterStatusOptions& opts);

}  // namespace keel::cli
