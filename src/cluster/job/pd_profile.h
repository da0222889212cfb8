// PD profiling, the pure part of `keel cluster profile-pd`: the grid of (prefill length,
// decode/prefill ratio) cells to measure, and the heatmap built from the job completion times
// measured on a colocated fleet and on a prefill/decode (disaggregated) fleet of equal cores.
// The process part (starting fleets, sending requests) lives in control/profile/pd_profile_run.h.
//
//   PdProfileGrid ──plan_pd_profile──▶ cells (row-major: prefill bin × ratio bin)
//   cells + PdCellSamples ──build_pd_profile──▶ PdHeatmap (value = mean JCT colocated /
//                                                mean JCT disaggregated − 1) ──pd_profile_json──▶
//                                                file
// Invariants: a cell's decode length is round(ratio × prefill), at least 1 (a job decodes at least
// the token its prefill samples); prompt + decode fits the model's context.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/job/pd_heatmap.h"
#include "core/result.h"

namespace keel::cluster {

struct PdProfileGrid {
  std::vector<int64_t> prefill_lengths;  // prompt tokens per bin, strictly increasing, > 0
  std::vector<double> ratios;            // decode/prefill per bin, strictly increasing, >= 0
};

// One measurement point.
struct PdProfileCell {
  size_t row = 0;              // index into prefill_lengths
  size_t col = 0;              // index into ratios
  int64_t prefill_tokens = 0;  // prompt length sent
  int64_t decode_tokens = 0;   // forced output length (max_tokens with ignore_eos)
};

// The cells of `grid`, row-major. InvalidArgument naming the first broken rule: an empty axis,
// an axis not strictly increasing, a length <= 0, a negative or non-finite ratio, more than
// PdHeatmap::kMaxBins bins, or a cell whose prompt + decode exceeds max_context (> 0) tokens.
Result<std::vector<PdProfileCell>> plan_pd_profile(const PdProfileGrid& grid, int64_t max_context);

// Job completion times (seconds) measured for one cell on each fleet.
struct PdCellSamples {
  std::vector<double> colocated_jct_s;
  std::vector<double> disaggregated_jct_s;
};

// Mean of positive, finite samples; InvalidArgument (naming `what`) when empty or when a sample
// is not a positive finite number.
Result<double> mean_jct(const std::vector<double>& samples_s, const std::string& what);

// The heatmap over grid's bins: value(row, col) = mean colocated JCT / mean disaggregated JCT − 1.
// `samples` holds one entry per cell of plan_pd_profile(grid), in its order.
Result<PdHeatmap> build_pd_profile(const PdProfileGrid& grid,
                                   const std::vector<PdCellSamples>& samples);

// Where a heatmap came from; written next to the heatmap's keys (which the parser ignores).
struct PdProfileProvenance {
  std::string model;                // the GGUF path
  std::string date;                 // UTC, ISO 8601
  int64_t threads_per_te = 0;       // compute threads of each TE
  int64_t requests_per_cell = 0;    // samples per cell and fleet
  int64_t concurrency = 0;          // requests in flight during a cell
  std::string colocated_fleet;      // e.g. "--colocated 2"
  std::string disaggregated_fleet;  // e.g. "--prefill 1 --decode 1"
};

// The heatmap's JSON (pd_heatmap.h's format) plus "model", "date", "threads_per_te",
// "requests_per_cell", "concurrency", the fleets, and the mean JCTs per cell in ms
// ("jct_colocated_ms", "jct_disaggregated_ms", laid out like "values"). One line, '\n'-ended.
std::string pd_profile_json(const PdHeatmap& heatmap, const std::vector<PdCellSamples>& samples,
                            const PdProfileProvenance& provenance);

}  // namespace keel::cluster
