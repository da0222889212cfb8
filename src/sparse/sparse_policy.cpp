// The sparse-decode policies (see sparse_policy.h).
#include "sparse/sparse_policy.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

namespace keel::sparse {
namespace {

std::vector<int32_t> all_pages(std::span<const PageSummary> pages) {
  std::vector<int32_t> out;
  for (const PageSummary& p : pages) out.push_back(p.index);
  return out;
}

// Splits the held pages into attended and released by a keep predicate.
PageChoice keep_if(std::span<const PageSummary> pages, const auto& keep) {
  PageChoice c;
  for (const PageSummary& p : pages) (keep(p) ? c.attend : c.release).push_back(p.index);
  return c;
}

// The `k` pages of `candidates` with the largest score (ties: the newer page), ascending. Each
// score is computed once (a Quest bound costs n_heads * head_dim multiply-adds).
std::vector<int32_t> top_pages(const std::vector<const PageSummary*>& candidates, size_t k,
                               const auto& score) {
  std::vector<std::pair<float, int32_t>> scored;  // (score, page index)
  scored.reserve(candidates.size());
  for (const PageSummary* p : candidates) scored.emplace_back(score(*p), p->index);
  k = std::min(k, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<ptrdiff_t>(k), scored.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second > b.second;
                    });
  std::vector<int32_t> out;
  for (size_t i = 0; i < k; ++i) out.push_back(scored[i].second);
  std::sort(out.begin(), out.end());
  return out;
}

// Calls fn(page, probability) for each attended page held in `pages` (both ascending by index).
void for_each_attended(std::span<PageSummary> pages, std::span<const int32_t> attended,
                       std::span<const float> probability, const auto& fn) {
  size_t j = 0;
  for (size_t i = 0; i < attended.size(); ++i) {
    while (j < pages.size() && pages[j].index < attended[i]) ++j;
    if (j < pages.size() && pages[j].index == attended[i]) fn(pages[j], probability[i]);
  }
}

class Dense final : public SparsePolicy {
 public:
  std::string_view name() const override { return "dense"; }
  PageChoice select(std::span<const PageSummary> pages, const DecodeQuery&) override {
    return {all_pages(pages), {}};
  }
};

class Streaming final : public SparsePolicy {
 public:
  explicit Streaming(const SparseConfig& c) : c_(c) {}
  std::string_view name() const override { return "streaming"; }
  PageChoice select(std::span<const PageSummary> pages, const DecodeQuery&) override {
    if (pages.empty()) return {};
    const int32_t newest = pages.back().index;
    const int32_t sink_pages = c_.sink_pages();
    const int32_t window_pages = c_.window_pages(name());
    return keep_if(pages, [&](const PageSummary& p) {
      return p.index < sink_pages || p.index > newest - window_pages;
    });
  }

 private:
  SparseConfig c_;
};

class HeavyHitters final : public SparsePolicy {
 public:
  explicit HeavyHitters(const SparseConfig& c) : c_(c) {}
  std::string_view name() const override { return "h2o"; }
  bool wants_attention_mass() const override { return true; }
  PageChoice select(std::span<const PageSummary> pages, const DecodeQuery&) override {
    if (pages.empty()) return {};
    const int32_t newest = pages.back().index;
    const int32_t window_pages = c_.window_pages(name());
    std::vector<const PageSummary*> older;
    for (const PageSummary& p : pages) {
      if (p.index <= newest - window_pages) older.push_back(&p);
    }
    const size_t heavy = static_cast<size_t>(std::max(0, c_.budget_pages() - window_pages));
    const std::vector<int32_t> keep =
        top_pages(older, heavy, [](const PageSummary& p) { return static_cast<float>(p.mass); });
    return keep_if(pages, [&](const PageSummary& p) {
      return p.index > newest - window_pages ||
             std::binary_search(keep.begin(), keep.end(), p.index);
    });
  }

 private:
  SparseConfig c_;
};

class Quest final : public SparsePolicy {
 public:
  explicit Quest(const SparseConfig& c) : c_(c) {}
  std::string_view name() const override { return "quest"; }
  PageChoice select(std::span<const PageSummary> pages, const DecodeQuery& query) override {
    if (pages.empty()) return {};
    std::vector<const PageSummary*> older;
    for (const PageSummary& p : pages.first(pages.size() - 1)) older.push_back(&p);
    const size_t k = static_cast<size_t>(std::max(0, c_.budget_pages() - 1));
    std::vector<int32_t> attend = top_pages(
        older, k, [&](const PageSummary& p) { return quest_upper_bound(p, query.q, query.shape); });
    attend.push_back(pages.back().index);  // the newest page, always
    return {std::move(attend), {}};
  }

