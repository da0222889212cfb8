// run_pic_eval (see pic_eval.h): PicEval holds one Context and one KV storage — the reference
// sequence's blocks, then each prompt's compiled chunks — reused across prompts and variants.
#include "eval/pic_eval.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/pic_prefill.h"
#include "eval/model_text.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "sampling/logprobs.h"
#include "sampling/softmax_math.h"

namespace keel::eval {
namespace {

constexpr int32_t kPicBlock = 16;

struct PicPrompt {
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
  PicEval(const PicEvalConfig& config, const model::Model& model, kernels::Ops& ops, TextSpec text)
      : config_(config), model_(model), ops_(ops), text_(text), ctx_(model, model.n_ctx()) {}

  Status init() {
    const auto layout = model::KvLayout::for_model(model_.hparams(), kPicBlock, DType::kF32);
    const int32_t per_seq = static_cast<int32_t>((model_.n_ctx() + kPicBlock - 1) / kPicBlock);
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                          model::KvStorage::create(layout, per_seq * (config_.chunks + 2)));
    kv_ = std::make_unique<model::KvStorage>(std::move(kv));
    return Status();
  }

  Result<PicPrompt> make_prompt(uint64_t seed) {
    PicPrompt p;
    next_block_ = 0;
    seq_table_ = blocks(model_.n_ctx());
    for (int32_t c = 0; c < config_.chunks; ++c) {
      KEEL_ASSIGN_OR_RETURN(std::vector<int32_t> chunk, write(seed * 1000 + c, config_.chunk_len));
      p.chunks.push_back(
          {static_cast<int32_t>(p.tokens.size()), static_cast<int32_t>(chunk.size())});
      p.tokens.insert(p.tokens.end(), chunk.begin(), chunk.end());
      p.chunk_tables.push_back(blocks(chunk.size()));
      KEEL_TRY(engine::compile_chunk(ctx_, *kv_, ops_, chunk, p.chunk_tables.back()));
    }
    KEEL_ASSIGN_OR_RETURN(std::vector<int32_t> query,
                          write(seed * 1000 + 999, config_.query_len + 1));
    p.tokens.insert(p.tokens.end(), query.begin() + 1, query.end());  // no BOS
    if (static_cast<int64_t>(p.tokens.size()) + config_.continuation > model_.n_ctx()) {
      return Status::out_of_range("prompt + continuation exceed the model's context " +
                                  std::to_string(model_.n_ctx()) + "; use fewer or shorter chunks");
    }
    return p;
  }

  // Prefills through `variant`; then, along `forced` (teacher forcing) or greedily when empty,
  // decodes n tokens. Returns the logits of every step (prefill's first) and the greedy tokens.
  Status run(const PicPrompt& p, const kv::PicVariant& variant, const std::vector<int32_t>& forced,
             std::vector<std::vector<float>>* steps, std::vector<int32_t>* greedy,
             engine::PicPrefillStats* stats, double* ttft_ms) {
    std::vector<float> logits;
    const auto t0 = std::chrono::steady_clock::now();
    KEEL_TRY(engine::pic_prefill(model_, ctx_, *kv_, ops_, p.tokens, p.chunks, p.chunk_tables,
                                 seq_table_, variant, &logits, stats));
    *ttft_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    steps->assign(1, logits);
    greedy->clear();
    auto pos = static_cast<int32_t>(p.tokens.size());
    for (int32_t i = 0; i < config_.continuation; ++i) {
      const int32_t top = sampling::argmax(logits);
      const int32_t next = forced.empty() ? top : forced[static_cast<size_t>(i)];
      greedy->push_back(top);
      if (i + 1 == config_.continuation) break;
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
    std::vector<int32_t> t((tokens + kPicBlock - 1) / kPicBlock);
    std::iota(t.begin(), t.end(), next_block_);
    next_block_ += static_cast<int32_t>(t.size());
    return t;
  }

  Result<std::vector<int32_t>> write(uint64_t seed, int32_t n) {
    return model_written_tokens(ctx_, *kv_, ops_, seq_table_, text_, seed + config_.seed * 7919, n);
  }

  const PicEvalConfig& config_;
  const model::Model& model_;
  kernels::Ops& ops_;
  TextSpec text_;
  model::Context ctx_;
  std::unique_ptr<model::KvStorage> kv_;
  std::vector<int32_t> seq_table_;
  int32_t next_block_ = 0;
};

// One prompt: the reference, then each variant teacher-forced and free-running, into `totals`.
Status eval_pic_prompt(PicEval& eval, const PicPrompt& p,
                       const std::vector<kv::PicVariant>& variants,
                       std::vector<PicTotals>* totals) {
  std::vector<std::vector<float>> ref_steps, steps;
  std::vector<int32_t> ref_greedy, greedy;
  engine::PicPrefillStats stats;
  double ms = 0;
  KEEL_TRY(eval.run(p, *kv::PicVariant::parse("full"), {}, &ref_steps, &ref_greedy, &stats, &ms));
  for (size_t v = 0; v < variants.size(); ++v) {
    PicTotals& t = (*totals)[v];
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
  return Status();
}

PicVariantResult pic_result(const kv::PicVariant& var, const PicTotals& t) {
  PicVariantResult r;
  r.variant = var;
  r.k = var.mode == kv::PicMode::kLegoLink     ? var.k
        : var.mode == kv::PicMode::kCacheBlend ? var.percent
                                               : 0;
  const double n = std::max(t.prompts, 1);
  r.top1_agreement = t.top1 / std::max(t.steps, 1.0);
  r.kl = t.kl / std::max(t.steps, 1.0);
  r.greedy_match_tokens = t.match / n;
  r.recompute_fraction = t.recompute / n;
  r.ttft_ms = t.ttft_ms / n;
  r.prompts = t.prompts;
  return r;
}

}  // namespace

Status PicEvalConfig::validate() const {
  for (const std::string& name : variants) KEEL_TRY(kv::PicVariant::parse(name).status());
  return Status();
}

Result<std::vector<PicVariantResult>> run_pic_eval(const model::Model& model,
                                                   const tokenizer::Tokenizer& tok,
                                                   kernels::Ops& ops, const PicEvalConfig& config) {
  std::vector<kv::PicVariant> variants;
  for (const std::string& name : config.variants) {
    KEEL_ASSIGN_OR_RETURN(kv::PicVariant v, kv::PicVariant::parse(name));
    variants.push_back(v);
  }
  const TextSpec text{tok.bos_id(), tok.eos_id(), static_cast<int32_t>(model.hparams().n_vocab)};
  PicEval eval(config, model, ops, text);
  KEEL_TRY(eval.init());
  std::vector<PicTotals> totals(variants.size());
  for (int32_t i = 0; i < config.prompts; ++i) {
    KEEL_ASSIGN_OR_RETURN(PicPrompt p, eval.make_prompt(static_cast<uint64_t>(i) + 1));
    KEEL_TRY(eval_pic_prompt(eval, p, variants, &totals));
  }
  std::vector<PicVariantResult> out;
  for (size_t v = 0; v < variants.size(); ++v) out.push_back(pic_result(variants[v], totals[v]));
  return out;
}

}  // namespace keel::eval
