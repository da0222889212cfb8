// Context::forward: the Llama-family layer stack over a flat batch (see context.h for the flow).
#include "model/context.h"

#include <cmath>
#include <cstring>
#include <string>

namespace keel::model {
namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }

std::string token_prefix(size_t i) { return "batch token " + std::to_string(i) + ": "; }

}  // namespace

Context::Context(const Model& model, int64_t max_batch_tokens)
    : model_(model), hp_(model.hparams()), max_tokens_(max_batch_tokens) {
  KEEL_CHECK(max_tokens_ >= 1);
  const size_t t = sz(max_tokens_);
  x_.resize(t * sz(hp_.n_embd));
  xn_.resize(t * sz(hp_.n_embd));
  q_.resize(t * sz(hp_.q_dim()));
  k_.resize(t * sz(hp_.kv_dim()));
  v_.resize(t * sz(hp_.kv_dim()));
  attn_.resize(t * sz(hp_.q_dim()));
  proj_.resize(t * sz(hp_.n_embd));
  gate_.resize(t * sz(hp_.n_ff));
  up_.resize(t * sz(hp_.n_ff));
}

Status Context::validate(const Batch& batch, const KvCache& cache) const {
  const size_t n = batch.tokens.size();
  if (batch.positions.size() != n || batch.seq_slots.size() != n || batch.logits.size() != n) {
    return Status::invalid_argument("batch fields differ in length: tokens " + std::to_string(n) +
                                    ", positions " + std::to_string(batch.positions.size()) +
                                    ", seq_slots " + std::to_string(batch.seq_slots.size()) +
                                    ", logits " + std::to_string(batch.logits.size()));
  }
  if (n == 0 || static_cast<int64_t>(n) > max_tokens_) {
    return Status::invalid_argument("batch has " + std::to_string(n) +
                                    " tokens; this context takes 1 to " +
                                    std::to_string(max_tokens_));
  }
  if (cache.n_layer() != hp_.n_layer || cache.row_width() != hp_.kv_dim()) {
    return Status::invalid_argument("KV cache shape (" + std::to_string(cache.n_layer()) +
                                    " layers, rows of " + std::to_string(cache.row_width()) +
                                    ") does not match the model");
  }
  // next[s]: the position the next token of slot s must have; -1 before its first token.
  std::vector<int64_t> next(sz(cache.n_slots()), -1);
  for (size_t i = 0; i < n; ++i) {
    const int32_t tok = batch.tokens[i], pos = batch.positions[i], slot = batch.seq_slots[i];
    if (tok < 0 || tok >= hp_.n_vocab) {
      return Status::invalid_argument(token_prefix(i) + "token id " + std::to_string(tok) +
                                      " is outside the vocabulary [0, " +
                                      std::to_string(hp_.n_vocab) + ")");
    }
    if (slot < 0 || slot >= cache.n_slots()) {
      return Status::invalid_argument(token_prefix(i) + "sequence slot " + std::to_string(slot) +
                                      " is outside [0, " + std::to_string(cache.n_slots()) + ")");
    }
    if (pos < 0) {
      return Status::invalid_argument(token_prefix(i) + "position " + std::to_string(pos) +
                                      " is negative");
    }
    if (pos >= cache.n_ctx()) {
      return Status::out_of_range(token_prefix(i) + "position " + std::to_string(pos) +
                                  " is beyond the context size " + std::to_string(cache.n_ctx()));
    }
    int64_t& expected = next[sz(slot)];
    const bool first = expected < 0;
    if ((first && pos > cache.length(slot)) || (!first && pos != expected)) {
      return Status::invalid_argument(
          token_prefix(i) + "position " + std::to_string(pos) + " in slot " + std::to_string(slot) +
          " leaves a gap or goes backwards (slot holds " + std::to_string(cache.length(slot)) +
          " positions" +
          (first ? std::string(")") : "; expected " + std::to_string(expected) + ")"));
    }
    expected = pos + 1;
  }
  return Status();
}

Status Context::forward(const Batch& batch, KvCache& cache, kernels::Ops& ops,
                        std::vector<float>* logits) {
  KEEL_TRY(validate(batch, cache));
  embed(batch);
  run_layers(batch, cache, ops);
  if (logits) output_logits(batch, ops, logits);
  // Commit: a slot's length ends after its last token in this batch.
  for (size_t i = 0; i < batch.size(); ++i) {
    cache.set_length(batch.seq_slots[i], int64_t{batch.positions[i]} + 1);
  }
  return Status();
}

void Context::embed(const Batch& batch) {
  const kernels::Matrix& e = model_.weights().token_embd;
  for (size_t t = 0; t < batch.size(); ++t) {
    kernels::dequantize_row(e.dtype, e.data + sz(batch.tokens[t]) * e.row_bytes,
                            x_.data() + t * sz(hp_.n_embd), hp_.n_embd);
  }
}

