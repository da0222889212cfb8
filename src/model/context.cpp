// Context::forward: the Llama-family layer stack over a flat batch (see context.h for the flow).
#include "model/context.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/index_cast.h"
#include "kernels/weight_layout.h"
#include "model/page_selector.h"

namespace keel::model {
Context::Context(const Model& model, int64_t max_batch_tokens, LayerRange range)
    : model_(model),
      hp_(model.hparams()),
      max_tokens_(max_batch_tokens),
      first_(range.first),
      last_(range.last < 0 ? model.hparams().n_layer : range.last) {
  KEEL_CHECK(max_tokens_ >= 1);
  KEEL_CHECK(first_ >= 0 && first_ < last_ && last_ <= hp_.n_layer);
  const size_t t = sz(max_tokens_);
  x_.resize(t * sz(hp_.n_embd));
  xn_.resize(t * sz(hp_.n_embd));
  q_.resize(t * sz(hp_.q_dim()));
  k_.resize(t * sz(hp_.kv_dim()));
  v_.resize(t * sz(hp_.kv_dim()));
  attn_.resize(t * sz(hp_.q_dim()));
  proj_.resize(t * sz(hp_.n_embd));
  if (hp_.is_moe()) {
    moe_in_.resize(t * sz(hp_.n_embd));
    moe_out_.resize(t * sz(hp_.n_embd));
    moe_ = std::make_unique<MoeFfn>(hp_, max_tokens_);
  } else {
    gate_.resize(t * sz(hp_.n_ff));
    up_.resize(t * sz(hp_.n_ff));
  }
  n_kv_.resize(t);
  block_tables_.resize(t);
  attend_tables_.resize(t);
}

Status Context::validate(const Batch& batch, const KvStorage& kv) const {
  const KvLayout& layout = kv.layout();
  if (layout.n_layer != last_ - first_ || layout.kv_dim != hp_.kv_dim()) {
    const std::string layers = full_range()
                                   ? "the model (" + std::to_string(hp_.n_layer) + " layers"
                                   : "the model's layers [" + std::to_string(first_) + ", " +
                                         std::to_string(last_) + ") (" +
                                         std::to_string(last_ - first_) + " layers";
    return Status::invalid_argument("KV storage layout (" + std::to_string(layout.n_layer) +
                                    " layers, rows of " + std::to_string(layout.kv_dim) +
                                    ") does not match " + layers + ", rows of " +
                                    std::to_string(hp_.kv_dim()) + ")");
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const LoraAdapter* a = batch.seqs[i].lora;
    if (a != nullptr && static_cast<int64_t>(a->layers().size()) != hp_.n_layer) {
      return Status::invalid_argument("batch sequence " + std::to_string(i) + "'s LoRA adapter " +
                                      a->path() + " was loaded for a model of " +
                                      std::to_string(a->layers().size()) + " layers, not " +
                                      std::to_string(hp_.n_layer));
    }
  }
  BatchLimits limits;
  limits.max_tokens = max_tokens_;
  limits.n_vocab = hp_.n_vocab;
  limits.n_ctx = model_.n_ctx();
  limits.block_size = layout.block_size;
  limits.num_blocks = kv.num_blocks();
  return validate_batch(batch, limits);
}

Status Context::validate_full(const Batch& batch, const KvStorage& kv) const {
  if (!full_range()) {
    return Status::invalid_argument("this pass needs every layer; the context has layers [" +
                                    std::to_string(first_) + ", " + std::to_string(last_) + ")");
  }
  return validate(batch, kv);
}

Status Context::forward_first_stage(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                                    std::vector<float>* residual) {
  if (first_ != 0 || last_ == hp_.n_layer) {
    return Status::invalid_argument("forward_first_stage needs a range [0, k) with k < n_layer");
  }
  KEEL_TRY(validate(batch, kv));
  bind_tables(batch, kv.layout().block_size);
  embed(batch);
  KEEL_TRY(run_layers(batch, kv, ops));
  residual->assign(x_.begin(), x_.begin() + static_cast<ptrdiff_t>(batch.size() * sz(hp_.n_embd)));
  return Status();
}

Status Context::forward_stage_from(const Batch& batch, std::span<const float> residual,
                                   KvStorage& kv, kernels::Ops& ops, std::vector<float>* logits,
                                   std::vector<float>* residual_out) {
  if (first_ == 0) {
    return Status::invalid_argument("forward_stage_from needs a range that starts after layer 0");
  }
  KEEL_TRY(validate(batch, kv));
  if (residual.size() != batch.size() * sz(hp_.n_embd)) {
    return Status::invalid_argument("stage residual has " + std::to_string(residual.size()) +
                                    " floats, the batch needs " +
                                    std::to_string(batch.size() * sz(hp_.n_embd)));
  }
  bind_tables(batch, kv.layout().block_size);
  std::memcpy(x_.data(), residual.data(), residual.size() * sizeof(float));
  KEEL_TRY(run_layers(batch, kv, ops));
  if (last_ == hp_.n_layer) {
    output_logits(batch, ops, logits, nullptr);
  } else {
    residual_out->assign(x_.begin(), x_.begin() + static_cast<ptrdiff_t>(residual.size()));
  }
  return Status();
}

Status Context::forward(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                        std::vector<float>* logits) {
  return forward(batch, kv, ops, logits, nullptr);
}

Status Context::forward(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                        std::vector<float>* logits, std::vector<float>* hidden) {
  KEEL_TRY(validate_full(batch, kv));
  bind_tables(batch, kv.layout().block_size);
  embed(batch);
  KEEL_TRY(run_layers(batch, kv, ops));
  if (logits) output_logits(batch, ops, logits, hidden);
  return Status();
}

Status Context::forward_hidden(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                               std::vector<float>* hidden) {
  KEEL_TRY(validate_full(batch, kv));
  bind_tables(batch, kv.layout().block_size);
  embed(batch);
  KEEL_TRY(run_layers(batch, kv, ops));
  const int64_t n_out = gather_outputs(batch);
  hidden->assign(sz(n_out) * sz(hp_.n_embd), 0.0f);
  if (n_out > 0) {
    ops.rms_norm(xn_.data(), model_.weights().output_norm.data(), n_out, hp_.n_embd, hp_.rms_eps,
                 hidden->data());
  }
  return Status();
}

Status Context::value_deviation(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                                int64_t check_layer, std::vector<float>* deviation) {
  if (check_layer < 0 || check_layer >= hp_.n_layer) {
    return Status::invalid_argument("check layer " + std::to_string(check_layer) +
                                    " is outside [0, " + std::to_string(hp_.n_layer) + ")");
  }
  KEEL_TRY(validate_full(batch, kv));
  bind_tables(batch, kv.layout().block_size);
  embed(batch);
  const auto n = static_cast<int64_t>(batch.size());
  for (int64_t il = 0; il < check_layer; ++il) {
    attention_block(il, batch, kv, ops);
    ffn_block(il, n, ops);
  }
  KEEL_TRY(take_moe_status());
  const LayerWeights& w = model_.weights().layers[sz(check_layer)];
  const int64_t kv_dim = hp_.kv_dim();
  float* const v_out[] = {v_.data()};
  ops.rms_norm_matmul_many({&w.wv, 1}, x_.data(), w.attn_norm.data(), hp_.rms_eps, n, v_out);
  if (lora_.active()) {
    constexpr LoraTarget kV[] = {LoraTarget::kV};
    lora_.add_normed(check_layer, kV, x_.data(), w.attn_norm.data(), hp_.rms_eps, hp_.n_embd, v_out,
                     ops);
  }
  const KvLayout& layout = kv.layout();
  std::vector<float> stored(sz(kv_dim));
  deviation->assign(sz(n), 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    float* v = v_.data() + t * kv_dim;
    if (!w.bv.empty()) ops.add(w.bv.data(), kv_dim, v);
    const int32_t pos = batch.positions[sz(t)];
    kv.read_row(kv.v_row(block_tables_[sz(t)][pos / layout.block_size], check_layer,
                         pos % layout.block_size),
                stored.data());
    double d = 0;
    for (int64_t i = 0; i < kv_dim; ++i) {
      const double e = static_cast<double>(v[i]) - stored[sz(i)];
      d += e * e;
    }
    (*deviation)[sz(t)] = static_cast<float>(d);
  }
  return Status();
}

void Context::bind_tables(const Batch& batch, int32_t bs) {
  compact_.resize(batch.seqs.size());
  for (size_t s = 0; s < batch.seqs.size(); ++s) compact(batch, s, batch.seqs[s].attend_pages);
  for (size_t t = 0; t < batch.size(); ++t) {
    block_tables_[t] = batch.seqs[sz(batch.seq_index[t])].block_table.data();
    bind_token(batch, t, bs);
  }
  lora_.bind(batch);
}

void Context::compact(const Batch& batch, size_t s, std::span<const int32_t> pages) {
  compact_[s].clear();
  for (int32_t page : pages) compact_[s].push_back(batch.seqs[s].block_table[sz(page)]);
}

void Context::bind_token(const Batch& batch, size_t t, int32_t bs) {
  const std::vector<int32_t>& pages = compact_[sz(batch.seq_index[t])];
  const int32_t pos = batch.positions[t];
  if (pages.empty()) {
    n_kv_[t] = pos + 1;
    attend_tables_[t] = block_tables_[t];
  } else {  // every attended page but the token's own is full
    n_kv_[t] = static_cast<int32_t>(pages.size() - 1) * bs + pos % bs + 1;
    attend_tables_[t] = pages.data();
  }
}

void Context::select_pages(int64_t il, const Batch& batch, const KvStorage& kv) {
  const auto q_dim = sz(hp_.q_dim());
  const int32_t bs = kv.layout().block_size;
  // One pass: the tokens of each marked sequence, in batch order.
  select_tokens_.resize(batch.seqs.size());
  for (std::vector<size_t>& tokens : select_tokens_) tokens.clear();
  for (size_t t = 0; t < batch.size(); ++t) {
    const auto s = sz(batch.seq_index[t]);
    if (batch.seqs[s].select_pages) select_tokens_[s].push_back(t);
  }
  std::vector<int32_t> positions;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const std::vector<size_t>& tokens = select_tokens_[s];
    if (tokens.empty()) continue;
    positions.clear();
    select_q_.clear();
    for (size_t t : tokens) {
      positions.push_back(batch.positions[t]);
      select_q_.insert(select_q_.end(), q_.begin() + static_cast<ptrdiff_t>(t * q_dim),
                       q_.begin() + static_cast<ptrdiff_t>((t + 1) * q_dim));
    }
    const std::vector<int32_t> pages = batch.selector->select(
        static_cast<int32_t>(s), batch.seqs[s], positions, select_q_, kv, il);
    if (pages.empty()) continue;
    const std::vector<int32_t>& table = batch.seqs[s].block_table;
    for (size_t j = 0; j < pages.size(); ++j) {
      KEEL_CHECK_MSG(pages[j] >= 0 && sz(pages[j]) < table.size() &&
                         (j == 0 || pages[j] > pages[j - 1]) &&
                         table[sz(pages[j])] != kReleasedBlock,
                     "PageSelector chose a page outside the held block table");
    }
    for (int32_t pos : positions) {
      KEEL_CHECK_MSG(pages.back() == pos / bs, "PageSelector's pages must end at the token's page");
    }
    compact(batch, s, pages);
    for (size_t t : tokens) bind_token(batch, t, bs);
  }
}

