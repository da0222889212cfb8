// The harness of `keel bench`: llama-bench-style speed tests of one model. pp<N>: N random tokens
// prefilled as one batch into an empty context; tg<N>: N tokens decoded one at a time from an empty
// context; tg<N>@d<D>: the same with positions [0, D) already holding random K/V rows (written once
// per test, untimed), so step i attends to D + i + 1 positions. Every test runs for each KV type
// listed (one KV storage per type). Each test runs once to warm up, then `reps` times; t/s is the
// mean ± sample sd over the reps. With `roofline`, this machine's bandwidth and peaks are measured
// first (kernels/roofline.h) and each test gets a bound (model_cost.h). With `exit_predictors`
// (FILE or "random", exit_bench.h), each tg test runs three ways, interleaved rep by rep with the
// same tokens: plain decode, the predictors on candidates given, and decode with SpecEE's whole
// machinery at every layer that has a predictor but no token exiting; the plain row and a "+exit"
// row with the overheads are reported. An MoE model's tests also report how its router spread the
// timed runs' tokens over the experts.
//
// Thread safety: run_model_bench uses `pool` alone for its duration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/result.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "eval/model_cost.h"
#include "kernels/kernels.h"
#include "kernels/roofline.h"
#include "model/expert_token_counts.h"
#include "model/model.h"

namespace keel::eval {

struct ModelBenchConfig {
  std::vector<int32_t> n_prompt = {512};        // pp tests (0 = none)
  std::vector<int32_t> n_gen = {128};           // tg tests (0 = none)
  int32_t reps = 5;                             // timed runs per test, after one warm-up
  bool roofline = false;                        // measure the machine and bound every test
  std::vector<int32_t> n_depth = {0};           // tg tests after this many filled positions
  std::vector<std::string> kv_types = {"f32"};  // every test per KV type
  std::string exit_predictors;                  // "" = none; FILE or "random" (exit_bench.h)
  std::string draft_head;  // the head whose candidates they read (FILE only; "" = beside the model)
  // InvalidArgument, naming the `keel bench` flags, for negative sizes or depths, reps < 1, an
  // unknown or no KV type.
  [[nodiscard]] Status validate() const;
};

// One row.
struct BenchTest {
  std::string name;  // "pp512" / "tg128" / "tg128@d4096" / "tg128+exit"
  int32_t n_prompt = 0, n_gen = 0, n_depth = 0;
  DType kv_type = DType::kF32;
  std::vector<double> samples_ts;  // tokens per second of each timed run
  double avg_ts = 0, stddev_ts = 0;
  double bound_ts = 0;  // 0 = unknown (no roofline)
  std::string bound_by;
  // A "+exit" row: the plain row's mean t/s, the extra decode time over the plain runs' (Σ with /
  // Σ plain − 1), and of it the candidates' share (Σ head / Σ plain); the predictors alone, on
  // candidates given (as a speculative step has them): their mean t/s and extra time.
  bool with_exit = false;
  double plain_ts = 0, overhead = 0, candidates_share = 0;
  double predictors_ts = 0, predictors_overhead = 0;
  // An MoE model: how its router spread the timed runs' tokens over the experts.
  std::optional<model::ExpertLoad> moe;
};

struct ModelBenchReport {
  ModelCost cost;
  CpuFeatures cpu;                            // this machine's
  std::optional<kernels::Roofline> roofline;  // with config.roofline
  std::vector<BenchTest> tests;  // per KV type: the pp tests, then per depth the tg tests
  // With config.exit_predictors: what the rows measured (ExitBench::source) and the threshold.
  bool with_exit = false;
  std::string exit_source;
  float exit_threshold = 0;
};

// The tests of `config` on `model`. Errors: validate()'s; OutOfRange if a test does not fit the
// model's context; the exit predictors' and the draft head's load errors.
Result<ModelBenchReport> run_model_bench(const model::Model& model, ThreadPool& pool,
                                         kernels::Isa isa, const ModelBenchConfig& config);

}  // namespace keel::eval