void Context::run_layers(const Batch& batch, KvCache& cache, kernels::Ops& ops) {
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    attention_block(il, batch, cache, ops);
    ffn_block(il, static_cast<int64_t>(batch.size()), ops);
  }
}

void Context::attention_block(int64_t il, const Batch& batch, KvCache& cache, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  const auto n = static_cast<int64_t>(batch.size());
  const int64_t q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim();
  ops.rms_norm(x_.data(), w.attn_norm.data(), n, hp_.n_embd, hp_.rms_eps, xn_.data());
  ops.matmul(w.wq, xn_.data(), n, q_.data());
  ops.matmul(w.wk, xn_.data(), n, k_.data());
  ops.matmul(w.wv, xn_.data(), n, v_.data());
  for (int64_t t = 0; t < n; ++t) {
    if (!w.bq.empty()) ops.add(w.bq.data(), q_dim, q_.data() + t * q_dim);
    if (!w.bk.empty()) ops.add(w.bk.data(), kv_dim, k_.data() + t * kv_dim);
    if (!w.bv.empty()) ops.add(w.bv.data(), kv_dim, v_.data() + t * kv_dim);
  }
  if (!w.q_norm.empty()) {  // per-head RMSNorm (qwen3): rows of head_dim
    ops.rms_norm(q_.data(), w.q_norm.data(), n * hp_.n_head, hp_.head_dim, hp_.rms_eps, q_.data());
    ops.rms_norm(k_.data(), w.k_norm.data(), n * hp_.n_head_kv, hp_.head_dim, hp_.rms_eps,
                 k_.data());
  }
  ops.rope(hp_.rope, batch.positions.data(), n, hp_.n_head, hp_.head_dim, q_dim, q_.data());
  ops.rope(hp_.rope, batch.positions.data(), n, hp_.n_head_kv, hp_.head_dim, kv_dim, k_.data());
  write_kv(il, batch, cache);
  attend(il, batch, cache, ops);
  ops.matmul(w.wo, attn_.data(), n, proj_.data());
  for (int64_t t = 0; t < n; ++t) {
    if (!w.bo.empty()) ops.add(w.bo.data(), hp_.n_embd, proj_.data() + t * hp_.n_embd);
  }
  ops.add(proj_.data(), n * hp_.n_embd, x_.data());
}

void Context::ffn_block(int64_t il, int64_t n_tokens, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  ops.rms_norm(x_.data(), w.ffn_norm.data(), n_tokens, hp_.n_embd, hp_.rms_eps, xn_.data());
  ops.matmul(w.w_gate, xn_.data(), n_tokens, gate_.data());
  ops.matmul(w.w_up, xn_.data(), n_tokens, up_.data());
  ops.silu_mul(gate_.data(), up_.data(), n_tokens * hp_.n_ff, gate_.data());
  ops.matmul(w.w_down, gate_.data(), n_tokens, proj_.data());
  ops.add(proj_.data(), n_tokens * hp_.n_embd, x_.data());
}

void Context::write_kv(int64_t il, const Batch& batch, KvCache& cache) const {
  const size_t row = sz(hp_.kv_dim());
  for (size_t t = 0; t < batch.size(); ++t) {
    const int32_t slot = batch.seq_slots[t], pos = batch.positions[t];
    std::memcpy(cache.k(il, slot, pos), k_.data() + t * row, row * sizeof(float));
    std::memcpy(cache.v(il, slot, pos), v_.data() + t * row, row * sizeof(float));
  }
}

void Context::attend(int64_t il, const Batch& batch, KvCache& cache, kernels::Ops& ops) {
  const int64_t q_dim = hp_.q_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  for (size_t t = 0; t < batch.size(); ++t) {
    const int32_t slot = batch.seq_slots[t], pos = batch.positions[t];
    ops.attention(q_.data() + t * sz(q_dim), cache.k(il, slot, 0), cache.v(il, slot, 0),
                  int64_t{pos} + 1, cache.row_width(), hp_.n_head, hp_.n_head_kv, hp_.head_dim,
                  scale, attn_.data() + t * sz(q_dim));
  }
}

void Context::output_logits(const Batch& batch, kernels::Ops& ops, std::vector<float>* logits) {
  const size_t d = sz(hp_.n_embd);
  int64_t n_out = 0;
  for (size_t t = 0; t < batch.size(); ++t) {
    if (!batch.logits[t]) continue;
    std::memcpy(xn_.data() + sz(n_out) * d, x_.data() + t * d, d * sizeof(float));
    ++n_out;
  }
  logits->assign(sz(n_out) * sz(hp_.n_vocab), 0.0f);
  if (n_out == 0) return;
  const std::vector<float>& norm = model_.weights().output_norm;
  ops.rms_norm(xn_.data(), norm.data(), n_out, hp_.n_embd, hp_.rms_eps, xn_.data());
  ops.matmul(model_.weights().output, xn_.data(), n_out, logits->data());
}

}  // namespace keel::model