 private:
  SparseConfig c_;
};

class Raas final : public SparsePolicy {
 public:
  explicit Raas(const SparseConfig& c) : c_(c) {}
  std::string_view name() const override { return "raas"; }
  bool wants_attention_mass() const override { return true; }
  PageChoice select(std::span<const PageSummary> pages, const DecodeQuery& query) override {
    if (pages.empty()) return {};
    const PageSummary& newest = pages.back();
    std::vector<const PageSummary*> decode;  // decode pages but the newest
    for (const PageSummary& p : pages.first(pages.size() - 1)) {
      if (!p.prefill) decode.push_back(&p);
    }
    PageChoice c;
    // Over the budget: release the oldest timestamps (ties: the older page) — O(L) memory.
    const size_t cap = static_cast<size_t>(std::max(1, c_.budget_pages()));
    const size_t held = decode.size() + (newest.prefill ? 0 : 1);
    if (held > cap) {
      std::vector<const PageSummary*> by_age = decode;
      std::stable_sort(
          by_age.begin(), by_age.end(), [](const PageSummary* a, const PageSummary* b) {
            return a->last_attended != b->last_attended ? a->last_attended < b->last_attended
                                                        : a->index < b->index;
          });
      for (size_t i = 0; i < held - cap && i < by_age.size(); ++i)
        c.release.push_back(by_age[i]->index);
      std::sort(c.release.begin(), c.release.end());
      std::erase_if(decode, [&](const PageSummary* p) {
        return std::binary_search(c.release.begin(), c.release.end(), p->index);
      });
    }
    const size_t k = static_cast<size_t>(std::max(3, c_.budget_pages()));
    const std::vector<int32_t> top = top_pages(decode, k, [&](const PageSummary& p) {
      return quest_upper_bound(p, query.q, query.shape);
    });
    for (const PageSummary& p : pages) {
      if (p.prefill || std::binary_search(top.begin(), top.end(), p.index) || &p == &newest) {
        c.attend.push_back(p.index);
      }
    }
    return c;
  }
  void observe(std::span<PageSummary> pages, std::span<const int32_t> attended,
               std::span<const float> probability, int64_t step) override {
    for_each_attended(pages, attended, probability, [&](PageSummary& p, float prob) {
      p.mass += prob;
      if (prob > c_.alpha) p.last_attended = step;
    });
  }

 private:
  SparseConfig c_;
};

}  // namespace

Status SparseConfig::validate() const {
  if (page_size < 1 || budget < page_size || sink_tokens < 0 || window_tokens < 0 ||
      dense_layers < 0 || !(alpha >= 0.0f && alpha <= 1.0f)) {
    return Status::invalid_argument(
        "sparse config: page_size >= 1, budget >= page_size, sink/window/dense_layers >= 0 and "
        "alpha in [0, 1] are required");
  }
  return Status::ok_status();
}

int32_t SparseConfig::window_pages(std::string_view policy) const {
  if (window_tokens > 0) return (window_tokens + page_size - 1) / page_size;
  return std::max(1, policy == "streaming" ? budget_pages() - sink_pages() : budget_pages() / 2);
}

void SparsePolicy::observe(std::span<PageSummary> pages, std::span<const int32_t> attended,
                           std::span<const float> probability, int64_t /*step*/) {
  for_each_attended(pages, attended, probability,
                    [](PageSummary& p, float prob) { p.mass += prob; });
}

Result<std::unique_ptr<SparsePolicy>> make_policy(std::string_view name, const SparseConfig& c) {
  KEEL_TRY(c.validate());
  if (name == "dense") return std::unique_ptr<SparsePolicy>(new Dense());
  if (name == "streaming") return std::unique_ptr<SparsePolicy>(new Streaming(c));
  if (name == "h2o") return std::unique_ptr<SparsePolicy>(new HeavyHitters(c));
  if (name == "quest") return std::unique_ptr<SparsePolicy>(new Quest(c));
  if (name == "raas") return std::unique_ptr<SparsePolicy>(new Raas(c));
  return Status::invalid_argument("unknown sparse policy '" + std::string(name.substr(0, 64)) +
                                  "' (expected dense, streaming, h2o, quest or raas)");
}

}  // namespace keel::sparse