void Context::embed(const Batch& batch) {
  const kernels::Matrix& e = model_.weights().token_embd;
  for (size_t t = 0; t < batch.size(); ++t) {
    kernels::dequantize_matrix_row(e, batch.tokens[t], x_.data() + t * sz(hp_.n_embd));
  }
}

Status Context::run_layers(const Batch& batch, KvStorage& kv, kernels::Ops& ops) {
  if (ping_pong_applies(batch)) return run_layers_ping_pong(batch, kv, ops);
  for (int64_t il = first_; il < last_; ++il) {
    attention_block(il, batch, kv, ops);
    ffn_block(il, static_cast<int64_t>(batch.size()), ops);
  }
  return take_moe_status();
}

Status Context::take_moe_status() { return moe_ ? moe_->take_status() : Status(); }

void Context::set_expert_parallel(ExpertParallel ep) {
  KEEL_CHECK(moe_ != nullptr || ep.remote == nullptr);
  ep_ = ep;
  if (moe_) moe_->set_expert_parallel(ep, model_.expert_shard());
}

void Context::attention_block(int64_t il, const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                              Rows rows) {
  const int64_t n = rows.n < 0 ? static_cast<int64_t>(batch.size()) : rows.n;
  const int64_t t0 = rows.first;
  const bool whole = t0 == 0 && n == static_cast<int64_t>(batch.size());
  // LoRA and page selection are bound to the whole batch: a micro-batch never has them.
  KEEL_CHECK(whole || (!lora_.active() && batch.selector == nullptr));
  project_qkv(il, batch.positions.data() + t0, t0, n, ops);
  write_kv(il, batch, kv, {t0, n});
  if (batch.selector != nullptr && il == batch.select_layer) select_pages(il, batch, kv);
  attend(il, batch, kv, ops, {t0, n});
  output_projection(il, t0, n, ops);
}

