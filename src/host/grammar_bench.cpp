// The structured-output benchmark (grammar_bench.h).
#include "host/grammar_bench.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "grammar/grammar_registry.h"
#include "grammar/json_schema.h"
#include "host/progress_reporter.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "sampling/sampler.h"

namespace keel::host {
namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void print_row(std::FILE* out, const char* name, const GrammarBenchTimes& t) {
  std::fprintf(out, "| %-5s | %7zu | %9.1f | %9.1f | %9.1f | %10.3f | %6.2f %% |\n", name,
               t.grammar_us.size(), percentile(t.grammar_us, 0.5), percentile(t.grammar_us, 0.99),
               percentile(t.grammar_us, 1.0),
               t.steps > 0 ? 1e3 * t.forward_seconds / static_cast<double>(t.steps) : 0.0,
               100.0 * t.grammar_seconds / std::max(1e-12, t.grammar_seconds + t.forward_seconds));
}

}  // namespace

Result<std::vector<std::string>> read_bench_grammars(const std::string& path) {
  std::string text;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::not_found("cannot open " + path);
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
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

Result<GrammarBenchReport> run_grammar_bench(const model::Model& m, const tokenizer::Tokenizer& tok,
                                             kernels::Ops& ops, const GrammarBenchOptions& opts) {
  if (opts.grammars.empty()) return Status::invalid_argument("no grammar");
  const std::vector<int32_t> prompt = tok.encode("Once upon a time", true, false);
  const auto total_len = static_cast<int32_t>(prompt.size()) + opts.max_tokens;
  if (total_len > m.n_ctx()) return Status::out_of_range("max_tokens does not fit the context");
  GrammarBenchReport rep;
  auto t0 = Clock::now();
  auto trie = std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(tok));
  rep.trie_ms = 1e3 * seconds_since(t0);
  rep.trie_nodes = trie->nodes().size();
  grammar::GrammarRegistry registry(trie);
  const model::KvLayout layout = model::KvLayout::for_model(m.hparams(), 16, DType::kF32);
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        model::KvStorage::create(layout, (total_len + 15) / 16));
  model::Context ctx(m, std::max<int32_t>(static_cast<int32_t>(prompt.size()), 1));
  model::Batch batch;
  batch.seqs.resize(1);
  for (int32_t b = 0; b < kv.num_blocks(); ++b) batch.seqs[0].block_table.push_back(b);
  std::vector<float> logits;
  std::vector<bool> seen(opts.grammars.size(), false);
  for (int32_t run = 0; run < opts.runs; ++run) {
    const size_t gi = static_cast<size_t>(run) % opts.grammars.size();
    GrammarBenchTimes& into = seen[gi] ? rep.warm : rep.cold;
    seen[gi] = true;
    KEEL_ASSIGN_OR_RETURN(auto constraint, registry.make(opts.grammars[gi], opts.max_tokens));
    sampling::SamplingParams params;
    params.seed = static_cast<uint64_t>(run);
    sampling::Sampler sampler(params, static_cast<int32_t>(m.hparams().n_vocab));
    batch.clear_tokens();
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
    }
    KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
    std::string text;
    bool stopped = false;
    for (int32_t n = 0; n < opts.max_tokens; ++n) {
      auto g0 = Clock::now();
      constraint->mask(logits);
      double g = seconds_since(g0);
      const int32_t token = sampler.sample(logits);
      g0 = Clock::now();
      constraint->accept(token);
      g += seconds_since(g0);
      into.grammar_us.push_back(1e6 * g);
      into.grammar_seconds += g;
      if (tok.is_eog(token)) {
        stopped = true;
        break;
      }
      text += tok.token_to_piece(token, false);
      if (n + 1 == opts.max_tokens) break;
      batch.clear_tokens();
      batch.add(token, static_cast<int32_t>(prompt.size()) + n, 0, true);
      const auto f0 = Clock::now();
      KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
      into.forward_seconds += seconds_since(f0);
      ++into.steps;
    }
    rep.stops += stopped ? 1 : 0;
    rep.truncated += stopped ? 0 : 1;
    rep.json_parses += nlohmann::json::parse(text, nullptr, false).is_discarded() ? 0 : 1;
    if (opts.print_outputs) std::fprintf(stderr, "run %d: %s\n", run, text.c_str());
  }
  return rep;
}

void print_grammar_bench(std::FILE* out, const GrammarBenchReport& r) {
  std::fprintf(out,
               "token trie: %.1f ms, %zu nodes; finished with stop: %d, truncated: %d, "
               "JSON that parses: %d\n\n",
               r.trie_ms, r.trie_nodes, r.stops, r.truncated, r.json_parses);
  std::fprintf(out,
               "| runs  | tokens  | p50 µs    | p99 µs    | max µs    | step ms    | share    |\n");
  std::fprintf(out,
               "|-------|---------|-----------|-----------|-----------|------------|----------|\n");
  print_row(out, "cold", r.cold);
  print_row(out, "warm", r.warm);
  GrammarBenchTimes all = r.cold;
  all.grammar_us.insert(all.grammar_us.end(), r.warm.grammar_us.begin(), r.warm.grammar_us.end());
  all.grammar_seconds += r.warm.grammar_seconds;
  all.forward_seconds += r.warm.forward_seconds;
  all.steps += r.warm.steps;
  print_row(out, "all", all);
}

}  // namespace keel::host
