// PageSummary: what a sparse-decode policy knows of one KV page (block) of one sequence — Quest's
// channel-wise min and max of K, RaaS's last-attended step, H2O's accumulated attention mass —
// kept up to date as the page fills (add_key) and as decode attends to it (the policy's
// observe()). K rows are [n_kv_heads][head_dim] floats after RoPE, of the layer the summaries
// are kept for.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace keel::sparse {

struct PageSummary {
  int32_t index = 0;          // page number within the sequence (position / page size)
  int32_t num_tokens = 0;     // positions written so far
  bool prefill = false;       // holds prompt positions (RaaS never releases these)
  int64_t last_attended = 0;  // RaaS timestamp: step of the last significant attention (or birth)
  double mass = 0.0;          // H2O: attention probability accumulated over decode steps
  std::vector<float> k_min;   // [kv_dim] channel-wise minimum of the page's K rows
  std::vector<float> k_max;   // [kv_dim] channel-wise maximum

  // Folds one position's K row ([kv_dim]) into the min/max and counts it.
  void add_key(std::span<const float> k);
};

// The head layout of a decode query.
struct QueryShape {
  int32_t n_heads = 0;     // query heads
  int32_t n_kv_heads = 0;  // KV heads (n_heads is a multiple)
  int32_t head_dim = 0;
};

// Quest's upper bound of q·k over a page: per query head, Σ_c max(q_c·min_c, q_c·max_c) over its
// KV head's channels; the largest over the heads. q is [n_heads][head_dim]. An empty page → -inf.
float quest_upper_bound(const PageSummary& page, std::span<const float> q, const QueryShape& shape);

}  // namespace keel::sparse
