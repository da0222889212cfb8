// setup_compute / report_error.
#include "compute_setup.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/cpu_features.h"

namespace keel::cli {

Result<ComputeSetup> setup_compute(const ComputeOptions& opts) {
  const CpuFeatures cpu = detect_cpu_features();
  ComputeSetup setup{kernels::best_isa(cpu), opts.threads};
  std::string forced = opts.isa;
  if (forced.empty()) {
    if (const char* env = std::getenv("KEEL_ISA"); env && *env) forced = env;
  }
  if (!forced.empty()) {
    auto isa = kernels::isa_from_name(forced);
    if (!isa) {
      return Status::invalid_argument("unknown kernel table '" + forced +
                                      "' (expected scalar, avx2 or avx512)");
    }
    if (!kernels::isa_supported(*isa, cpu)) {
      return Status::unsupported("kernel table '" + forced + "' needs CPU features this CPU lacks (" +
                                 cpu.to_string() + ")");
    }
    setup.isa = *isa;
  }
  if (setup.threads <= 0) setup.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return setup;
}

int report_error(const Status& s) {
  std::fprintf(stderr, "keel: %s\n", s.message().c_str());
  return 1;
}

}  // namespace keel::cli
