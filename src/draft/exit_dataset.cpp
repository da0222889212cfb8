// build_exit_dataset (see exit_dataset.h).
#include "draft/exit_dataset.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/index_cast.h"
#include "draft/dataset_sampling.h"
#include "kernels/weight_layout.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"

namespace keel::draft {
namespace {

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Per layer of one token: its argmax and the candidates' 4 logits.
struct LayerRecord {
  int32_t top = 0;
  std::array<float, kExitCandidates> z{};
};

class Recorder {
 public:
  Recorder(const model::Model& m, kernels::Ops& ops) : m_(m), ops_(ops) {}

  void begin(const std::vector<DraftCandidate>& cands) {
    const auto d = sz(m_.hparams().n_embd);
    rows_.resize(kExitCandidates * d);
    for (int32_t i = 0; i < kExitCandidates; ++i) {
      cand_[sz(i)] = cands[std::min(sz(i), cands.size() - 1)].token;
      kernels::dequantize_matrix_row(m_.weights().output, cand_[sz(i)], rows_.data() + i * d);
    }
    records_.assign(sz(m_.hparams().n_layer - 1), {});
  }
  bool record(int64_t il, std::span<const float> x) {
    const model::HParams& hp = m_.hparams();
    const auto d = sz(hp.n_embd);
    normed_.resize(d);
    logits_.resize(sz(hp.n_vocab));
    ops_.rms_norm(x.data(), m_.weights().output_norm.data(), 1, hp.n_embd, hp.rms_eps,
                  normed_.data());
    ops_.matmul(m_.weights().output, normed_.data(), 1, logits_.data());
    LayerRecord& r = records_[sz(il)];
    r.top = argmax(logits_);
    for (int32_t i = 0; i < kExitCandidates; ++i) {
      float s = 0.0f;
      for (size_t j = 0; j < d; ++j) s += rows_[i * d + j] * normed_[j];
      r.z[sz(i)] = s;
    }
    return false;  // never exits: the pass runs full depth
  }
  void emit(int32_t final_top, ExitDataset* out) const {
    std::array<float, kExitCandidates> probs{}, prev{};
    for (size_t l = 0; l < records_.size(); ++l) {
      ExitSample s;
      s.features = exit_features(records_[l].z, l == 0 ? nullptr : prev.data(), &probs);
      prev = probs;
      s.label = records_[l].top == final_top ? 1 : 0;
      s.verified = std::find(cand_.begin(), cand_.end(), records_[l].top) != cand_.end() ? 1 : 0;
      out->layers[l].push_back(s);
    }
  }

 private:
  const model::Model& m_;
  kernels::Ops& ops_;
  std::array<int32_t, kExitCandidates> cand_{};
  std::vector<float> rows_, normed_, logits_;
  std::vector<LayerRecord> records_;
};

}  // namespace

Result<ExitDataset> build_exit_dataset(const model::Model& model, const DraftHead& head,
                                       const DraftDataSpec& spec, kernels::Ops& ops,
                                       const ExitDataProgress& progress) {
  KEEL_TRY(spec.validate());
  const model::HParams& hp = model.hparams();
  if (hp.n_layer < 2) return Status::invalid_argument("early exit needs at least 2 layers");
  const auto n_vocab = static_cast<int32_t>(hp.n_vocab);
  if (spec.bos < 0 || spec.bos >= n_vocab) {
    return Status::invalid_argument("BOS id " + std::to_string(spec.bos) +
                                    " is outside the vocabulary");
  }
  const auto max_len = static_cast<int32_t>(std::min<int64_t>(spec.seq_len, model.n_ctx()));
  if (max_len < 3) return Status::invalid_argument("the model's context is too short");
  const int32_t blocks = (max_len + kDatasetKvBlock - 1) / kDatasetKvBlock;
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv,
                        model::KvStorage::create(
                            model::KvLayout::for_model(hp, kDatasetKvBlock, DType::kF32), blocks));
  model::Context ctx(model, 1);
  std::vector<int32_t> table(sz(blocks));
  std::iota(table.begin(), table.end(), 0);
  ExitDataset out;
  out.n_layer = hp.n_layer;
  out.layers.resize(sz(hp.n_layer - 1));
  Recorder rec(model, ops);
  DraftScratch scratch;
  std::vector<float> logits, hidden, feature;
  while (out.num_tokens() < spec.tokens) {
    const int64_t index = out.num_sequences++;
    uint64_t len_state = derive_seed(spec.seed, index, 1);
    const int32_t prefix =
        spec.min_prefix +
        static_cast<int32_t>(sampling::splitmix64_next(&len_state) %
                             static_cast<uint64_t>(spec.max_prefix - spec.min_prefix + 1));
    KEEL_ASSIGN_OR_RETURN(
        sampling::Sampler prompt,
        sampling::Sampler::create(sampled(1.0f, derive_seed(spec.seed, index, 2)), n_vocab));
    std::vector<int32_t> toks = {spec.bos};
    while (static_cast<int32_t>(toks.size()) < max_len && out.num_tokens() < spec.tokens) {
      model::Batch b;
      const int32_t seq = b.add_seq(table);
      b.add(toks.back(), static_cast<int32_t>(toks.size()) - 1, seq, true);
      model::EarlyExit ee;
      const bool recording = !feature.empty();
      if (recording) {
        rec.begin(head.top_candidates(feature, toks.back(), kExitCandidates, ops, &scratch));
        ee.may_exit = {1};
        ee.decide = [&](int64_t il, size_t, std::span<const float> x) { return rec.record(il, x); };
      }
      KEEL_TRY(ctx.forward_early_exit(b, kv, ops, &ee, &logits, &hidden));
      const int32_t final_top = argmax(logits);
      if (recording) rec.emit(final_top, &out);
      feature = hidden;
      const int32_t next =
          static_cast<int32_t>(toks.size()) <= prefix ? prompt.sample(logits) : final_top;
      prompt.accept(next);
      toks.push_back(next);
      if (std::find(spec.stop_ids.begin(), spec.stop_ids.end(), next) != spec.stop_ids.end()) {
        break;
      }
    }
    feature.clear();
    if (progress) progress(out.num_tokens(), spec.tokens);
    if (out.num_sequences > spec.tokens + 16) {
      return Status::internal("the model ends every sequence at once: no training tokens");
    }
  }
  return out;
}

}  // namespace keel::draft
