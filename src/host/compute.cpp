// setup_compute (see compute.h).
#include "host/compute.h"

#include <algorithm>
#include <thread>

#include "core/cpu_features.h"

namespace keel::host {

Result<ComputeSetup> setup_compute(const ComputeOptions& opts) {
  const CpuFeatures cpu = detect_cpu_features();
  Result<kernels::Isa> isa =
      opts.isa.empty() ? kernels::choose_isa_from_env(cpu) : kernels::choose_isa(cpu, opts.isa);
  if (!isa) return isa.error();
  int threads = opts.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return ComputeSetup{*isa, threads};
}

}  // namespace keel::host
