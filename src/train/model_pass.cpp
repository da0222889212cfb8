// ModelPass::run: embeddings → layers → head and loss, then the backward in reverse
// (model_pass.h).
#include "train/model_pass.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/index_cast.h"

namespace keel::train {

int64_t TrainSequence::num_targets() const {
  int64_t n = 0;
  for (size_t t = 1; t < target.size(); ++t) n += target[t] != 0;
  return n;
}

template <typename T>
ModelPass<T>::ModelPass(const model::Model& model, const LoraLayout& layout, ThreadPool& pool,
                        bool checkpoint_layers)
    : model_(model), layout_(layout), pool_(pool), checkpoint_(checkpoint_layers), weights_(model) {
  const auto n_layer = sz(model.hparams().n_layer);
  acts_.resize(checkpoint_ ? 1 : n_layer);
  if (checkpoint_) inputs_.resize(n_layer);
}

template <typename T>
Status ModelPass<T>::validate(const TrainSequence& seq) const {
  const auto n = static_cast<int64_t>(seq.tokens.size());
  if (n < 2) return Status::invalid_argument("a training sequence needs at least 2 tokens");
  if (n > model_.n_ctx()) {
    return Status::invalid_argument("a training sequence of " + std::to_string(n) +
                                    " tokens is longer than the model's context of " +
                                    std::to_string(model_.n_ctx()));
  }
  if (seq.target.size() != seq.tokens.size()) {
    return Status::invalid_argument("the target mask and the tokens differ in length");
  }
  for (int32_t tok : seq.tokens) {
    if (tok < 0 || tok >= model_.hparams().n_vocab) {
      return Status::invalid_argument("token id " + std::to_string(tok) +
                                      " is outside the vocabulary");
    }
  }
  return Status();
}

template <typename T>
Status ModelPass<T>::poll_stop() const {
  if (gate_ != nullptr && gate_->should_stop()) {
    return Status::cancelled("training stopped");
  }
  return Status();
}

template <typename T>
SequenceLoss ModelPass<T>::head(const TrainSequence& seq, const std::vector<T>& x,
                                double loss_weight, std::vector<T>* dx) {
  const model::HParams& hp = model_.hparams();
  const int64_t d = hp.n_embd, v = hp.n_vocab;
  std::vector<int64_t> rows;  // positions whose next token is trained
  for (size_t t = 1; t < seq.tokens.size(); ++t) {
    if (seq.target[t]) rows.push_back(static_cast<int64_t>(t) - 1);
  }
  SequenceLoss loss;
  loss.num_targets = static_cast<int64_t>(rows.size());
  if (rows.empty()) return loss;
  const auto m = static_cast<int64_t>(rows.size());
  std::vector<T> xs(sz(m * d)), hs(sz(m * d)), inv(sz(m)), logits(sz(m * v));
  for (int64_t r = 0; r < m; ++r) {
    std::copy_n(x.begin() + rows[sz(r)] * d, d, xs.begin() + r * d);
  }
  const std::vector<float>& norm = model_.weights().output_norm;
  rms_norm_forward(xs.data(), norm.data(), m, d, hp.rms_eps, hs.data(), inv.data());
  matmul(pool_, hs.data(), m, weights_.output(), logits.data(), false, gate_);
  for (int64_t r = 0; r < m; ++r) {
    T* l = logits.data() + r * v;
    const int32_t target = seq.tokens[sz(rows[sz(r)] + 1)];
    const int64_t best = std::max_element(l, l + v) - l;
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(l[i] - l[best]));
    const double lse = static_cast<double>(l[best]) + std::log(sum);
    loss.loss_sum += lse - static_cast<double>(l[target]);
    loss.num_correct += best == target;
    if (dx == nullptr) continue;
    for (int64_t i = 0; i < v; ++i) {  // l becomes ∂(weight · loss)/∂logits
      const double p = std::exp(static_cast<double>(l[i]) - lse);
      l[i] = static_cast<T>(loss_weight * (p - (i == target ? 1.0 : 0.0)));
    }
  }
  if (dx == nullptr) return loss;
  std::fill(hs.begin(), hs.end(), T{0});
  matmul(pool_, logits.data(), m, weights_.output_t(), hs.data(), false, gate_);  // ∂/∂normed
  std::vector<T> dxs(sz(m * d), T{0});
  rms_norm_backward(xs.data(), norm.data(), inv.data(), hs.data(), m, d, dxs.data());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < d; ++i) (*dx)[sz(rows[sz(r)] * d + i)] += dxs[sz(r * d + i)];
  }
  return loss;
}

template <typename T>
Result<SequenceLoss> ModelPass<T>::run(const TrainSequence& seq, const T* params, T* grads,
                                       double loss_weight) {
  KEEL_TRY(validate(seq));
  const model::HParams& hp = model_.hparams();
  const auto n = static_cast<int64_t>(seq.tokens.size());
  const int64_t d = hp.n_embd;
  std::vector<int32_t> positions(sz(n));
  for (int64_t t = 0; t < n; ++t) positions[sz(t)] = static_cast<int32_t>(t);
  const RopeTable rope = make_rope_table(hp.rope, positions.data(), n);
  LayerPassContext<T> c{&model_, &layout_, params, grads, &pool_, &rope, n, gate_};

  std::vector<T> x(sz(n * d)), next(sz(n * d));
  for (int64_t t = 0; t < n; ++t) weights_.embed(seq.tokens[sz(t)], x.data() + t * d);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    KEEL_TRY(poll_stop());
    if (checkpoint_) inputs_[sz(il)] = x;
    LayerActivations<T>& a = acts_[checkpoint_ ? 0 : sz(il)];
    layer_forward(c, il, weights_.layer(il), x.data(), &a, next.data());
    x.swap(next);
  }
  KEEL_TRY(poll_stop());
  std::vector<T> dx;
  if (grads != nullptr) dx.assign(sz(n * d), T{0});
  const SequenceLoss loss = head(seq, x, loss_weight, grads ? &dx : nullptr);
  KEEL_TRY(poll_stop());  // the head's products may have given up: its loss is not one
  if (grads == nullptr || loss.num_targets == 0) return loss;
  for (int64_t il = hp.n_layer - 1; il >= 0; --il) {
    KEEL_TRY(poll_stop());
    const DenseLayer<T>& w = weights_.layer(il);
    if (checkpoint_) {  // recompute this layer's activations from its saved input
      layer_forward(c, il, w, inputs_[sz(il)].data(), &acts_[0], next.data());
    }
    layer_backward(c, il, w, acts_[checkpoint_ ? 0 : sz(il)], &dx);
  }
  KEEL_TRY(poll_stop());  // nor are the gradients of a pass that gave up
  return loss;
}

template class ModelPass<float>;
template class ModelPass<double>;

}  // namespace keel::train
