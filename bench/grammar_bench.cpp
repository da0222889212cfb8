// keel_grammar_bench MODEL.gguf FILE [max_tokens] [runs] [threads]: the structured-output
// benchmark (host/grammar_bench.h) without the rest of the CLI — the same code as
// `keel bench --grammar FILE -m MODEL -n max_tokens --grammar-runs runs -t threads`.
#include <cstdio>
#include <cstdlib>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "host/grammar_bench.h"
#include "kernels/dispatch.h"

int main(int argc, char** argv) {
  using namespace keel;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf FILE [max_tokens] [runs] [threads]\n", argv[0]);
    return 2;
  }
  host::GrammarBenchOptions o;
  o.max_tokens = argc > 3 ? std::atoi(argv[3]) : 200;
  o.runs = argc > 4 ? std::atoi(argv[4]) : 10;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1;
  auto grammars = host::read_bench_grammars(argv[2]);
  if (!grammars.ok()) {
    std::fprintf(stderr, "%s\n", grammars.error().to_string().c_str());
    return 1;
  }
  o.grammars = std::move(grammars).value();
  o.print_outputs = std::getenv("KEEL_BENCH_VERBOSE") != nullptr;
  auto m = model::Model::open(argv[1]);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.error().to_string().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::from_gguf((*m)->file());
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().to_string().c_str());
    return 1;
  }
  ThreadPool pool(threads);
  kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
  auto rep = host::run_grammar_bench(**m, *tok, ops, o);
  if (!rep.ok()) {
    std::fprintf(stderr, "%s\n", rep.error().to_string().c_str());
    return 1;
  }
  std::printf("grammar bench: %s, vocab %d, %zu grammar(s), %d runs of ≤ %d tokens, %d threads\n",
              argv[2], tok->vocab_size(), o.grammars.size(), o.runs, o.max_tokens, threads);
  host::print_grammar_bench(stdout, *rep);
  return 0;
}
