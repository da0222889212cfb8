// `keel eval pic`: EPIC's accuracy/speed trade-off on one model. For each of --prompts prompts
// (fixed seed), the model itself writes --chunks story chunks (sampled from BOS: each chunk keeps
// its own BOS, as EPIC does) and a query; every chunk is compiled alone (its KV at positions
// 0..len-1). The reference is full recompute: a full prefill, then --continuation greedy tokens.
// Each variant prefills the same prompt through the link (engine::pic_prefill) and is then
// teacher-forced along the reference continuation: per step, KL(reference ‖ variant) of the
// next-token distributions and top-1 agreement; free-running, the length of its greedy output
// that matches the reference; recompute fraction = positions computed / prompt tokens; TTFT =
// wall time of the variant's prefill with the chunks already compiled (link + recompute + the
// probe for CacheBlend). Output: a markdown table, or one JSON object per variant (--json).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/thread_pool.h"
#include "engine/pic_prefill.h"
#include "host/compute.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model_loading.h"
#include "model_text.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/softmax_math.h"

namespace keel::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kBlock = 16;

struct Prompt {
  std::vector<int32_t> tokens;
  std::vector<kv::PicChunk> chunks;
  std::vector<std::vector<int32_t>> chunk_tables;  // compiled chunk KV
};

struct PicTotals {  // one variant, summed over prompts
  double kl = 0, top1 = 0, steps = 0, match = 0, recompute = 0, ttft_ms = 0;
  int prompts = 0;
};

class PicEval {
 public:
  PicEval(const EvalPicOptions& opts, const model::Model& model, kernels::Ops& ops)
      : opts_(opts),
        model_(model),
        ops_(ops),
        ctx_(model, model.n_ctx()),
        n_vocab_(static_cast<int32_t>(model.hparams().n_vocab)) {}

  Status init() {
    const auto layout = model::KvLayout::for_model(model_.hparams(), kBlock, DType::kF32);
    const int32_t per_seq = static_cast<int32_t>((model_.n_ctx() + kBlock - 1) / kBlock);
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                          model::KvStorage::create(layout, per_seq * (opts_.chunks + 2)));
    kv_ = std::make_unique<model::KvStorage>(std::move(kv));
    return Status();
  }

  Result<Prompt> make_prompt(uint64_t seed) {
    Prompt p;
    next_block_ = 0;
    seq_table_ = blocks(model_.n_ctx());
    for (int32_t c = 0; c < opts_.chunks; ++c) {
      KEEL_ASSIGN_OR_RETURN(std::vector<int32_t> chunk, write(seed * 1000 + c, opts_.chunk_len));
      p.chunks.push_back(
          {static_cast<int32_t>(p.tokens.size()), static_cast<int32_t>(chunk.size())});
      p.tokens.insert(p.tokens.end(), chunk.begin(), chunk.end());
      p.chunk_tables.push_back(blocks(chunk.size()));
      KEEL_TRY(engine::compile_chunk(ctx_, *kv_, ops_, chunk, p.chunk_tables.back()));
    }
    KEEL_ASSIGN_OR_RETURN(std::vector<int32_t> query,
                          write(seed * 1000 + 999, opts_.query_len + 1));
    p.tokens.insert(p.tokens.end(), query.begin() + 1, query.end());  // no BOS
    if (static_cast<int64_t>(p.tokens.size()) + opts_.continuation > model_.n_ctx()) {
      return Status::out_of_range("prompt + continuation exceed the model's context " +
                                  std::to_string(model_.n_ctx()) + "; use fewer or shorter chunks");
    }
    return p;
  }

  // Prefills through `variant`; then, along `forced` (teacher forcing) or greedily when empty,
  // decodes n tokens. Returns the logits of every step (prefill's first) and the greedy tokens.
  Status run(const Prompt& p, const kv::PicVariant& variant, const std::vector<int32_t>& forced,
             std::vector<std::vector<float>>* steps, std::vector<int32_t>* greedy,
             engine::PicPrefillStats* stats, double* ttft_ms) {
    std::vector<float> logits;
    const auto t0 = Clock::now();
    KEEL_TRY(engine::pic_prefill(model_, ctx_, *kv_, ops_, p.tokens, p.chunks, p.chunk_tables,
                                 seq_table_, variant, &logits, stats));
    *ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    steps->assign(1, logits);
    greedy->clear();
    auto pos = static_cast<int32_t>(p.tokens.size());
    for (int32_t i = 0; i < opts_.continuation; ++i) {
      const int32_t top = sampling::argmax(logits);
      const int32_t next = forced.empty() ? top : forced[static_cast<size_t>(i)];
      greedy->push_back(top);
      if (i + 1 == opts_.continuation) break;
      model::Batch b;
      const int32_t seq = b.add_seq(seq_table_);
      b.add(next, pos++, seq, true);
      KEEL_TRY(ctx_.forward(b, *kv_, ops_, &logits));
      steps->push_back(logits);
    }
    return Status();
  }

 private:
  std::vector<int32_t> blocks(size_t tokens) {
    std::vector<int32_t> t((tokens + kBlock - 1) / kBlock);
    std::iota(t.begin(), t.end(), next_block_);
    next_block_ += static_cast<int32_t>(t.size());
    return t;
  }

  Result<std::vector<int32_t>> write(uint64_t seed, int32_t n) {
    return model_written_tokens(ctx_, *kv_, ops_, seq_table_, {opts_.bos, opts_.eos, n_vocab_},
                                seed + opts_.seed * 7919, n);
  }

  const EvalPicOptions& opts_;
  const model::Model& model_;
  kernels::Ops& ops_;
  model::Context ctx_;
  int32_t n_vocab_;
  std::unique_ptr<model::KvStorage> kv_;
  std::vector<int32_t> seq_table_;
  int32_t next_block_ = 0;
};

