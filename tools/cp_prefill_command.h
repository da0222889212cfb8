// `keel cp-prefill`: one member of a context-parallel prefill across processes (cp/prefill_run.h)
// — or, with --cp 1, one process alone — for benchmarks and for trying a CP group by hand.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "commands.h"

namespace keel::cli {

struct CpPrefillOptions {
  ComputeOptions compute;
  std::string model_path;
  int members = 1;                     // --cp N
  int rank = 0;                        // this member
  std::string listen = "127.0.0.1:0";  // this member's ring address
  std::string join;                    // members > 0: member 0's HOST:PORT
  int tokens = 8192;
  int seed = 1;
  int rounds = 1;
  int decode = 0;
  std::string kv_type = "f16";
  bool no_overlap = false;
  int timeout_s = 600;
};

CLI::App* add_cp_prefill_command(CLI::App& app, CpPrefillOptions* o);
int run_cp_prefill(const CpPrefillOptions& opts);

}  // namespace keel::cli
