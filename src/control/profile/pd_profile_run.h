// The PD profile run behind `keel cluster profile-pd`: measures DeepServe's PD heatmap on this
// machine. It starts (as child processes, one at a time, stopped by PID) `keel cluster up
// --colocated 2` and `keel cluster up --prefill 1 --decode 1`, both with --threads-per-te N
// (equal total cores); for each cell of the grid (cluster/job/pd_profile.h, the pure part) it
// sends K requests of that prompt length with the output length forced (max_tokens with
// ignore_eos, greedy; the same prompts on both fleets) through the loadgen, and takes each
// request's end-to-end latency as its JCT. The heatmap — mean JCT colocated / mean JCT
// disaggregated − 1 per cell — is written in pd_heatmap.h's format with provenance keys.
// Children's output is kept (its last lines are printed to stderr when something fails) unless
// `verbose`, which forwards it as it comes; progress lines go to stderr.
//
// Thread safety: runs on the caller's thread; blocks until both fleets are measured and stopped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/job/pd_heatmap.h"
#include "core/result.h"

namespace keel::control {

struct PdProfileConfig {
  std::string model_path;                        // the GGUF file (the caller resolves names)
  std::string output = "pd_heatmap.json";        // the heatmap file written
  std::string prefill_lengths = "16,32,64,128";  // prompt tokens per bin (comma-separated)
  std::string ratios = "0.25,0.5,1,2";           // decode/prefill per bin (comma-separated)
  int32_t threads_per_te = 1;                    // each fleet has 2 TEs of this many threads
  int32_t requests_per_cell = 8;                 // requests per cell and fleet (K)
  int32_t concurrency = 2;                       // requests in flight during a cell
  int64_t ctx_size = 0;                          // the TEs' max model length (0 = the model's)
  double start_timeout_s = 120.0;                // seconds each fleet's process may take to start
  bool verbose = false;                          // forward the fleets' output as it comes
};

// Measures both fleets and writes config.output (through a temporary file renamed into place);
// returns the heatmap written. `keel_command` is the program the fleets run (`<keel_command>
// cluster up ...`). InvalidArgument for a list item that is not a number or a grid
// plan_pd_profile refuses (before any process starts); a fleet that does not start, a failed
// request or an output of other than the forced length fails the run, named by its fleet.
Result<cluster::PdHeatmap> run_pd_profile(const PdProfileConfig& config,
                                          const std::vector<std::string>& keel_command);

}  // namespace keel::control
