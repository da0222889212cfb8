// ExpertTokenCounts: how many tokens the router sent to each expert of each MoE layer since the
// engine started — /metrics' keel:moe_expert_tokens_total{layer,expert}, `keel bench`'s routing
// summary, and what an expert-placement policy (EPLB-style replication of hot experts) reads. A
// token counts once per expert it chose (top-k: k counts per token and layer), in every forward
// pass that computes it: prompt chunks, decode steps, recomputed blocks.
//
// ExpertLoad summarises a snapshot for people: how evenly the router spreads tokens (an expert
// that gets max/mean = 3 of its layer's mean load is what EPLB replicates).
//
// Thread safety: add() from the threads running forward passes (an engine's step thread, both
// semi-PD workers at once), snapshot() from any thread; relaxed atomic counters, so a snapshot
// taken during a step may hold part of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace keel::model {

class ExpertTokenCounts {
 public:
  // n_layer, n_expert ≥ 1.
  ExpertTokenCounts(int64_t n_layer, int64_t n_expert);

  [[nodiscard]] int64_t n_layer() const { return n_layer_; }
  [[nodiscard]] int64_t n_expert() const { return n_expert_; }
  // Counts each entry of `experts` (expert indices in [0, n_expert); others are ignored) for
  // layer `layer` (in [0, n_layer); another is ignored).
  void add(int64_t layer, std::span<const int32_t> experts);
  // [n_layer][n_expert] counts, layer-major.
  [[nodiscard]] std::vector<int64_t> snapshot() const;

 private:
  int64_t n_layer_;
  int64_t n_expert_;
  std::unique_ptr<std::atomic<int64_t>[]> counts_;
};

struct ExpertLoad {
  int64_t routed = 0;               // (token, expert) assignments over every layer
  double mean_max_over_mean = 0.0;  // per layer with tokens: busiest expert / mean; their mean
  double worst_max_over_mean = 0.0;
  int64_t worst_layer = -1;  // the layer of worst_max_over_mean; -1 when nothing was routed
  int64_t idle_experts = 0;  // (layer, expert) pairs of layers with tokens that got none
};

// `tokens`: [n_layer][n_expert] as snapshot() gives them (a shorter span is read as far as it
// goes).
[[nodiscard]] ExpertLoad summarize_expert_load(std::span<const int64_t> tokens, int64_t n_layer,
                                               int64_t n_expert);

}  // namespace keel::model
