// SparsePolicy: which KV pages a decode step attends to and which pages a sequence may give back
// to the pool (issue 6, RaaS and its baselines). One policy object per sequence; decisions are per
// sequence and step, shared by every layer and KV head (a page holds every layer's rows, so only a
// per-sequence choice can release memory; the first `dense_layers` layers attend densely, which
// the caller applies). Page summaries (page_summary.h) are the policy's whole view.
//
//   dense         every page; never releases.
//   streaming     StreamingLLM: the pages of the first sink_tokens positions and of the last
//                 window_tokens; every other page is released.
//   h2o           H2O: the recent window plus the heavy hitters by accumulated attention mass, up
//                 to budget tokens; the rest is released.
//   quest         Quest: the top budget/page_size pages by the upper-bound score from q and each
//                 page's min/max keys, plus the newest page; keeps every page (O(N) memory).
//   raas          RaaS: every prefill page attended and kept; decode pages scored Quest-style and
//                 the top max(3, budget/page_size) attended, plus the newest; a page whose
//                 softmaxed score exceeds alpha gets its timestamp refreshed (observe); while
//                 decode pages exceed budget/page_size the oldest-stamped one (never the newest) is
//                 released — KV memory stays O(L).
//
// Thread safety: a policy is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sparse/page_summary.h"

namespace keel::sparse {

struct SparseConfig {
  int32_t page_size = 16;   // positions per page (the KV block size)
  int32_t budget = 1024;    // L: tokens attended per step (quest, raas, h2o)
  float alpha = 0.05f;      // raas: softmaxed page score that refreshes its timestamp
  int32_t sink_tokens = 4;  // streaming
  // streaming, h2o: the recent window; 0 = from the budget, in whole pages (streaming: the
  // budget's pages less the sink pages, as StreamingLLM spends the rest of its cache on the
  // window; h2o: half the budget's pages, H2O's split between recent and heavy hitters).
  int32_t window_tokens = 0;
  int32_t dense_layers = 2;  // the first layers attend every page (applied by the caller)
  [[nodiscard]] Status validate() const;
  [[nodiscard]] int32_t budget_pages() const { return budget / page_size; }
  [[nodiscard]] int32_t sink_pages() const { return (sink_tokens + page_size - 1) / page_size; }
  // The window of `policy` ("streaming" or "h2o") in pages, window_tokens == 0 resolved.
  [[nodiscard]] int32_t window_pages(std::string_view policy) const;
};

struct DecodeQuery {
  std::span<const float> q;  // [n_heads][head_dim], after RoPE
  QueryShape shape;
  int64_t step = 0;  // decode step (increasing)
};

struct PageChoice {
  std::vector<int32_t> attend;   // page indices, ascending
  std::vector<int32_t> release;  // page indices to free, ascending; never also attended
};

class SparsePolicy {
 public:
  virtual ~SparsePolicy() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // The choice for one decode step over the pages the sequence holds (ascending index; the last
  // is the newest, being written).
  virtual PageChoice select(std::span<const PageSummary> pages, const DecodeQuery& query) = 0;
  // After attention: each attended page's (ascending, as select() returned them; pages no longer
  // held are skipped) softmax probability mass for this step (summed over
  // its positions, averaged over heads). Default: accumulate mass (H2O's statistic); raas also
  // refreshes timestamps above alpha.
  virtual void observe(std::span<PageSummary> pages, std::span<const int32_t> attended,
                       std::span<const float> probability, int64_t step);
  // Whether observe() uses the probabilities (h2o, raas): callers may skip computing them.
  [[nodiscard]] virtual bool wants_attention_mass() const { return false; }
};

// "dense", "streaming", "h2o", "quest" or "raas"; InvalidArgument otherwise or for a bad config.
Result<std::unique_ptr<SparsePolicy>> make_policy(std::string_view name, const SparseConfig& c);

}  // namespace keel::sparse
