// `keel bench --grammar FILE`: the cost of structured outputs per generated token. The model
// decodes `--grammar-runs` constrained generations of up to -n tokens (temperature 1, seeds 0..),
// one token per step; each step times the grammar's work (GrammarConstraint::mask over the logits
// plus accept() of the sampled token) apart from the decode step (Context::forward), and reports
// p50 / p99 / max of the grammar time per token, the mean decode step, and the grammar's share of
// a step. FILE: a JSON Schema (.json; a JSON array = several schemas, used in turn) or a GBNF
// grammar. The first run of each grammar starts with empty mask caches ("cold"); later ones reuse
// them (the engine shares caches between requests with the same grammar).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/file_system.h"
#include "grammar/grammar_registry.h"
#include "grammar/json_schema.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model_loading.h"
#include "sampling/sampler.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Result<std::vector<std::string>> read_grammars(const std::string& path) {
  std::string text;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return Status::not_found("cannot open " + path);
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
  }
  if (!path.ends_with(".json")) return std::vector<std::string>{text};
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::invalid_argument(path + " is not JSON");
  std::vector<std::string> out;
  for (const nlohmann::json& s : j.is_array() ? j : nlohmann::json::array({j})) {
    KEEL_ASSIGN_OR_RETURN(std::string g, grammar::json_schema_to_gbnf(s));
    out.push_back(std::move(g));
  }
  if (out.empty()) return Status::invalid_argument(path + " holds no schema");
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Totals {
  std::vector<double> grammar_us;  // per token
  double grammar_s = 0, forward_s = 0;
  int64_t steps = 0;
};

void print_row(const char* name, const Totals& t) {
  std::printf("| %-5s | %7lld | %9.1f | %9.1f | %9.1f | %10.3f | %6.2f %% |\n", name,
              static_cast<long long>(t.grammar_us.size()), percentile(t.grammar_us, 0.5),
              percentile(t.grammar_us, 0.99), percentile(t.grammar_us, 1.0),
              t.steps > 0 ? 1e3 * t.forward_s / static_cast<double>(t.steps) : 0.0,
              100.0 * t.grammar_s / std::max(1e-12, t.grammar_s + t.forward_s));
}

}  // namespace

int run_bench_grammar(const BenchOptions& opts, const host::ComputeSetup& setup) {
  auto fail = [](const Status& s) { return report_error(s); };
  ThreadPool pool(setup.threads);
  auto lm = load_model(opts.model_path, opts.compute, {}, pool);
  if (!lm.ok()) return fail(lm.status());
  const model::Model& m = *lm->model;
  if (!lm->tokenizer) return fail(Status::invalid_argument("the model has no tokenizer"));
  const tokenizer::Tokenizer& tok = *lm->tokenizer;
  auto grammars = read_grammars(opts.grammar_file);
  if (!grammars.ok()) return fail(grammars.status());
  const int32_t max_tokens = opts.n_gen.empty() ? 128 : std::max(1, opts.n_gen.front());
  const std::vector<int32_t> prompt = tok.encode("Once upon a time", true, false);
  const auto total_len = static_cast<int32_t>(prompt.size()) + max_tokens;
  if (total_len > m.n_ctx()) return fail(Status::out_of_range("-n does not fit the context"));

  auto t0 = Clock::now();
  auto trie = std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(tok));
  const double trie_ms = 1e3 * seconds_since(t0);
  grammar::GrammarRegistry registry(trie);
  const model::KvLayout layout = model::KvLayout::for_model(m.hparams(), 16, DType::kF32);
  auto kv = model::KvStorage::create(layout, (total_len + 15) / 16);
  if (!kv.ok()) return fail(kv.status());
  kernels::Ops ops(setup.isa, &pool);
  model::Context ctx(m, std::max<int32_t>(static_cast<int32_t>(prompt.size()), 1));
  model::Batch batch;
  batch.seqs.resize(1);
  for (int32_t b = 0; b < kv->num_blocks(); ++b) batch.seqs[0].block_table.push_back(b);
  std::vector<float> logits;

  Totals cold, warm;
  int stops = 0, truncated = 0, json_ok = 0;
  std::vector<bool> seen(grammars->size(), false);
  for (int32_t run = 0; run < opts.grammar_runs; ++run) {
    const size_t gi = static_cast<size_t>(run) % grammars->size();
    Totals& into = seen[gi] ? warm : cold;
    seen[gi] = true;
    auto constraint = registry.make((*grammars)[gi], max_tokens);
    if (!constraint.ok()) return fail(constraint.status());
    sampling::SamplingParams params;
    params.seed = static_cast<uint64_t>(run);
    sampling::Sampler sampler(params, static_cast<int32_t>(m.hparams().n_vocab));
    batch.clear_tokens();
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
    }
    if (Status s = ctx.forward(batch, *kv, ops, &logits); !s.ok()) return fail(s);
    std::string text;
    bool stopped = false;
    for (int32_t n = 0; n < max_tokens; ++n) {
      auto g0 = Clock::now();
      (*constraint)->mask(logits);
      double g = seconds_since(g0);
      const int32_t token = sampler.sample(logits);
      g0 = Clock::now();
      (*constraint)->accept(token);
      g += seconds_since(g0);
      into.grammar_us.push_back(1e6 * g);
      into.grammar_s += g;
      if (tok.is_eog(token)) {
        stopped = true;
        break;
      }
      text += tok.token_to_piece(token, false);
      if (n + 1 == max_tokens) break;
      batch.clear_tokens();
      batch.add(token, static_cast<int32_t>(prompt.size()) + n, 0, true);
      const auto f0 = Clock::now();
      if (Status s = ctx.forward(batch, *kv, ops, &logits); !s.ok()) return fail(s);
      into.forward_s += seconds_since(f0);
      ++into.steps;
    }
    stops += stopped ? 1 : 0;
    truncated += stopped ? 0 : 1;
    json_ok += nlohmann::json::parse(text, nullptr, false).is_discarded() ? 0 : 1;
    if (opts.compute.verbose) std::fprintf(stderr, "run %d: %s\n", run, text.c_str());
  }
  std::printf("grammar bench: %s, vocab %d, %zu grammar(s), %d runs of ≤ %d tokens, %d threads\n",
              opts.grammar_file.c_str(), tok.vocab_size(), grammars->size(), opts.grammar_runs,
              max_tokens, setup.threads);
  std::printf("token trie: %.1f ms, %zu nodes; finished with stop: %d, truncated: %d, "
              "JSON that parses: %d\n\n",
              trie_ms, trie->nodes().size(), stops, truncated, json_ok);
  std::printf("| runs  | tokens  | p50 µs    | p99 µs    | max µs    | step ms    | share    |\n");
  std::printf("|-------|---------|-----------|-----------|-----------|------------|----------|\n");
  print_row("cold", cold);
  print_row("warm", warm);
  Totals all = cold;
  all.grammar_us.insert(all.grammar_us.end(), warm.grammar_us.begin(), warm.grammar_us.end());
  all.grammar_s += warm.grammar_s;
  all.forward_s += warm.forward_s;
  all.steps += warm.steps;
  print_row("all", all);
  return 0;
}

}  // namespace keel::cli
