// `keel cluster bench-scale` (control/scaleout/scale_bench.h): the scale-out bench, with what only
// the keel binary knows — itself as the TEs' program and what -m names (a built-in model) — and
// its report printed as JSON (--json) or text (control/scaleout/scale_bench_report.h).
#include <cstdio>

#include "builtin_models.h"
#include "cluster_commands.h"
#include "control/scaleout/scale_bench.h"
#include "control/scaleout/scale_bench_report.h"
#include "core/thread_pool.h"
#include "self_exe.h"

namespace keel::cli {
namespace {

Status bench_main(const ClusterBenchScaleOptions& o) {
  control::ScaleBenchConfig config = o.bench;
  {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(config.model_path, resolve_model_path(o.bench.model_path, pool));
  }
  KEEL_ASSIGN_OR_RETURN(cluster::Json report, control::run_scale_bench(config, {self_exe()}));
  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::fputs(control::scale_bench_text(report).c_str(), stdout);
  }
  return {};
}

}  // namespace

int run_cluster_bench_scale(const ClusterBenchScaleOptions& opts) {
  const Status s = bench_main(opts);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
