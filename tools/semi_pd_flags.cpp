// The semi-PD engine's flags (see semi_pd_flags.h).
#include "semi_pd_flags.h"

#include "engine/semi_pd_split.h"

namespace keel::cli {

void add_semi_pd_flags(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--semi-pd-split", o->semi_pd_split,
                  "--mode semi-pd: cores for the prefill and the decode worker, X,Y (the sets "
                  "overlap when X+Y exceeds the cores the process may use)")
      ->check([](const std::string& text) -> std::string {
        const auto s = engine::parse_semi_pd_split(text);
        return s.ok() ? std::string() : s.status().message();
      });
  cmd->add_flag("--semi-pd-dynamic", o->semi_pd_dynamic,
                "--mode semi-pd: re-split by the SLO-aware controller once per window "
                "(default: the static --semi-pd-split)");
  cmd->add_option("--semi-pd-ttft-slo-ms", o->semi_pd_ttft_slo_ms,
                  "--semi-pd-dynamic: TTFT SLO in ms (at --semi-pd-percentile)")
      ->check(CLI::Range(1e-6, 3.6e6));
  cmd->add_option("--semi-pd-tpot-slo-ms", o->semi_pd_tpot_slo_ms,
                  "--semi-pd-dynamic: TPOT SLO in ms per output token")
      ->check(CLI::Range(1e-6, 3.6e6));
  cmd->add_option("--semi-pd-window-ms", o->semi_pd_window_ms,
                  "--semi-pd-dynamic: the controller's window (a time window), ms")
      ->check(CLI::Range(10, 3600000));
  cmd->add_option("--semi-pd-step", o->semi_pd_step, "--semi-pd-dynamic: cores added per step")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--semi-pd-max-step", o->semi_pd_max_step,
                  "--semi-pd-dynamic: steps one decision takes at most")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--semi-pd-percentile", o->semi_pd_percentile,
                  "--semi-pd-dynamic: the latency percentile compared with the SLOs, in (0, 100]")
      ->check(CLI::Range(1e-6, 100.0));
  cmd->add_option("--semi-pd-max-cores", o->semi_pd_max_cores,
                  "--semi-pd-dynamic: bound on prefill + decode cores, 2 to twice the cores the "
                  "process may use (default: those cores; above them the sets overlap, as MPS)")
      ->check(CLI::Range(2, 1 << 16));
}

}  // namespace keel::cli
