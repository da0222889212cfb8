// run_kv_eval (see kv_eval.h): one KvRun (a storage of one KV type with one sequence's blocks) per
// type, one Context shared by all; f32's run also writes the sequences.
#include "eval/kv_eval.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "eval/model_text.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/kv_type.h"
#include "sampling/logprobs.h"
#include "sampling/softmax_math.h"

namespace keel::eval {
namespace {

constexpr int32_t kKvBlock = 16;

struct KvTotals {  // one KV type, summed over sequences
  double steps = 0, top1 = 0, kl = 0, nll = 0, max_dlogit = 0;
  double greedy_same = 0, greedy_total = 0, shared_prefix = 0;
  int sequences = 0;
};

// A storage of one KV type with one sequence's blocks, and what it computes.
class KvRun {
 public:
  static Result<KvRun> create(const model::Model& m, DType type, int32_t max_len) {
    const auto layout = model::KvLayout::for_model(m.hparams(), kKvBlock, type);
    const int32_t blocks = (max_len + kKvBlock - 1) / kKvBlock;
    KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, model::KvStorage::create(layout, blocks));
    KvRun r(std::move(kv));
    r.table_.resize(static_cast<size_t>(blocks));
    std::iota(r.table_.begin(), r.table_.end(), 0);
    return r;
  }
  [[nodiscard]] const model::KvStorage& kv() const { return kv_; }

  // n tokens the model writes itself (model_text.h), computed in this storage.
  Result<std::vector<int32_t>> written(model::Context& ctx, kernels::Ops& ops, TextSpec text,
                                       uint64_t seed, int32_t n) {
    return model_written_tokens(ctx, kv_, ops, table_, text, seed, n);
  }

  // Teacher-forced logits: after the prompt, then after each later token but the last.
  Result<std::vector<std::vector<float>>> forced(model::Context& ctx, kernels::Ops& ops,
                                                 const std::vector<int32_t>& tokens,
                                                 int32_t prompt_len) {
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    KEEL_TRY(prefill(ctx, ops, tokens, prompt_len, &logits));
    out.push_back(logits);
    for (int32_t p = prompt_len; p + 1 < static_cast<int32_t>(tokens.size()); ++p) {
      KEEL_TRY(step(ctx, ops, tokens[static_cast<size_t>(p)], p, &logits));
      out.push_back(logits);
    }
    return out;
  }

  // n greedy ids after the prompt.
  Result<std::vector<int32_t>> greedy(model::Context& ctx, kernels::Ops& ops,
                                      const std::vector<int32_t>& tokens, int32_t prompt_len,
                                      int32_t n) {
    std::vector<float> logits;
    KEEL_TRY(prefill(ctx, ops, tokens, prompt_len, &logits));
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < n; ++i) {
      ids.push_back(sampling::argmax(logits));
      if (i + 1 < n) KEEL_TRY(step(ctx, ops, ids.back(), prompt_len + i, &logits));
    }
    return ids;
  }

 private:
  explicit KvRun(model::KvStorage kv) : kv_(std::move(kv)) {}
  Status prefill(model::Context& ctx, kernels::Ops& ops, const std::vector<int32_t>& tokens,
                 int32_t n, std::vector<float>* logits) {
    model::Batch b;
    const int32_t seq = b.add_seq(table_);
    for (int32_t i = 0; i < n; ++i) b.add(tokens[static_cast<size_t>(i)], i, seq, i + 1 == n);
    return ctx.forward(b, kv_, ops, logits);
  }
  Status step(model::Context& ctx, kernels::Ops& ops, int32_t token, int32_t pos,
              std::vector<float>* logits) {
    model::Batch b;
    const int32_t seq = b.add_seq(table_);
    b.add(token, pos, seq, true);
    return ctx.forward(b, kv_, ops, logits);
  }

  model::KvStorage kv_;
  std::vector<int32_t> table_;
};

double kv_log_softmax_at(const std::vector<float>& logits, int32_t token) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  return static_cast<double>(logits[static_cast<size_t>(token)] - mx) - std::log(sum);
}

// Adds the comparison of `got` (a type's forced logits and greedy ids) with f32's to *t.
void compare_kv(const std::vector<std::vector<float>>& ref,
                const std::vector<std::vector<float>>& got, const std::vector<int32_t>& tokens,
                int32_t prompt_len, const std::vector<int32_t>& ref_greedy,
                const std::vector<int32_t>& greedy, KvTotals* t) {
  for (size_t j = 0; j < got.size(); ++j) {
    t->steps += 1;
    t->top1 += sampling::argmax(ref[j]) == sampling::argmax(got[j]) ? 1 : 0;
    t->kl += sampling::kl_divergence(ref[j], got[j]);
    t->nll -= kv_log_softmax_at(got[j], tokens[static_cast<size_t>(prompt_len) + j]);
    for (size_t v = 0; v < got[j].size(); ++v) {
      t->max_dlogit = std::max(t->max_dlogit, std::fabs(double{got[j][v]} - ref[j][v]));
    }
  }
  size_t prefix = 0;
  while (prefix < greedy.size() && greedy[prefix] == ref_greedy[prefix]) ++prefix;
  for (size_t i = 0; i < greedy.size(); ++i) t->greedy_same += greedy[i] == ref_greedy[i] ? 1 : 0;
  t->greedy_total += static_cast<double>(greedy.size());
  t->shared_prefix += static_cast<double>(prefix);
  ++t->sequences;
}