Status evaluate(const EvalPicOptions& opts, const host::ComputeSetup& setup) {
  std::vector<kv::PicVariant> variants;
  for (const std::string& name : opts.variants) {
    KEEL_ASSIGN_OR_RETURN(kv::PicVariant v, kv::PicVariant::parse(name));
    variants.push_back(v);
  }
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  kernels::Ops ops(setup.isa, &pool);
  EvalPicOptions o = opts;
  o.bos = loaded.tokenizer->bos_id();
  o.eos = loaded.tokenizer->eos_id();
  PicEval eval(o, *loaded.model, ops);
  KEEL_TRY(eval.init());
  std::vector<PicTotals> totals(variants.size());
  for (int32_t i = 0; i < opts.prompts; ++i) {
    KEEL_ASSIGN_OR_RETURN(Prompt p, eval.make_prompt(static_cast<uint64_t>(i) + 1));
    std::vector<std::vector<float>> ref_steps, steps;
    std::vector<int32_t> ref_greedy, greedy;
    engine::PicPrefillStats stats;
    double ms = 0;
    KEEL_TRY(eval.run(p, *kv::PicVariant::parse("full"), {}, &ref_steps, &ref_greedy, &stats, &ms));
    for (size_t v = 0; v < variants.size(); ++v) {
      PicTotals& t = totals[v];
      KEEL_TRY(eval.run(p, variants[v], ref_greedy, &steps, &greedy, &stats, &ms));
      for (size_t s = 0; s < steps.size(); ++s) {
        t.kl += sampling::kl_divergence(ref_steps[s], steps[s]);
        t.top1 += sampling::argmax(ref_steps[s]) == sampling::argmax(steps[s]) ? 1 : 0;
        t.steps += 1;
      }
      KEEL_TRY(eval.run(p, variants[v], {}, &steps, &greedy, &stats, &ms));  // free-running
      size_t match = 0;
      while (match < greedy.size() && greedy[match] == ref_greedy[match]) ++match;
      t.match += static_cast<double>(match);
      t.recompute += static_cast<double>(stats.recomputed) / static_cast<double>(p.tokens.size());
      t.ttft_ms += ms;
      ++t.prompts;
    }
  }
  if (!opts.json) {
    std::printf(
        "| variant | k | top-1 agreement | KL (nats) | greedy match (tokens of %d) | "
        "recompute fraction | TTFT (ms) |\n|---|---|---|---|---|---|---|\n",
        opts.continuation);
  }
  for (size_t v = 0; v < variants.size(); ++v) {
    const PicTotals& t = totals[v];
    const kv::PicVariant& var = variants[v];
    const int32_t k = var.mode == kv::PicMode::kLegoLink     ? var.k
                      : var.mode == kv::PicMode::kCacheBlend ? var.percent
                                                             : 0;
    const double n = std::max(t.prompts, 1);
    if (opts.json) {
      const nlohmann::json j = {{"variant", var.name()},
                                {"k", k},
                                {"top1_agreement", t.top1 / std::max(t.steps, 1.0)},
                                {"kl", t.kl / std::max(t.steps, 1.0)},
                                {"greedy_match_tokens", t.match / n},
                                {"continuation_tokens", opts.continuation},
                                {"recompute_fraction", t.recompute / n},
                                {"ttft_ms", t.ttft_ms / n},
                                {"prompts", t.prompts}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("| %s | %d | %.3f | %.4f | %.1f | %.3f | %.2f |\n", var.name().c_str(), k,
                  t.top1 / std::max(t.steps, 1.0), t.kl / std::max(t.steps, 1.0), t.match / n,
                  t.recompute / n, t.ttft_ms / n);
    }
  }
  return Status();
}

}  // namespace

int run_eval_pic(const EvalPicOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
