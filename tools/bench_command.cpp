// `keel bench`: the flags to eval::ModelBenchConfig, the model loaded (model_loading.h), the
// harness run (eval/model_bench.h: llama-bench-style pp/tg speed tests, per KV type and depth, with
// --roofline bounds and --exit-predictors overheads) and its results printed: the roofline first
// (stderr with -o json), then a markdown table, the exit overheads and an MoE model's expert load,
// or llama-bench's JSON array (-o json). --grammar runs bench_grammar_command.cpp instead.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/cpu_features.h"
#include "eval/model_bench.h"
#include "host/compute.h"
#include "kernels/roofline.h"
#include "model/kv_type.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

using nlohmann::json;

eval::ModelBenchConfig model_bench_config(const BenchOptions& opts) {
  eval::ModelBenchConfig c;
  c.n_prompt = opts.n_prompt;
  c.n_gen = opts.n_gen;
  c.reps = opts.reps;
  c.roofline = opts.roofline;
  c.n_depth = opts.n_depth;
  c.kv_types = opts.kv_types;
  c.exit_predictors = opts.exit_predictors;
  c.draft_head = opts.draft_head;
  return c;
}

void print_roofline(std::FILE* out, const kernels::Roofline& r) {
  if (r.threads == 1) {
    std::fprintf(out, "roofline (1 thread; the same probe again in brackets):\n");
  } else {
    std::fprintf(out, "roofline (%d threads; 1 thread in brackets):\n", r.threads);
  }
  std::fprintf(out, "  read   %7.1f GB/s  (%.1f)\n  triad  %7.1f GB/s  (%.1f)\n", r.read_gbs,
               r.read_gbs_1t, r.triad_gbs, r.triad_gbs_1t);
  std::fprintf(out, "  fp32   %7.0f GFLOP/s (%.0f)\n", r.fp32_gflops, r.fp32_gflops_1t);
  if (r.bf16_gflops > 0) {
    std::fprintf(out, "  bf16   %7.0f GFLOP/s (%.0f) vdpbf16ps\n", r.bf16_gflops, r.bf16_gflops_1t);
  }
  if (r.int8_gops > 0) {
    std::fprintf(out, "  int8   %7.0f GOP/s   (%.0f) %s\n", r.int8_gops, r.int8_gops_1t,
                 r.int8_instruction);
  }
  std::fprintf(out, "\n");
}

std::string model_type(const model::Model& m, const eval::ModelCost& c) {
  const double p = static_cast<double>(c.n_params);
  const std::string size = p >= 1e9   ? fmt::format("{:.1f}B", p / 1e9)
                           : p >= 1e6 ? fmt::format("{:.0f}M", p / 1e6)
                                      : fmt::format("{:.0f}K", p / 1e3);
  return fmt::format("{} {} {}", model::arch_name(m.hparams().arch), size, dtype_name(c.main_type));
}

json to_json(const eval::BenchTest& t, const LoadedModel& lm, const eval::ModelCost& c, int threads,
             kernels::Isa isa, const CpuFeatures& cpu, const std::string& exit_source) {
  json j{{"model_filename", lm.path},
         {"model_type", model_type(*lm.model, c)},
         {"model_size", c.size_bytes},
         {"model_n_params", c.n_params},
         {"cpu_info", cpu.model_name},
         {"backends", "CPU"},
         {"kernels", std::string(kernels::isa_name(isa))},
         {"n_threads", threads},
         {"n_prompt", t.n_prompt},
         {"n_gen", t.n_gen},
         {"n_depth", t.n_depth},
         {"type_k", std::string(model::kv_type_name(t.kv_type))},
         {"type_v", std::string(model::kv_type_name(t.kv_type))},
         {"test", t.name},
         {"avg_ts", t.avg_ts},
         {"stddev_ts", t.stddev_ts},
         {"samples_ts", t.samples_ts}};
  if (t.with_exit) {
    j["exit_predictors"] = exit_source;
    j["plain_avg_ts"] = t.plain_ts;
    j["overhead"] = t.overhead;
    j["candidates_share"] = t.candidates_share;
    j["predictors_avg_ts"] = t.predictors_ts;
    j["predictors_overhead"] = t.predictors_overhead;
  }
  if (t.moe) {
    j["moe_routed"] = t.moe->routed;
    j["moe_max_over_mean"] = t.moe->mean_max_over_mean;
    j["moe_worst_max_over_mean"] = t.moe->worst_max_over_mean;
    j["moe_worst_layer"] = t.moe->worst_layer;
    j["moe_idle_experts"] = t.moe->idle_experts;
  }
  if (t.bound_ts > 0) {
    j["bound_ts"] = t.bound_ts;
    j["efficiency"] = t.avg_ts / t.bound_ts;
    j["bound_by"] = t.bound_by;
  }
  return j;
}