KvTypeResult kv_result(DType type, size_t bytes, size_t f16_bytes, const KvTotals& t) {
  const double steps = std::max(t.steps, 1.0), seqs = std::max(t.sequences, 1);
  KvTypeResult r;
  r.type = type;
  r.bytes_per_token = bytes;
  r.ratio_to_f16 = static_cast<double>(bytes) / f16_bytes;
  r.top1_agreement = t.top1 / steps;
  r.kl = t.kl / steps;
  r.max_abs_dlogit = t.max_dlogit;
  r.perplexity = std::exp(t.nll / steps);
  r.greedy_agreement = t.greedy_same / std::max(t.greedy_total, 1.0);
  r.greedy_shared_prefix = t.shared_prefix / seqs;
  r.sequences = t.sequences;
  r.forced_steps = static_cast<int64_t>(t.steps);
  return r;
}

// The checks of `config` against the model's context; max_len 0 resolved.
Result<KvEvalConfig> resolve_kv_config(KvEvalConfig c, int32_t n_ctx) {
  if (c.max_len == 0) c.max_len = n_ctx;
  if (c.max_len > n_ctx || c.max_len < c.prompt_len + 2) {
    return Status::invalid_argument("--max-len must be in [--prompt-len + 2, " +
                                    std::to_string(n_ctx) + " (the model's context)]");
  }
  if (c.prompt_len + c.greedy > n_ctx) {
    return Status::invalid_argument("--prompt-len + --greedy must fit the model's context (" +
                                    std::to_string(n_ctx) + ")");
  }
  return c;
}

}  // namespace

Result<std::vector<KvTypeResult>> run_kv_eval(const model::Model& m,
                                              const tokenizer::Tokenizer& tok, kernels::Ops& ops,
                                              const KvEvalConfig& config) {
  KEEL_ASSIGN_OR_RETURN(const KvEvalConfig c,
                        resolve_kv_config(config, static_cast<int32_t>(m.n_ctx())));
  std::vector<DType> types = {DType::kF32};  // the reference first
  for (const std::string& name : c.kv_types) {
    KEEL_ASSIGN_OR_RETURN(const DType t, model::parse_kv_type(name));
    if (t != DType::kF32) types.push_back(t);
  }
  const int32_t len = std::max(c.max_len, c.prompt_len + c.greedy);
  std::vector<KvRun> runs;
  for (DType t : types) {
    KEEL_ASSIGN_OR_RETURN(KvRun r, KvRun::create(m, t, len));
    runs.push_back(std::move(r));
  }
  const TextSpec text{tok.bos_id(), tok.eos_id(), static_cast<int32_t>(m.hparams().n_vocab)};
  model::Context ctx(m, c.prompt_len);
  std::vector<KvTotals> totals(types.size());
  for (int32_t i = 0; i < c.prompts; ++i) {
    KEEL_ASSIGN_OR_RETURN(const std::vector<int32_t> tokens,
                          runs[0].written(ctx, ops, text, c.seed * 1000 + i, c.max_len));
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + c.prompt_len);
    KEEL_ASSIGN_OR_RETURN(const auto ref, runs[0].forced(ctx, ops, tokens, c.prompt_len));
    KEEL_ASSIGN_OR_RETURN(const auto ref_greedy,
                          runs[0].greedy(ctx, ops, prompt, c.prompt_len, c.greedy));
    for (size_t k = 0; k < runs.size(); ++k) {
      KEEL_ASSIGN_OR_RETURN(const auto got, runs[k].forced(ctx, ops, tokens, c.prompt_len));
      KEEL_ASSIGN_OR_RETURN(const auto greedy,
                            runs[k].greedy(ctx, ops, prompt, c.prompt_len, c.greedy));
      compare_kv(ref, got, tokens, c.prompt_len, ref_greedy, greedy, &totals[k]);
    }
  }
  const size_t f16_bytes =
      model::KvLayout::for_model(m.hparams(), kKvBlock, DType::kF16).bytes_per_token();
  std::vector<KvTypeResult> out;
  for (size_t k = 0; k < runs.size(); ++k) {
    out.push_back(
        kv_result(types[k], runs[k].kv().layout().bytes_per_token(), f16_bytes, totals[k]));
  }
  return out;
}

}  // namespace keel::eval