void Context::project_qkv(int64_t il, const int32_t* positions, int64_t t0, int64_t n,
                          kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  const int64_t q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim(), d = hp_.n_embd;
  float* const x = x_.data() + t0 * d;
  float* const q = q_.data() + t0 * q_dim;
  float* const k = k_.data() + t0 * kv_dim;
  float* const v = v_.data() + t0 * kv_dim;
  // RMSNorm, activation preparation and Q/K/V in one pass: one pool job for the three matrices.
  const kernels::Matrix qkv[] = {w.wq, w.wk, w.wv};
  float* const qkv_out[] = {q, k, v};
  ops.rms_norm_matmul_many(qkv, x, w.attn_norm.data(), hp_.rms_eps, n, qkv_out);
  if (lora_.active()) {
    constexpr LoraTarget kQkv[] = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kV};
    lora_.add_normed(il, kQkv, x, w.attn_norm.data(), hp_.rms_eps, hp_.n_embd, qkv_out, ops);
  }
  for (int64_t t = 0; t < n; ++t) {
    if (!w.bq.empty()) ops.add(w.bq.data(), q_dim, q + t * q_dim);
    if (!w.bk.empty()) ops.add(w.bk.data(), kv_dim, k + t * kv_dim);
    if (!w.bv.empty()) ops.add(w.bv.data(), kv_dim, v + t * kv_dim);
  }
  if (!w.q_norm.empty()) {  // per-head RMSNorm (qwen3): rows of head_dim
    ops.rms_norm(q, w.q_norm.data(), n * hp_.n_head, hp_.head_dim, hp_.rms_eps, q);
    ops.rms_norm(k, w.k_norm.data(), n * hp_.n_head_kv, hp_.head_dim, hp_.rms_eps, k);
  }
  ops.rope(hp_.rope, positions, n, hp_.n_head, hp_.head_dim, q_dim, q);
  ops.rope(hp_.rope, positions, n, hp_.n_head_kv, hp_.head_dim, kv_dim, k);
}

