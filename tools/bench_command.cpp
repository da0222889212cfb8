// `keel bench`: llama-bench-style speed tests of one model. pp<N>: N random tokens prefilled as one
// batch into an empty context; tg<N>: N tokens decoded one at a time from an empty context;
// tg<N>@d<D> (-d D): the same with positions [0, D) already holding random K/V rows (written once
// per test, untimed), so step i attends to D + i + 1 positions. Every test runs for each --kv-type
// listed (one KV storage per type). Each test runs once to warm up, then `reps` times; t/s is
// reported as mean ± sample sd over the reps. With --roofline, this machine's bandwidth and peaks
// are measured first (kernels/roofline.h) and each test gets a bound: tg — weight bytes streamed
// per token / read bandwidth; pp — FLOPs per token / peak of the instructions the matmuls of this
// weight type use on this kernel table. With --exit-predictors FILE|random (bench_exit.h), each tg
// test runs twice, interleaved rep by rep with the same tokens: plain decode, and decode with
// SpecEE's machinery active at every layer that has a predictor but no token exiting; the
// "+exit" row and the overhead (time with / time plain − 1, over all reps) are reported.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_exit.h"
#include "commands.h"
#include "core/cpu_features.h"
#include "host/compute.h"
#include "kernels/roofline.h"
#include "model/context.h"
#include "model/expert_token_counts.h"
#include "model/kv_storage.h"
#include "model/kv_type.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct TestResult {
  std::string name;  // "pp512" / "tg128" / "tg128@d4096"
  int32_t n_prompt = 0, n_gen = 0, n_depth = 0;
  DType kv_type = DType::kF32;
  std::vector<double> samples_ts;
  double avg_ts = 0, stddev_ts = 0;
  double bound_ts = 0;  // 0 = unknown
  std::string bound_by;
  // A "+exit" row (--exit-predictors): the plain row's mean t/s, the extra decode time over the
  // plain runs' (Σ with / Σ plain − 1), and of it the candidates' share (Σ head / Σ plain); the
  // predictors alone, on candidates given (as a speculative step has them): their mean t/s and
  // extra time.
  bool with_exit = false;
  double plain_ts = 0, overhead = 0, candidates_share = 0;
  double predictors_ts = 0, predictors_overhead = 0;
  // An MoE model: how its router spread the timed runs' tokens over the experts.
  std::optional<model::ExpertLoad> moe;
};

// What the model costs per token, from its tensors.
struct ModelCost {
  uint64_t size_bytes = 0;        // every tensor
  uint64_t n_params = 0;          // every tensor
  uint64_t decode_bytes = 0;      // streamed per decoded token: all but a gathered embedding table
                                  // (MoE: the experts' tensors × n_expert_used / n_expert)
  double matmul_flops = 0;        // per prefill token: 2 × weights of the layer matmuls (no head;
                                  // MoE: the active experts' share)
  DType main_type = DType::kF32;  // type holding most layer-matmul bytes
};

// A mixture-of-experts model's expert tensors (blk.N.ffn_*_exps.weight, or one per expert:
// blk.N.ffn_{gate,up,down}.E.weight): a token reads only n_expert_used / n_expert of them.
bool is_expert_tensor(const std::string& name) {
  if (name.find("_exps.") != std::string::npos) return true;
  for (const char* kind : {".ffn_gate.", ".ffn_up.", ".ffn_down."}) {
    const size_t at = name.find(kind);
    if (at != std::string::npos && at + std::strlen(kind) < name.size() &&
        std::isdigit(static_cast<unsigned char>(name[at + std::strlen(kind)]))) {
      return true;
    }
  }
  return false;
}

ModelCost model_cost(const model::Model& m) {
  ModelCost c;
  const auto& tensors = m.file().tensors();
  const bool has_output = m.file().find_tensor("output.weight") != nullptr;
  const model::MoeParams& moe = m.hparams().moe;
  const double active =
      moe.n_expert > 0 ? static_cast<double>(moe.n_expert_used) / static_cast<double>(moe.n_expert)
                       : 1.0;
  std::map<DType, uint64_t> bytes_by_type;
  for (const auto& t : tensors) {
    c.size_bytes += t.num_bytes;
    c.n_params += static_cast<uint64_t>(t.num_elements);
    const bool embd = t.name == "token_embd.weight";
    const double share = is_expert_tensor(t.name) ? active : 1.0;  // per token
    if (!(embd && has_output)) {
      c.decode_bytes += static_cast<uint64_t>(share * static_cast<double>(t.num_bytes));
    }
    if (t.shape.size() >= 2 && !embd && t.name != "output.weight") {
      c.matmul_flops += 2.0 * share * static_cast<double>(t.num_elements);
      bytes_by_type[t.dtype] += t.num_bytes;
    }
  }
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > most) most = bytes, c.main_type = type;
  }
  return c;
}