void print_markdown(const std::vector<eval::BenchTest>& tests, const LoadedModel& lm,
                    const eval::ModelCost& c, int threads, kernels::Isa isa) {
  std::printf(
      "| model | size | params | threads | kernels | kv | test | t/s | bound t/s | efficiency |\n");
  std::printf("|---|---:|---:|---:|---|---|---|---:|---:|---:|\n");
  for (const eval::BenchTest& t : tests) {
    const std::string bound =
        t.bound_ts > 0 ? fmt::format("{:.1f} ({})", t.bound_ts, t.bound_by) : std::string("—");
    const std::string eff =
        t.bound_ts > 0 ? fmt::format("{:.0f}%", 100 * t.avg_ts / t.bound_ts) : std::string("—");
    std::printf("| %s | %.2f MiB | %.2f M | %d | %s | %s | %s | %.2f ± %.2f | %s | %s |\n",
                model_type(*lm.model, c).c_str(), static_cast<double>(c.size_bytes) / (1 << 20),
                static_cast<double>(c.n_params) / 1e6, threads,
                std::string(kernels::isa_name(isa)).c_str(),
                std::string(model::kv_type_name(t.kv_type)).c_str(), t.name.c_str(), t.avg_ts,
                t.stddev_ts, bound.c_str(), eff.c_str());
  }
}

// An MoE model's routing over each test's timed runs (random tokens through the model's router).
void print_expert_load(const std::vector<eval::BenchTest>& tests) {
  bool first = true;
  for (const eval::BenchTest& t : tests) {
    if (!t.moe) continue;
    if (first) {
      std::printf(
          "\nExpert load (timed runs; busiest expert / the layer's mean, averaged over layers, and "
          "the worst layer):\n\n| test | routed | max/mean | worst (layer) | idle experts |\n"
          "|---|---:|---:|---:|---:|\n");
      first = false;
    }
    std::printf("| %s | %lld | %.2f | %.2f (%lld) | %lld |\n", t.name.c_str(),
                static_cast<long long>(t.moe->routed), t.moe->mean_max_over_mean,
                t.moe->worst_max_over_mean, static_cast<long long>(t.moe->worst_layer),
                static_cast<long long>(t.moe->idle_experts));
  }
}

void print_exit_overheads(const eval::ModelBenchReport& report) {
  std::printf(
      "\nSpecEE machinery at every predictor layer, threshold %.0f (no token exits): %s\n\n",
      static_cast<double>(report.exit_threshold), report.exit_source.c_str());
  std::printf(
      "| kv | test | plain t/s | predictors t/s | predictors overhead | with candidates t/s | "
      "overhead | of which candidates |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const eval::BenchTest& t : report.tests) {
    if (!t.with_exit) continue;
    std::printf("| %s | %s | %.2f | %.2f | %.1f%% | %.2f | %.1f%% | %.1f%% |\n",
                std::string(model::kv_type_name(t.kv_type)).c_str(), t.name.c_str(), t.plain_ts,
                t.predictors_ts, 100 * t.predictors_overhead, t.avg_ts, 100 * t.overhead,
                100 * t.candidates_share);
  }
  std::printf(
      "\npredictors: the per-layer features and MLPs on candidates given (as a speculative step "
      "has them from its drafter); with candidates: the draft head's top-4 computed per token "
      "too (early exit without speculation)\n");
}

Status bench(const BenchOptions& opts, const host::ComputeSetup& setup) {
  const eval::ModelBenchConfig config = model_bench_config(opts);
  KEEL_TRY(config.validate());
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel lm, load_model(opts.model_path, opts.compute, {}, pool));
  KEEL_ASSIGN_OR_RETURN(const eval::ModelBenchReport report,
                        eval::run_model_bench(*lm.model, pool, setup.isa, config));
  if (report.roofline) {
    // JSON mode keeps stdout for the JSON array.
    print_roofline(opts.output == "md" ? stdout : stderr, *report.roofline);
  }
  if (opts.output == "json") {
    json out = json::array();
    for (const eval::BenchTest& t : report.tests) {
      out.push_back(
          to_json(t, lm, report.cost, setup.threads, setup.isa, report.cpu, report.exit_source));
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_markdown(report.tests, lm, report.cost, setup.threads, setup.isa);
    if (report.with_exit) print_exit_overheads(report);
    print_expert_load(report.tests);
  }
  return {};
}

}  // namespace

int run_bench(const BenchOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  if (!opts.grammar_file.empty()) return run_bench_grammar(opts, *setup);
  const Status s = bench(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
