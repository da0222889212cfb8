// DraftHead: validation, one step through Ops, greedy drafting and the top-n candidates.
#include "draft/draft_head.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "core/dtype.h"
#include "core/index_cast.h"
#include "kernels/weight_layout.h"
#include "sampling/logprobs.h"

namespace keel::draft {
namespace {

kernels::Matrix f32_view(const std::vector<float>& v, int64_t rows, int64_t cols) {
  kernels::Matrix m;
  m.dtype = DType::kF32;
  m.rows = rows;
  m.cols = cols;
  m.data = reinterpret_cast<const std::byte*>(v.data());
  m.row_bytes = sz(cols) * sizeof(float);
  return m;
}

// W (rows x cols, F32) as a Q8_0 matrix in the grouped decode layout, its bytes in *storage;
// F32 over `v` itself when cols is not a multiple of the Q8_0 block.
kernels::Matrix run_time_matrix(const std::vector<float>& v, int64_t rows, int64_t cols,
                                std::vector<std::byte>* storage) {
  if (cols % dtype_info(DType::kQ8_0).block_size != 0) return f32_view(v, rows, cols);
  kernels::Matrix m;
  m.dtype = DType::kQ8_0;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = dtype_row_bytes(DType::kQ8_0, cols);
  storage->resize(sz(rows) * m.row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::quantize_row(DType::kQ8_0, v.data() + r * cols, storage->data() + sz(r) * m.row_bytes,
                          cols);
  }
  kernels::group_rows_in_place(DType::kQ8_0, rows, m.row_bytes, storage->data());
  m.layout = kernels::WeightLayout::kGrouped16;
  m.data = storage->data();
  return m;
}

Status check_size(const char* name, const std::vector<float>& v, int64_t want) {
  if (v.size() != sz(want)) {
    return Status::invalid_argument(std::string("draft head ") + name + " has " +
                                    std::to_string(v.size()) + " values, not " +
                                    std::to_string(want));
  }
  for (float x : v) {
    if (!std::isfinite(x)) {
      return Status::invalid_argument(std::string("draft head ") + name +
                                      " holds a non-finite value");
    }
  }
  return Status();
}

}  // namespace

Status DraftHeadWeights::validate() const {
  if (n_embd < 1 || n_embd > (int64_t{1} << 16)) {
    return Status::invalid_argument("draft head n_embd " + std::to_string(n_embd) +
                                    " is outside [1, 65536]");
  }
  if (hidden < 1 || hidden > kMaxDraftHidden) {
    return Status::invalid_argument("draft head hidden " + std::to_string(hidden) +
                                    " is outside [1, " + std::to_string(kMaxDraftHidden) + "]");
  }
  if (!(rms_eps > 0.0f) || !std::isfinite(rms_eps)) {
    return Status::invalid_argument("draft head rms_eps must be positive");
  }
  const int64_t d = n_embd, h = hidden;
  KEEL_TRY(check_size("w_in", w_in, d * 2 * d));
  KEEL_TRY(check_size("b_in", b_in, d));
  KEEL_TRY(check_size("w_up", w_up, h * d));
  KEEL_TRY(check_size("b_up", b_up, h));
  KEEL_TRY(check_size("w_down", w_down, d * h));
  KEEL_TRY(check_size("b_down", b_down, d));
  return check_size("norm", norm, d);
}

size_t DraftHeadWeights::num_params() const {
  return w_in.size() + b_in.size() + w_up.size() + b_up.size() + w_down.size() + b_down.size() +
         norm.size();
}

DraftHead::DraftHead(DraftHeadWeights weights, const model::Model& target)
    : w_(std::move(weights)), target_(&target) {
  KEEL_CHECK(w_.validate().ok());
  KEEL_CHECK(target.hparams().n_embd == w_.n_embd);
  in_ = run_time_matrix(w_.w_in, w_.n_embd, 2 * w_.n_embd, &in_q_);
  up_ = run_time_matrix(w_.w_up, w_.hidden, w_.n_embd, &up_q_);
  down_ = run_time_matrix(w_.w_down, w_.n_embd, w_.hidden, &down_q_);
}

void DraftHead::step(std::span<const float> feature, int32_t token, kernels::Ops& ops,
                     DraftScratch* s) const {
  const int64_t d = w_.n_embd;
  KEEL_CHECK(feature.size() == sz(d));
  KEEL_CHECK(token >= 0 && token < target_->hparams().n_vocab);
  s->x.resize(sz(2 * d));
  std::copy(feature.begin(), feature.end(), s->x.begin());
  kernels::dequantize_matrix_row(target_->weights().token_embd, token, s->x.data() + d);
  s->z.resize(sz(d));
  ops.matmul(in_, s->x.data(), 1, s->z.data());
  ops.add(w_.b_in.data(), d, s->z.data());
  s->up.resize(sz(w_.hidden));
  ops.matmul(up_, s->z.data(), 1, s->up.data());
  ops.add(w_.b_up.data(), w_.hidden, s->up.data());
  for (float& u : s->up) u = u / (1.0f + std::exp(-u));  // silu
  s->h.resize(sz(d));
  ops.matmul(down_, s->up.data(), 1, s->h.data());
  ops.add(w_.b_down.data(), d, s->h.data());
  ops.add(s->z.data(), d, s->h.data());
  s->feature.resize(sz(d));
  ops.rms_norm(s->h.data(), w_.norm.data(), 1, d, w_.rms_eps, s->feature.data());
  s->logits.resize(sz(target_->hparams().n_vocab));
  ops.matmul(target_->weights().output, s->feature.data(), 1, s->logits.data());
}

void DraftHead::draft(std::span<const float> feature, int32_t token, int32_t k, kernels::Ops& ops,
                      DraftScratch* s, std::vector<int32_t>* out) const {
  out->clear();
  std::vector<float> f(feature.begin(), feature.end());
  for (int32_t i = 0; i < k; ++i) {
    step(f, token, ops, s);
    token = static_cast<int32_t>(std::max_element(s->logits.begin(), s->logits.end()) -
                                 s->logits.begin());  // ties → the lowest id
    out->push_back(token);
    f.swap(s->feature);
  }
}

void DraftHead::draft_with_candidates(std::span<const float> feature, int32_t token, int32_t k,
                                      int32_t n, kernels::Ops& ops, DraftScratch* s,
                                      std::vector<int32_t>* out,
                                      std::vector<int32_t>* candidates) const {
  KEEL_CHECK(n >= 1);
  out->clear();
  candidates->clear();
  std::vector<float> f(feature.begin(), feature.end());
  std::vector<int32_t> ids;
  for (int32_t i = 0; i <= k; ++i) {
    step(f, token, ops, s);
    top_n_ids(s->logits, n, &ids);
    for (int32_t j = 0; j < n; ++j) candidates->push_back(ids[std::min(sz(j), ids.size() - 1)]);
    if (i == k) break;
    token = ids.front();  // the argmax, ties → the lowest id, as draft()
    out->push_back(token);
    f.swap(s->feature);
  }
}

std::vector<DraftCandidate> DraftHead::top_candidates(std::span<const float> feature, int32_t token,
                                                      int32_t n, kernels::Ops& ops,
                                                      DraftScratch* scratch) const {
  step(feature, token, ops, scratch);
  return top_n_softmax(scratch->logits, n);
}

void DraftHead::candidate_ids(std::span<const float> feature, int32_t token, int32_t n,
                              kernels::Ops& ops, DraftScratch* scratch,
                              std::vector<int32_t>* out) const {
  step(feature, token, ops, scratch);
  top_n_ids(scratch->logits, n, out);
}

void top_n_ids(std::span<const float> logits, int32_t n, std::vector<int32_t>* out) {
  out->clear();
  for (const sampling::Candidate& c : sampling::top_candidates(logits, sz(std::max(n, 0)))) {
    out->push_back(c.token_id);
  }
}

std::vector<DraftCandidate> top_n_softmax(std::span<const float> logits, int32_t n) {
  std::vector<int32_t> ids;
  top_n_ids(logits, n, &ids);
  if (ids.empty()) return {};
  const float top = logits[sz(ids.front())];
  double total = 0;
  for (float x : logits) total += std::exp(static_cast<double>(x - top));
  std::vector<DraftCandidate> out;
  for (int32_t id : ids) {
    const float p = static_cast<float>(std::exp(static_cast<double>(logits[sz(id)] - top)) / total);
    out.push_back({id, p});
  }
  return out;
}

}  // namespace keel::draft