// Attention FLOPs per token of a pp<n> test (QKᵀ and PV over on average (n + 1) / 2 positions).
double attention_flops(const model::HParams& hp, int32_t n) {
  return 4.0 * static_cast<double>(hp.n_layer * hp.n_head * hp.head_dim) * (n + 1) / 2.0;
}

bool is_quantized(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_K || t == DType::kQ5_K ||
         t == DType::kQ6_K;
}

// The peak (G ops/s) the prefill matmuls of `type` can reach on this table, and its name.
std::pair<double, std::string> prefill_peak(const kernels::Roofline& r, DType type) {
  if (is_quantized(type) && r.int8_gops > 0) return {r.int8_gops, r.int8_instruction};
  if (type == DType::kBF16 && r.bf16_gflops > 0) return {r.bf16_gflops, "vdpbf16ps"};
  return {r.fp32_gflops, "fp32 FMA"};
}

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
  const auto start = Clock::now();
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
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Mean and sample sd of r->samples_ts.
void summarize(TestResult* r) {
  const auto n = static_cast<double>(r->samples_ts.size());
  r->avg_ts = 0;
  for (double v : r->samples_ts) r->avg_ts += v / n;
  double var = 0;
  for (double v : r->samples_ts) var += (v - r->avg_ts) * (v - r->avg_ts);
  r->stddev_ts = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
}

