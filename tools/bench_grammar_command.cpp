// `keel bench --grammar FILE`: the structured-output benchmark (host/grammar_bench.h) on the
// model given with -m, -n tokens per run, --grammar-runs runs.
#include <cstdio>

#include "commands.h"
#include "host/grammar_bench.h"
#include "model_loading.h"

namespace keel::cli {

int run_bench_grammar(const BenchOptions& opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  auto lm = load_model(opts.model_path, opts.compute, {}, pool);
  if (!lm.ok()) return report_error(lm.status());
  if (!lm->tokenizer) return report_error(Status::invalid_argument("the model has no tokenizer"));
  host::GrammarBenchOptions o;
  auto grammars = host::read_bench_grammars(opts.grammar_file);
  if (!grammars.ok()) return report_error(grammars.status());
  o.grammars = std::move(grammars).value();
  o.runs = opts.grammar_runs;
  o.max_tokens = opts.n_gen.empty() ? 128 : std::max(1, opts.n_gen.front());
  o.print_outputs = opts.compute.verbose;
  kernels::Ops ops(setup.isa, &pool);
  auto rep = host::run_grammar_bench(*lm->model, *lm->tokenizer, ops, o);
  if (!rep.ok()) return report_error(rep.status());
  std::printf("grammar bench: %s, vocab %d, %zu grammar(s), %d runs of ≤ %d tokens, %d threads\n",
              opts.grammar_file.c_str(), lm->tokenizer->vocab_size(), o.grammars.size(), o.runs,
              o.max_tokens, setup.threads);
  host::print_grammar_bench(stdout, *rep);
  return 0;
}

}  // namespace keel::cli
