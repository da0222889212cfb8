// parse_expert_counts: the per-expert token counts of a Prometheus text scrape — the
// keel:moe_expert_tokens_total{layer,expert} series of `keel serve`'s or a gateway's /metrics —
// as the [n_layer][n_expert] grid plan_replicas (ep/replica_plan.h) reads. So a user can save a
// scrape of a representative run (`curl -s HOST/metrics > counts.prom`) and start the next
// expert-parallel instance with its hot experts replicated (`keel serve --ep-counts counts.prom`).
//
// Lines of other metrics, comments and blank lines are skipped; series of several model names
// are summed. The grid's size is the largest layer and expert seen, plus one.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::ep {

struct ExpertCountsGrid {
  int64_t n_layer = 0;
  int64_t n_expert = 0;
  std::vector<int64_t> counts;  // [n_layer][n_expert]
};

// Corrupt (naming the line) for a series without a layer or expert label, a label or value that
// is not a non-negative integer, or an index past 65,535; InvalidArgument when no series is found.
Result<ExpertCountsGrid> parse_expert_counts(std::string_view text);

// Reads and parses a file; its errors name the path.
Result<ExpertCountsGrid> read_expert_counts(const std::string& path);

}  // namespace keel::ep
