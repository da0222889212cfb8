// `keel run`: load a model (or the built-in default), tokenize the prompt, prefill it in one
// batch into paged KV blocks of one sequence (--kv-type f32 or f16), then sample and stream tokens
// to stdout through the incremental detokenizer.
// --verbose prints load time and prompt / generation rates to stderr.
#include <chrono>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "core/dtype.h"
#include "host/compute.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/kv_type.h"
#include "model/model.h"
#include "model_loading.h"
#include "sampling/sampler.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// KV blocks of kBlockSize positions for one sequence of up to n_ctx positions, block table 0..n-1.
constexpr int32_t kBlockSize = 16;

Result<model::KvStorage> kv_for_one_sequence(const model::Model& model, const std::string& type,
                                             std::vector<int32_t>* block_table) {
  KEEL_ASSIGN_OR_RETURN(const DType dtype, model::parse_kv_type(type));
  const int64_t n_blocks = (model.n_ctx() + kBlockSize - 1) / kBlockSize;
  if (n_blocks > std::numeric_limits<int32_t>::max()) {
    return Status::out_of_range("context of " + std::to_string(model.n_ctx()) +
                                " positions needs too many KV blocks");
  }
  const model::KvLayout layout = model::KvLayout::for_model(model.hparams(), kBlockSize, dtype);
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        model::KvStorage::create(layout, static_cast<int32_t>(n_blocks)));
  block_table->resize(static_cast<size_t>(n_blocks));
  std::iota(block_table->begin(), block_table->end(), 0);
  return kv;
}

sampling::SamplingParams sampling_params(const RunOptions& opts) {
  sampling::SamplingParams p;
  p.temperature = opts.temperature;
  p.top_k = opts.top_k;
  p.top_p = opts.top_p;
  p.min_p = opts.min_p;
  p.repetition_penalty = opts.repeat_penalty;
  p.seed = opts.seed;
  return p;
}

Status generate(const RunOptions& opts, ThreadPool& pool, kernels::Isa isa) {
  model::ModelOptions mopts;
  mopts.n_ctx = opts.ctx_size;
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(opts.model_path, opts.compute, mopts, pool));
  const double load_s = loaded.load_seconds;
  const model::Model& model = *loaded.model;
  const tokenizer::Tokenizer& tok = *loaded.tokenizer;

  const std::vector<int32_t> prompt = tok.encode(opts.prompt, true, true);
  const int64_t n_ctx = model.n_ctx();
  if (prompt.empty()) return Status::invalid_argument("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx) {
    return Status::out_of_range("the prompt is " + std::to_string(prompt.size()) +
                                " tokens, but the context holds " + std::to_string(n_ctx) +
                                " (use a shorter prompt or --ctx-size)");
  }
  KEEL_ASSIGN_OR_RETURN(sampling::Sampler sampler,
                        sampling::Sampler::create(sampling_params(opts), tok.vocab_size()));
  sampler.set_prompt(prompt);

  kernels::Ops ops(isa, &pool);
  model::Batch batch;
  batch.seqs.resize(1);
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        kv_for_one_sequence(model, opts.kv_type, &batch.seqs[0].block_table));
  model::Context ctx(model, static_cast<int64_t>(prompt.size()));
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  }
  std::vector<float> logits;
  const auto t_prompt = Clock::now();
  KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
  const double prompt_s = seconds_since(t_prompt);

  if (opts.echo_prompt) std::fputs(opts.prompt.c_str(), stdout);
  // The output continues the prompt: its first piece keeps its space ("Tim" + " went").
  tokenizer::IncrementalDecoder decoder(tok, false, tokenizer::DecodePosition::kContinuation);
  int64_t pos = static_cast<int64_t>(prompt.size());
  int32_t generated = 0;
  const auto t_gen = Clock::now();
  while (opts.n_predict < 0 || generated < opts.n_predict) {
    const int32_t next = sampler.sample(logits);
    if (tok.is_eog(next) && !opts.ignore_eos) break;
    sampler.accept(next);
    ++generated;
    const std::string text = decoder.push(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (pos >= n_ctx) break;  // context full
    if (opts.n_predict >= 0 && generated == opts.n_predict) break;
    batch.clear_tokens();
    batch.add(next, static_cast<int32_t>(pos++), 0, true);
    KEEL_TRY(ctx.forward(batch, kv, ops, &logits));
  }
  const std::string rest = decoder.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const double gen_s = seconds_since(t_gen);
  if (opts.compute.verbose) {
    std::fprintf(stderr, "load: %.3f s\n", load_s);
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt.size(), prompt_s,
                 static_cast<double>(prompt.size()) / prompt_s);
    std::fprintf(stderr, "generation: %d tokens in %.3f s (%.1f tokens/s)\n", generated, gen_s,
                 generated > 0 ? generated / gen_s : 0.0);
    std::fprintf(stderr, "threads: %d, kernels: %s, KV: %s in %d blocks of %d (%.1f MiB)\n",
                 pool.num_threads(), std::string(kernels::isa_name(isa)).c_str(),
                 opts.kv_type.c_str(), kv.num_blocks(), kBlockSize,
                 static_cast<double>(kv.bytes()) / (1 << 20));
  }
  return {};
}

}  // namespace

int run_run(const RunOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup) return report_error(setup.error());
  ThreadPool pool(setup->threads);
  Status s = generate(opts, pool, setup->isa);
  if (!s.ok()) return report_error(s);
  return 0;
}

}  // namespace keel::cli
