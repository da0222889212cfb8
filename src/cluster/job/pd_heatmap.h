// PdHeatmap: DeepServe's PD-aware table — for a request of prefill length P and decode length D,
// JCT(colocated) / JCT(disaggregated) − 1, measured offline over (P bins) × (D/P ratio bins).
// Positive: disaggregation finishes the job sooner. The router reads it (router.h); a benchmark
// writes it.
//
// File format (JSON, UTF-8):
//   {"prefill_bins": [p0, p1, ...],      // prefill lengths in tokens, strictly increasing, > 0
//    "ratio_bins":   [r0, r1, ...],      // decode/prefill ratios, strictly increasing, >= 0
//    "values":       [[v00, v01, ...],   // one row per prefill bin, one column per ratio bin
//                     ...]}
// Bins are the points where the values were measured (not interval edges). Every number must be
// finite; at least one bin each; at most kMaxBins per axis. Other keys are ignored.
//
// lookup(): bilinear interpolation between the measured points, with P and D/P clamped to the
// bins' range (so outside the range the nearest edge's values hold).
// Invariants: a PdHeatmap always satisfies the format's rules (built only by create/parse/load).
// Thread safety: immutable after construction; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_system.h"
#include "core/result.h"

namespace keel::cluster {

class PdHeatmap {
 public:
  static constexpr size_t kMaxBins = 4096;              // per axis
  static constexpr uint64_t kMaxFileBytes = 16u << 20;  // larger files are rejected unparsed

  // Validates and builds; InvalidArgument naming the first broken rule.
  static Result<PdHeatmap> create(std::vector<double> prefill_bins, std::vector<double> ratio_bins,
                                  std::vector<std::vector<double>> values);
  // Parses the JSON format above; InvalidArgument for malformed text or a broken rule.
  static Result<PdHeatmap> parse(std::string_view json_text);
  // Reads and parses `path` (NotFound / IoError from the file system; errors name the path).
  static Result<PdHeatmap> load(FileSystem& fs, const std::string& path);

  // The JSON format above (numbers round-trip exactly).
  [[nodiscard]] std::string to_json() const;
  // Writes to_json() to `path` through a temporary file renamed into place.
  Status save(FileSystem& fs, const std::string& path) const;

  // The table's value for a request (see the header comment): ratio = decode / max(prefill, 1).
  [[nodiscard]] double lookup(int64_t prefill_tokens, int64_t predicted_decode_tokens) const;

  [[nodiscard]] const std::vector<double>& prefill_bins() const { return prefill_bins_; }
  [[nodiscard]] const std::vector<double>& ratio_bins() const { return ratio_bins_; }
  [[nodiscard]] const std::vector<std::vector<double>>& values() const { return values_; }

 private:
  PdHeatmap() = default;

  std::vector<double> prefill_bins_;
  std::vector<double> ratio_bins_;
  std::vector<std::vector<double>> values_;  // [prefill bin][ratio bin]
};

}  // namespace keel::cluster
