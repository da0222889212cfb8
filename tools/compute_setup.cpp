// setup_compute / report_error.
#include "compute_setup.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "core/cpu_features.h"

namespace keel::cli {

Result<ComputeSetup> setup_compute(const ComputeOptions& opts) {
  const CpuFeatures cpu = detect_cpu_features();
  Result<kernels::Isa> isa =
      opts.isa.empty() ? kernels::choose_isa_from_env(cpu) : kernels::choose_isa(cpu, opts.isa);
  if (!isa) return isa.error();
  int threads = opts.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return ComputeSetup{*isa, threads};
}

int report_error(const Status& s) {
  std::fprintf(stderr, "keel: %s\n", s.message().c_str());
  return 1;
}

}  // namespace keel::cli
