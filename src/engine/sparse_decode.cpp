// SparseSequence and SparseSelector (see sparse_decode.h).
#include "engine/sparse_decode.h"
#include "core/index_cast.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace keel::engine {
namespace {

bool contains(const std::vector<int32_t>& sorted, int32_t v) {
  return std::binary_search(sorted.begin(), sorted.end(), v);
}

// The K row of position `pos` at `layer`, dequantized into `out` ([kv_dim]).
void read_k_row(const model::KvStorage& kv, const model::BatchSeq& s, int32_t pos, int64_t layer,
                std::vector<float>* out) {
  const int32_t bs = kv.layout().block_size;
  out->resize(sz(kv.layout().kv_dim));
  kv.read_row(kv.k_row(s.block_table[sz(pos / bs)], layer, pos % bs), out->data());
}

}  // namespace

std::vector<int32_t> SparseSequence::held_pages(int32_t pos, int32_t page_size) const {
  std::vector<int32_t> out;
  for (int32_t p = 0; p <= pos / page_size; ++p) {
    if (!contains(released, p)) out.push_back(p);
  }
  return out;
}

void SparseSequence::prepare_decode(model::BatchSeq* seq, int32_t pos, int32_t page_size) const {
  seq->select_pages = true;
  if (released.empty()) return;  // nothing released: every page
  seq->attend_pages = held_pages(pos, page_size);
  for (int32_t page : released) {
    if (sz(page) < seq->block_table.size()) seq->block_table[sz(page)] = model::kReleasedBlock;
  }
}

void SparseSequence::reset(int32_t new_epoch) {
  epoch = new_epoch;
  folded = 0;
  pages.clear();
  released.clear();
  pending.clear();
  attended.clear();
}

Result<std::unique_ptr<SparseSequence>> make_sparse_sequence(const SparseParams& params,
                                                             sparse::SparseConfig tuning,
                                                             int32_t page_size,
                                                             int32_t num_prompt_tokens) {
  tuning.page_size = page_size;
  tuning.budget = params.budget;
  if (params.budget < page_size) {
    return Status::invalid_argument("sparse budget " + std::to_string(params.budget) +
                                    " is below one KV page (" + std::to_string(page_size) +
                                    " tokens)");
  }
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<sparse::SparsePolicy> policy,
                        sparse::make_policy(params.policy, tuning));
  if (params.policy == "dense") return std::unique_ptr<SparseSequence>();
  auto st = std::make_unique<SparseSequence>();
  st->policy = std::move(policy);
  st->num_prompt_tokens = num_prompt_tokens;
  return st;
}

int64_t sparse_select_layer(const sparse::SparseConfig& tuning, int64_t n_layer) {
  return std::clamp<int64_t>(tuning.dense_layers, 0, n_layer - 1);
}

SparseSelector::SparseSelector(const model::HParams& hp)
    : shape_{static_cast<int32_t>(hp.n_head), static_cast<int32_t>(hp.n_head_kv),
             static_cast<int32_t>(hp.head_dim)} {}

bool SparseSelector::bind(std::vector<Binding> bindings) {
  bindings_ = std::move(bindings);
  return std::any_of(bindings_.begin(), bindings_.end(),
                     [](const Binding& b) { return b.seq != nullptr; });
}

std::vector<int32_t> SparseSelector::select(int32_t seq, const model::BatchSeq& s,
                                            std::span<const int32_t> positions,
                                            std::span<const float> q, const model::KvStorage& kv,
                                            int64_t layer) {
  const Binding& b = bindings_[sz(seq)];
  if (b.seq == nullptr) return {};
  SparseSequence& st = *b.seq;
  if (st.epoch != b.epoch) st.reset(b.epoch);
  const int32_t pos = positions.back();
  if (positions.size() != 1 || pos < st.num_prompt_tokens) return {};  // decode tokens only
  const int32_t page_size = kv.layout().block_size;
  const int32_t own = pos / page_size;
  fold(st, s, pos, kv, layer);
  ++st.step;
  const sparse::DecodeQuery query{q, shape_, st.step};
  sparse::PageChoice c = st.policy->select(st.pages, query);
  // The token's own page is always attended and never released.
  std::erase(c.release, own);
  if (c.attend.empty() || c.attend.back() != own) c.attend.push_back(own);
  for (int32_t r : c.release) {
    std::erase_if(st.pages, [r](const sparse::PageSummary& p) { return p.index == r; });
    st.released.insert(std::upper_bound(st.released.begin(), st.released.end(), r), r);
    st.pending.push_back(r);
    ++st.pages_released_total;
  }
  if (st.policy->wants_attention_mass()) {
    const std::vector<float> mass = attention_mass(s, c.attend, pos, q, kv, layer);
    st.policy->observe(st.pages, c.attend, mass, st.step);
  }
  st.attended = c.attend;
  return std::move(c.attend);
}