void Context::output_projection(int64_t il, int64_t t0, int64_t n, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  const int64_t q_dim = hp_.q_dim(), d = hp_.n_embd;
  float* const attn = attn_.data() + t0 * q_dim;
  float* const proj = proj_.data() + t0 * d;
  ops.matmul(w.wo, attn, n, proj);
  if (lora_.active()) lora_.add(il, LoraTarget::kO, attn, q_dim, proj, ops);
  for (int64_t t = 0; t < n; ++t) {
    if (!w.bo.empty()) ops.add(w.bo.data(), d, proj + t * d);
  }
  ops.add(proj, n * d, x_.data() + t0 * d);
}

void Context::ffn_block(int64_t il, int64_t n_tokens, kernels::Ops& ops) {
  const LayerWeights& w = model_.weights().layers[sz(il)];
  if (moe_) {  // LoRA adapters of an MoE model target attention only (checked at load)
    ops.rms_norm(x_.data(), w.ffn_norm.data(), n_tokens, hp_.n_embd, hp_.rms_eps, moe_in_.data());
    moe_->forward(w.moe, il, moe_in_.data(), n_tokens, ops, proj_.data());
    if (expert_counts_ != nullptr) expert_counts_->add(il, moe_->experts(n_tokens));
    ops.add(proj_.data(), n_tokens * hp_.n_embd, x_.data());
    return;
  }
  const kernels::Matrix gate_up[] = {w.w_gate, w.w_up};
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  ops.rms_norm_matmul_many(gate_up, x_.data(), w.ffn_norm.data(), hp_.rms_eps, n_tokens,
                           gate_up_out);
  if (lora_.active()) {
    constexpr LoraTarget kGateUp[] = {LoraTarget::kGate, LoraTarget::kUp};
    lora_.add_normed(il, kGateUp, x_.data(), w.ffn_norm.data(), hp_.rms_eps, hp_.n_embd,
                     gate_up_out, ops);
  }
  ops.silu_mul_matmul(w.w_down, gate_.data(), up_.data(), n_tokens, proj_.data());
  if (lora_.active()) lora_.add_silu(il, gate_.data(), up_.data(), hp_.n_ff, proj_.data(), ops);
  ops.add(proj_.data(), n_tokens * hp_.n_embd, x_.data());
}

