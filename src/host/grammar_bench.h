// The structured-output benchmark (`keel bench --grammar`, bench/grammar_bench.cpp): a model
// decodes `runs` constrained generations of up to `max_tokens` tokens (temperature 1, seeds 0..,
// prompt "Once upon a time"), one token per step. Each step times the grammar's work — the mask
// over the logits (GrammarConstraint::mask) plus accept() of the sampled token — apart from the
// decode step (Context::forward). Grammars are used in turn; the first run of each starts with
// empty mask caches ("cold"), later ones reuse them (as the engine shares caches between requests
// with the same grammar).
// Thread safety: a function of its arguments; uses `ops` (and its pool) on the calling thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::host {

struct GrammarBenchOptions {
  std::vector<std::string> grammars;  // GBNF texts, used in turn
  int32_t runs = 10;
  int32_t max_tokens = 200;
  bool print_outputs = false;  // each output on stderr
};

struct GrammarBenchTimes {
  std::vector<double> grammar_us;  // per generated token: mask + accept
  double grammar_seconds = 0;
  double forward_seconds = 0;  // decode steps (prompt prefill excluded)
  int64_t steps = 0;
};

struct GrammarBenchReport {
  GrammarBenchTimes cold, warm;
  int32_t stops = 0, truncated = 0, json_parses = 0;
  double trie_ms = 0;
  size_t trie_nodes = 0;
};

Result<GrammarBenchReport> run_grammar_bench(const model::Model& model,
                                             const tokenizer::Tokenizer& tok, kernels::Ops& ops,
                                             const GrammarBenchOptions& opts);

// Reads FILE: a JSON Schema (.json; a JSON array = several) compiled to GBNF, or a GBNF grammar.
Result<std::vector<std::string>> read_bench_grammars(const std::string& path);

// The report as a Markdown table (p50 / p99 / max µs per token, mean decode step, share).
void print_grammar_bench(std::FILE* out, const GrammarBenchReport& r);

}  // namespace keel::host