Result<TestResult> run_test(const model::Model& m, model::KvStorage& kv, kernels::Ops& ops,
                            int32_t n_prompt, int32_t n_gen, int32_t depth, int32_t reps) {
  TestResult r;
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
Result<std::pair<TestResult, TestResult>> run_exit_test(const model::Model& m, model::KvStorage& kv,
                                                        kernels::Ops& ops, int32_t n_gen,
                                                        int32_t depth, int32_t reps,
                                                        ExitBench& exit) {
  TestResult plain;
  plain.n_gen = n_gen;
  plain.n_depth = depth;
  plain.kv_type = kv.layout().dtype;
  plain.name = "tg" + std::to_string(n_gen) + (depth > 0 ? "@d" + std::to_string(depth) : "");
  TestResult with = plain, given = plain;
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

void add_bound(TestResult* t, const ModelCost& cost, const model::HParams& hp,
               const kernels::Roofline& roof) {
  if (t->n_prompt > 0) {
    const auto [peak, what] = prefill_peak(roof, cost.main_type);
    if (peak <= 0) return;
    t->bound_ts = peak * 1e9 / (cost.matmul_flops + attention_flops(hp, t->n_prompt));
    t->bound_by = fmt::format("{:.0f} G/s {}", peak, what);
  } else {
    t->bound_ts = roof.read_gbs * 1e9 / static_cast<double>(cost.decode_bytes);
    t->bound_by = fmt::format("{:.1f} GB/s read", roof.read_gbs);
  }
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

std::string model_type(const model::Model& m, const ModelCost& c) {
  const double p = static_cast<double>(c.n_params);
  const std::string size = p >= 1e9   ? fmt::format("{:.1f}B", p / 1e9)
                           : p >= 1e6 ? fmt::format("{:.0f}M", p / 1e6)
                                      : fmt::format("{:.0f}K", p / 1e3);
  return fmt::format("{} {} {}", model::arch_name(m.hparams().arch), size, dtype_name(c.main_type));
}

json to_json(const TestResult& t, const LoadedModel& lm, const ModelCost& c, int threads,
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

void print_markdown(const std::vector<TestResult>& tests, const LoadedModel& lm, const ModelCost& c,
                    int threads, kernels::Isa isa) {
  std::printf(
      "| model | size | params | threads | kernels | kv | test | t/s | bound t/s | efficiency |\n");
  std::printf("|---|---:|---:|---:|---|---|---|---:|---:|---:|\n");
  for (const TestResult& t : tests) {
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
void print_expert_load(const std::vector<TestResult>& tests) {
  bool first = true;
  for (const TestResult& t : tests) {
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

void print_exit_overheads(const std::vector<TestResult>& tests, const ExitBench& exit) {
  std::printf(
      "\nSpecEE machinery at every predictor layer, threshold %.0f (no token exits): %s\n\n",
      static_cast<double>(exit.threshold()), exit.source().c_str());
  std::printf(
      "| kv | test | plain t/s | predictors t/s | predictors overhead | with candidates t/s | "
      "overhead | of which candidates |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const TestResult& t : tests) {
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

// The features a table may use: a forced lower table must not be measured with wider instructions.
CpuFeatures features_for(CpuFeatures cpu, kernels::Isa isa) {
  if (isa != kernels::Isa::kAvx512) {
    cpu.avx512f = cpu.avx512bw = cpu.avx512vl = cpu.avx512dq = false;
    cpu.avx512vnni = cpu.avx512bf16 = false;
  }
  if (isa == kernels::Isa::kScalar) cpu.avx2 = cpu.fma = false;
  return cpu;
}

Status bench(const BenchOptions& opts, const host::ComputeSetup& setup) {
  for (int32_t n : opts.n_prompt) {
    if (n < 0) return Status::invalid_argument("-p must be ≥ 0");
  }
  for (int32_t n : opts.n_gen) {
    if (n < 0) return Status::invalid_argument("-n must be ≥ 0");
  }
  if (opts.reps < 1) return Status::invalid_argument("-r must be ≥ 1");
  std::vector<DType> kv_types;
  for (const std::string& name : opts.kv_types) {
    KEEL_ASSIGN_OR_RETURN(const DType t, model::parse_kv_type(name));
    kv_types.push_back(t);
  }
  if (kv_types.empty()) return Status::invalid_argument("--kv-type needs at least one type");
  for (int32_t d : opts.n_depth) {
    if (d < 0) return Status::invalid_argument("-d must be ≥ 0");
  }
  ThreadPool pool(setup.threads);
  const CpuFeatures cpu = detect_cpu_features();
  KEEL_ASSIGN_OR_RETURN(LoadedModel lm, load_model(opts.model_path, opts.compute, {}, pool));
  const model::Model& m = *lm.model;
  int32_t longest = 1;
  for (int32_t n : opts.n_prompt) longest = std::max(longest, n);
  int32_t deepest = 0;
  for (int32_t d : opts.n_depth) deepest = std::max(deepest, d);
  for (int32_t n : opts.n_gen) longest = std::max(longest, n + deepest);
  if (longest > m.n_ctx()) {
    return Status::out_of_range(
        fmt::format("a test of {} tokens does not fit the context of {}", longest, m.n_ctx()));
  }
  const ModelCost cost = model_cost(m);

  std::optional<kernels::Roofline> roof;
  if (opts.roofline) {
    KEEL_ASSIGN_OR_RETURN(roof, kernels::measure_roofline(features_for(cpu, setup.isa), pool));
    // JSON mode keeps stdout for the JSON array.
    print_roofline(opts.output == "md" ? stdout : stderr, *roof);
  }
  kernels::Ops ops(setup.isa, &pool);
  std::unique_ptr<ExitBench> exit;
  if (!opts.exit_predictors.empty()) {
    KEEL_ASSIGN_OR_RETURN(exit, ExitBench::create(m, opts.exit_predictors, opts.draft_head));
  }
  std::vector<TestResult> tests;
  for (const DType kv_type : kv_types) {
    const model::KvLayout layout = model::KvLayout::for_model(m.hparams(), 16, kv_type);
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                          model::KvStorage::create(layout, (longest + 15) / 16));
    for (int32_t n : opts.n_prompt) {
      if (n == 0) continue;
      KEEL_ASSIGN_OR_RETURN(TestResult t, run_test(m, kv, ops, n, 0, 0, opts.reps));
      tests.push_back(std::move(t));
    }
    for (int32_t d : opts.n_depth) {
      for (int32_t n : opts.n_gen) {
        if (n == 0) continue;
        if (exit) {
          KEEL_ASSIGN_OR_RETURN(auto pair, run_exit_test(m, kv, ops, n, d, opts.reps, *exit));
          tests.push_back(std::move(pair.first));
          tests.push_back(std::move(pair.second));
          continue;
        }
        KEEL_ASSIGN_OR_RETURN(TestResult t, run_test(m, kv, ops, 0, n, d, opts.reps));
        tests.push_back(std::move(t));
      }
    }
  }
  if (roof) {
    for (TestResult& t : tests) add_bound(&t, cost, m.hparams(), *roof);
  }
  if (opts.output == "json") {
    json out = json::array();
    for (const TestResult& t : tests) {
      out.push_back(to_json(t, lm, cost, setup.threads, setup.isa, cpu,
                            exit ? exit->source() : std::string()));
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_markdown(tests, lm, cost, setup.threads, setup.isa);
    if (exit) print_exit_overheads(tests, *exit);
    print_expert_load(tests);
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
