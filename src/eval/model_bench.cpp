// run_model_bench (see model_bench.h): the timing loop — one run of a test on a bare Context, the
// plain tests and the interleaved exit tests — and the roofline bounds.
#include "eval/model_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <utility>

#include "eval/exit_bench.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/kv_type.h"

namespace keel::eval {
namespace {

// One sequence over every block of the storage, in order.
model::Batch one_sequence(const model::KvStorage& kv) {
  model::Batch batch;
  batch.seqs.resize(1);
  batch.seqs[0].block_table.resize(static_cast<size_t>(kv.num_blocks()));
  for (int32_t b = 0; b < kv.num_blocks(); ++b) batch.seqs[0].block_table[b] = b;
  return batch;
}

// Fills positions [0, depth) of every layer with random K/V rows (normal values, stored as the
// KV type stores them) for the tg tests at that depth: a step's cost does not depend on the
// values, and this takes seconds where a prefill of the same depth would take minutes.
void fill_depth(model::KvStorage& kv, int32_t depth, std::mt19937& rng) {
  const model::KvLayout& l = kv.layout();
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(l.kv_dim));
  for (int32_t p = 0; p < depth; ++p) {
    for (int64_t layer = 0; layer < l.n_layer; ++layer) {
      for (std::byte* dst : {kv.k_row(p / l.block_size, layer, p % l.block_size),
                             kv.v_row(p / l.block_size, layer, p % l.block_size)}) {
        for (float& x : row) x = dist(rng);
        kv.write_row(row.data(), dst);
      }
    }
  }
}

// Seconds of one run of a test: pp = one batch of n_prompt tokens; tg = n_gen single-token steps
// at positions depth, depth + 1, ... (positions [0, depth) hold fill_depth's K/V; the steps
// overwrite only later positions, so every run sees the same context).
// With `exit` (tg only) every step runs ExitBench::step (`head`: the draft head's candidates, or
// candidates given); *head_seconds gets the candidates' time.
Result<double> run_once(const model::Model& m, model::KvStorage& kv, kernels::Ops& ops,
                        int32_t n_prompt, int32_t n_gen, int32_t depth, std::mt19937& rng,
                        ExitBench* exit = nullptr, double* head_seconds = nullptr, bool head = true,
                        model::ExpertTokenCounts* expert_counts = nullptr) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.hparams().n_vocab) - 1);
  model::Batch batch = one_sequence(kv);
  std::vector<float> logits;
  model::Context ctx(m, std::max(n_prompt, 1));  // scratch allocation is not timed
  ctx.count_experts(expert_counts);
  if (exit != nullptr) exit->reset();
  const auto start = std::chrono::steady_clock::now();
  if (n_prompt > 0) {
    for (int32_t i = 0; i < n_prompt; ++i) batch.add(token(rng), i, 0, i + 1 == n_prompt);
    KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
  } else {
    for (int32_t i = 0; i < n_gen; ++i) {
      batch.clear_tokens();
      batch.add(token(rng), depth + i, 0, true);
      if (exit != nullptr) {
        KEEL_TRY(exit->step(ctx, batch, kv, ops, &logits, head, head_seconds));
      } else {
        KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
      }
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Mean and sample sd of r->samples_ts.
void summarize(BenchTest* r) {
  const auto n = static_cast<double>(r->samples_ts.size());
  r->avg_ts = 0;
  for (double v : r->samples_ts) r->avg_ts += v / n;
  double var = 0;
  for (double v : r->samples_ts) var += (v - r->avg_ts) * (v - r->avg_ts);
  r->stddev_ts = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
}

Result<BenchTest> run_test(const model::Model& m, model::KvStorage& kv, kernels::Ops& ops,
                           int32_t n_prompt, int32_t n_gen, int32_t depth, int32_t reps) {
  BenchTest r;
  r.n_prompt = n_prompt;
  r.n_gen = n_gen;
  r.n_depth = depth;
  r.kv_type = kv.layout().dtype;
  r.name = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
  if (depth > 0) r.name += "@d" + std::to_string(depth);
  std::mt19937 rng(1234);
  if (n_prompt == 0 && depth > 0) fill_depth(kv, depth, rng);
  KEEL_TRY(run_once(m, kv, ops, n_prompt, n_gen, depth, rng).status());  // warm-up
  const model::HParams& hp = m.hparams();
  std::unique_ptr<model::ExpertTokenCounts> counts;
  if (hp.is_moe()) counts = std::make_unique<model::ExpertTokenCounts>(hp.n_layer, hp.moe.n_expert);
  for (int32_t i = 0; i < reps; ++i) {
    KEEL_ASSIGN_OR_RETURN(double s, run_once(m, kv, ops, n_prompt, n_gen, depth, rng, nullptr,
                                             nullptr, true, counts.get()));
    r.samples_ts.push_back((n_prompt > 0 ? n_prompt : n_gen) / s);
  }
  summarize(&r);
  if (counts) r.moe = model::summarize_expert_load(counts->snapshot(), hp.n_layer, hp.moe.n_expert);
  return r;
}

// A tg test plain, with the predictors on candidates given, and with the whole exit machinery
// (the draft head's candidates too), interleaved rep by rep (each triple decodes the same tokens):
// {plain row, "+exit" row}.
Result<std::pair<BenchTest, BenchTest>> run_exit_test(const model::Model& m, model::KvStorage& kv,
                                                      kernels::Ops& ops, int32_t n_gen,
                                                      int32_t depth, int32_t reps,
                                                      ExitBench& exit) {
  BenchTest plain;
  plain.n_gen = n_gen;
  plain.n_depth = depth;
  plain.kv_type = kv.layout().dtype;
  plain.name = "tg" + std::to_string(n_gen) + (depth > 0 ? "@d" + std::to_string(depth) : "");
  BenchTest with = plain, given = plain;
  with.name += "+exit";
  with.with_exit = true;
  std::mt19937 rng(1234);
  if (depth > 0) fill_depth(kv, depth, rng);
  double head = 0, sum_plain = 0, sum_with = 0, sum_given = 0;
  for (int32_t i = -1; i < reps; ++i) {  // i = -1: warm-up of all three
    const auto seed = static_cast<uint32_t>(5678 + i);
    std::mt19937 a(seed), b(seed), c(seed);
    KEEL_ASSIGN_OR_RETURN(double sp, run_once(m, kv, ops, 0, n_gen, depth, a));
    double h = 0, unused = 0;
    KEEL_ASSIGN_OR_RETURN(double sg, run_once(m, kv, ops, 0, n_gen, depth, c, &exit, &unused,
                                              /*head=*/false));
    KEEL_ASSIGN_OR_RETURN(double sw, run_once(m, kv, ops, 0, n_gen, depth, b, &exit, &h));
    if (i < 0) continue;
    plain.samples_ts.push_back(n_gen / sp);
    given.samples_ts.push_back(n_gen / sg);
    with.samples_ts.push_back(n_gen / sw);
    sum_plain += sp;
    sum_given += sg;
    sum_with += sw;
    head += h;
  }
  summarize(&plain);
  summarize(&given);
  summarize(&with);
  with.plain_ts = plain.avg_ts;
  with.overhead = sum_with / sum_plain - 1.0;
  with.candidates_share = head / sum_plain;
  with.predictors_ts = given.avg_ts;
  with.predictors_overhead = sum_given / sum_plain - 1.0;
  return std::make_pair(std::move(plain), std::move(with));
}

// The features a table may use: a forced lower table must not be measured with wider instructions.
CpuFeatures features_for(CpuFeatures cpu, kernels::Isa isa) {
  if (isa != kernels::Isa::kAvx512) {
    cpu.avx512f = cpu.avx512bw = cpu.avx512vl = cpu.avx512dq = false;
    cpu.avx512vnni = cpu.avx512bf16 = false;
  }
  if (isa == kernels::Isa::kScalar) cpu.avx2 = cpu.fma = false;
  return cpu;
}

// Tokens of the longest test: prompts, and generations after the deepest fill.
int32_t longest_test(const ModelBenchConfig& config) {
  int32_t longest = 1;
  for (int32_t n : config.n_prompt) longest = std::max(longest, n);
  int32_t deepest = 0;
  for (int32_t d : config.n_depth) deepest = std::max(deepest, d);
  for (int32_t n : config.n_gen) longest = std::max(longest, n + deepest);
  return longest;
}

// Every test of one KV type (storage for `longest` tokens), appended to *tests.
Status run_kv_type_tests(const model::Model& m, kernels::Ops& ops, const ModelBenchConfig& config,
                         DType kv_type, int32_t longest, ExitBench* exit,
                         std::vector<BenchTest>* tests) {
  const model::KvLayout layout = model::KvLayout::for_model(m.hparams(), 16, kv_type);
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, model::KvStorage::create(layout, (longest + 15) / 16));
  for (int32_t n : config.n_prompt) {
    if (n == 0) continue;
    KEEL_ASSIGN_OR_RETURN(BenchTest t, run_test(m, kv, ops, n, 0, 0, config.reps));
    tests->push_back(std::move(t));
  }
  for (int32_t d : config.n_depth) {
    for (int32_t n : config.n_gen) {
      if (n == 0) continue;
      if (exit != nullptr) {
        KEEL_ASSIGN_OR_RETURN(auto pair, run_exit_test(m, kv, ops, n, d, config.reps, *exit));
        tests->push_back(std::move(pair.first));
        tests->push_back(std::move(pair.second));
        continue;
      }
      KEEL_ASSIGN_OR_RETURN(BenchTest t, run_test(m, kv, ops, 0, n, d, config.reps));
      tests->push_back(std::move(t));
    }
  }
  return Status();
}

}  // namespace