void Context::write_kv(int64_t il, const Batch& batch, KvStorage& kv, Rows rows) const {
  const int32_t bs = kv.layout().block_size;
  const auto kv_dim = sz(hp_.kv_dim());
  const size_t end = rows.n < 0 ? batch.size() : sz(rows.first + rows.n);
  for (size_t t = sz(rows.first); t < end; ++t) {
    const int32_t pos = batch.positions[t];
    const int32_t block = block_tables_[t][pos / bs];
    kv.write_row(k_.data() + t * kv_dim, kv.k_row(block, kv_layer(il), pos % bs));
    kv.write_row(v_.data() + t * kv_dim, kv.v_row(block, kv_layer(il), pos % bs));
  }
}

void Context::attend(int64_t il, const Batch& batch, const KvStorage& kv, kernels::Ops& ops,
                     Rows rows) {
  const int64_t q_dim = hp_.q_dim();
  const kernels::AttentionHeads heads{hp_.n_head, hp_.n_head_kv, hp_.head_dim,
                                      1.0f / std::sqrt(static_cast<float>(hp_.head_dim))};
  const int64_t t0 = rows.first;
  kernels::PagedQueries queries;
  queries.n_q = rows.n < 0 ? static_cast<int64_t>(batch.size()) : rows.n;
  queries.q = q_.data() + t0 * q_dim;
  queries.q_stride = q_dim;
  queries.n_kv = n_kv_.data() + t0;
  queries.block_tables = attend_tables_.data() + t0;
  queries.out = attn_.data() + t0 * q_dim;
  queries.out_stride = q_dim;
  ops.paged_attention(kv.paged(kv_layer(il)), heads, queries);
}

int64_t Context::gather_outputs(const Batch& batch) {
  const size_t d = sz(hp_.n_embd);
  int64_t n_out = 0;
  for (size_t t = 0; t < batch.size(); ++t) {
    if (!batch.logits[t]) continue;
    std::memcpy(xn_.data() + sz(n_out) * d, x_.data() + t * d, d * sizeof(float));
    ++n_out;
  }
  return n_out;
}

void Context::output_logits(const Batch& batch, kernels::Ops& ops, std::vector<float>* logits,
                            std::vector<float>* hidden) {
  const int64_t n_out = gather_outputs(batch);
  logits->assign(sz(n_out) * sz(hp_.n_vocab), 0.0f);
  if (hidden != nullptr) hidden->assign(sz(n_out) * sz(hp_.n_embd), 0.0f);
  if (n_out == 0) return;
  const std::vector<float>& norm = model_.weights().output_norm;
  if (hidden != nullptr) {  // rms_norm then matmul: equal to the fused path, bit for bit
    ops.rms_norm(xn_.data(), norm.data(), n_out, hp_.n_embd, hp_.rms_eps, hidden->data());
    ops.matmul(model_.weights().output, hidden->data(), n_out, logits->data());
    return;
  }
  float* const out[] = {logits->data()};
  ops.rms_norm_matmul_many({&model_.weights().output, 1}, xn_.data(), norm.data(), hp_.rms_eps,
                           n_out, out);
}

}  // namespace keel::model
