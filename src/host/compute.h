// Compute set-up for a process that runs a model: the options every computing command shares
// (threads, kernel table, weight handling) and what they resolve to on this CPU. The KEEL_ISA
// environment variable may force a lower kernel table when --isa is not given.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "core/result.h"
#include "kernels/kernels.h"

namespace keel::host {

struct ComputeOptions {
  int threads = 0;                        // 0 = all hardware threads
  std::string isa;                        // "" = best for this CPU; else scalar | avx2 | avx512
  bool use_mmap = false;                  // map weights instead of reading them into memory
  bool verbose = false;                   // timings and details on stderr
  std::string weight_layout = "grouped";  // grouped | rows (model::ModelOptions::group_weights)
};

struct ComputeSetup {
  kernels::Isa isa;
  int threads;
};

// --isa (or KEEL_ISA) must name a table this CPU supports; threads 0 → hardware threads.
Result<ComputeSetup> setup_compute(const ComputeOptions& opts);

}  // namespace keel::host