void SparseSelector::fold(SparseSequence& st, const model::BatchSeq& s, int32_t last,
                          const model::KvStorage& kv, int64_t layer) {
  const int32_t page_size = kv.layout().block_size;
  for (int32_t p = st.folded; p <= last; ++p) {
    const int32_t page = p / page_size;
    if (contains(st.released, page)) continue;
    if (st.pages.empty() || st.pages.back().index != page) {
      sparse::PageSummary fresh;
      fresh.index = page;
      fresh.last_attended = st.step;  // born now: RaaS ages it from here
      st.pages.push_back(std::move(fresh));
    }
    sparse::PageSummary& summary = st.pages.back();
    summary.prefill = summary.prefill || p < st.num_prompt_tokens;
    read_k_row(kv, s, p, layer, &row_);
    summary.add_key(row_);
  }
  st.folded = std::max(st.folded, last + 1);
}

std::vector<float> SparseSelector::attention_mass(const model::BatchSeq& s,
                                                  std::span<const int32_t> pages, int32_t pos,
                                                  std::span<const float> q,
                                                  const model::KvStorage& kv, int64_t layer) {
  const int32_t page_size = kv.layout().block_size;
  const auto heads = sz(shape_.n_heads);
  const auto group = sz(shape_.n_heads / shape_.n_kv_heads);
  const auto dim = sz(shape_.head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape_.head_dim));
  // scores_[i * heads + h]: head h's scaled q·k at the i-th attended position (page order).
  scores_.clear();
  page_of_.clear();
  for (size_t j = 0; j < pages.size(); ++j) {
    const int32_t first = pages[j] * page_size;
    const int32_t end = std::min(first + page_size, pos + 1);
    for (int32_t p = first; p < end; ++p) {
      read_k_row(kv, s, p, layer, &row_);
      for (size_t h = 0; h < heads; ++h) {
        const float* qh = q.data() + h * dim;
        const float* kh = row_.data() + (h / group) * dim;
        float dot = 0.0f;
        for (size_t c = 0; c < dim; ++c) dot += qh[c] * kh[c];
        scores_.push_back(dot * scale);
      }
      page_of_.push_back(j);
    }
  }
  // Per head: softmax over the positions, each probability added to its page's share.
  std::vector<float> mass(pages.size(), 0.0f);
  const size_t n = page_of_.size();
  for (size_t h = 0; h < heads; ++h) {
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < n; ++i) mx = std::max(mx, scores_[i * heads + h]);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) {
      float& e = scores_[i * heads + h];
      e = static_cast<float>(std::exp(static_cast<double>(e - mx)));
      total += e;
    }
    for (size_t i = 0; i < n; ++i) {
      mass[page_of_[i]] += static_cast<float>(scores_[i * heads + h] / total / shape_.n_heads);
    }
  }
  return mass;
}

SparseSelector::Binding bind_sparse_step(SparseSequence& st, int32_t epoch, int32_t decode_pos,
                                         int32_t page_size, model::BatchSeq* seq) {
  if (decode_pos >= st.num_prompt_tokens) {
    if (st.epoch == epoch) {
      st.prepare_decode(seq, decode_pos, page_size);
    } else {
      seq->select_pages = true;  // preempted since: the selector starts the summaries over
    }
  }
  return {&st, epoch};
}

std::vector<int32_t> take_released_pages(SparseSequence& st, bool valid, int32_t held_blocks) {
  st.max_pages_held = std::max(st.max_pages_held, held_blocks);
  std::vector<int32_t> pages = std::exchange(st.pending, {});
  if (!valid) pages.clear();
  return pages;
}

}  // namespace keel::engine