Status ModelBenchConfig::validate() const {
  for (int32_t n : n_prompt) {
    if (n < 0) return Status::invalid_argument("-p must be ≥ 0");
  }
  for (int32_t n : n_gen) {
    if (n < 0) return Status::invalid_argument("-n must be ≥ 0");
  }
  if (reps < 1) return Status::invalid_argument("-r must be ≥ 1");
  for (const std::string& name : kv_types) KEEL_TRY(model::parse_kv_type(name).status());
  if (kv_types.empty()) return Status::invalid_argument("--kv-type needs at least one type");
  for (int32_t d : n_depth) {
    if (d < 0) return Status::invalid_argument("-d must be ≥ 0");
  }
  return Status();
}

Result<ModelBenchReport> run_model_bench(const model::Model& m, ThreadPool& pool, kernels::Isa isa,
                                         const ModelBenchConfig& config) {
  KEEL_TRY(config.validate());
  std::vector<DType> kv_types;
  for (const std::string& name : config.kv_types) {
    KEEL_ASSIGN_OR_RETURN(const DType t, model::parse_kv_type(name));
    kv_types.push_back(t);
  }
  const int32_t longest = longest_test(config);
  if (longest > m.n_ctx()) {
    return Status::out_of_range(
        fmt::format("a test of {} tokens does not fit the context of {}", longest, m.n_ctx()));
  }
  ModelBenchReport report;
  report.cpu = detect_cpu_features();
  report.cost = model_cost(m);
  if (config.roofline) {
    KEEL_ASSIGN_OR_RETURN(report.roofline,
                          kernels::measure_roofline(features_for(report.cpu, isa), pool));
  }
  kernels::Ops ops(isa, &pool);
  std::unique_ptr<ExitBench> exit;
  if (!config.exit_predictors.empty()) {
    KEEL_ASSIGN_OR_RETURN(exit, ExitBench::create(m, config.exit_predictors, config.draft_head));
    report.with_exit = true;
    report.exit_source = exit->source();
    report.exit_threshold = exit->threshold();
  }
  for (const DType kv_type : kv_types) {
    KEEL_TRY(run_kv_type_tests(m, ops, config, kv_type, longest, exit.get(), &report.tests));
  }
  if (report.roofline) {
    for (BenchTest& t : report.tests) {
      SpeedBound b = speed_bound(report.cost, m.hparams(), *report.roofline, t.n_prompt);
      t.bound_ts = b.tokens_per_second;
      t.bound_by = std::move(b.bound_by);
    }
  }
  return report;
}

}  // namespace keel::eval
