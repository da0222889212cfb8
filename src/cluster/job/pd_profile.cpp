// PD profiling's pure part: grid → cells, JCT samples → heatmap (pd_profile.h).
#include "cluster/job/pd_profile.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace keel::cluster {
namespace {

using Json = nlohmann::json;

std::string num(double x) { return fmt::format("{:g}", x); }

Status check_axis_size(size_t size, const std::string& name) {
  if (size == 0) return Status::invalid_argument(name + " is empty");
  if (size > PdHeatmap::kMaxBins) {
    return Status::invalid_argument(name + " has " + std::to_string(size) + " bins (at most " +
                                    std::to_string(PdHeatmap::kMaxBins) + ")");
  }
  return Status();
}

Status check_prefill_lengths(const std::vector<int64_t>& lengths) {
  KEEL_TRY(check_axis_size(lengths.size(), "prefill lengths"));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0) {
      return Status::invalid_argument("prefill length " + std::to_string(lengths[i]) +
                                      " must be > 0");
    }
    if (i > 0 && lengths[i] <= lengths[i - 1]) {
      return Status::invalid_argument(
          "prefill lengths must be strictly increasing: " + std::to_string(lengths[i]) + " after " +
          std::to_string(lengths[i - 1]));
    }
  }
  return Status();
}

Status check_ratios(const std::vector<double>& ratios) {
  KEEL_TRY(check_axis_size(ratios.size(), "ratios"));
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (!std::isfinite(ratios[i]) || ratios[i] < 0.0) {
      return Status::invalid_argument("ratio " + num(ratios[i]) + " must be a finite number >= 0");
    }
    if (i > 0 && ratios[i] <= ratios[i - 1]) {
      return Status::invalid_argument("ratios must be strictly increasing: " + num(ratios[i]) +
                                      " after " + num(ratios[i - 1]));
    }
  }
  return Status();
}

// A matrix laid out like the heatmap's values, from one figure per cell.
Json per_cell(const PdHeatmap& heatmap, const std::vector<double>& cells) {
  Json rows = Json::array();
  const size_t cols = heatmap.ratio_bins().size();
  for (size_t r = 0; r < heatmap.prefill_bins().size(); ++r) {
    Json row = Json::array();
    for (size_t c = 0; c < cols; ++c) row.push_back(cells[r * cols + c]);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

Result<std::vector<PdProfileCell>> plan_pd_profile(const PdProfileGrid& grid, int64_t max_context) {
  KEEL_TRY(check_prefill_lengths(grid.prefill_lengths));
  KEEL_TRY(check_ratios(grid.ratios));
  std::vector<PdProfileCell> cells;
  cells.reserve(grid.prefill_lengths.size() * grid.ratios.size());
  for (size_t r = 0; r < grid.prefill_lengths.size(); ++r) {
    for (size_t c = 0; c < grid.ratios.size(); ++c) {
      PdProfileCell cell;
      cell.row = r;
      cell.col = c;
      cell.prefill_tokens = grid.prefill_lengths[r];
      const double decode = std::round(grid.ratios[c] * static_cast<double>(cell.prefill_tokens));
      if (decode > 1e12) return Status::invalid_argument("ratio too large for the prefill length");
      cell.decode_tokens = std::max<int64_t>(1, static_cast<int64_t>(decode));
      if (max_context > 0 && cell.prefill_tokens + cell.decode_tokens > max_context) {
        return Status::invalid_argument("cell (prefill " + std::to_string(cell.prefill_tokens) +
                                        ", ratio " + num(grid.ratios[c]) + ") needs " +
                                        std::to_string(cell.prefill_tokens + cell.decode_tokens) +
                                        " tokens of context; the model has " +
                                        std::to_string(max_context));
      }
      cells.push_back(cell);
    }
  }
  return cells;
}

Result<double> mean_jct(const std::vector<double>& samples_s, const std::string& what) {
  if (samples_s.empty()) return Status::invalid_argument(what + ": no JCT samples");
  double sum = 0.0;
  for (double s : samples_s) {
    if (!std::isfinite(s) || s <= 0.0) {
      return Status::invalid_argument(what + ": JCT sample " + num(s) +
                                      " s is not a positive finite number");
    }
    sum += s;
  }
  return sum / static_cast<double>(samples_s.size());
}

Result<PdHeatmap> build_pd_profile(const PdProfileGrid& grid,
                                   const std::vector<PdCellSamples>& samples) {
  KEEL_ASSIGN_OR_RETURN(std::vector<PdProfileCell> cells, plan_pd_profile(grid, 0));
  if (samples.size() != cells.size()) {
    return Status::invalid_argument("samples for " + std::to_string(samples.size()) +
                                    " cells, but the grid has " + std::to_string(cells.size()));
  }
  std::vector<std::vector<double>> values(grid.prefill_lengths.size(),
                                          std::vector<double>(grid.ratios.size(), 0.0));
  for (size_t i = 0; i < cells.size(); ++i) {
    const std::string at = "cell (prefill " + std::to_string(cells[i].prefill_tokens) + ", ratio " +
                           num(grid.ratios[cells[i].col]) + ")";
    KEEL_ASSIGN_OR_RETURN(double colocated,
                          mean_jct(samples[i].colocated_jct_s, at + " colocated"));
    KEEL_ASSIGN_OR_RETURN(double disaggregated,
                          mean_jct(samples[i].disaggregated_jct_s, at + " disaggregated"));
    values[cells[i].row][cells[i].col] = colocated / disaggregated - 1.0;
  }
  std::vector<double> prefill_bins(grid.prefill_lengths.begin(), grid.prefill_lengths.end());
  return PdHeatmap::create(std::move(prefill_bins), grid.ratios, std::move(values));
}

std::string pd_profile_json(const PdHeatmap& heatmap, const std::vector<PdCellSamples>& samples,
                            const PdProfileProvenance& provenance) {
  Json doc = Json::parse(heatmap.to_json());
  doc["model"] = provenance.model;
  doc["date"] = provenance.date;
  doc["threads_per_te"] = provenance.threads_per_te;
  doc["requests_per_cell"] = provenance.requests_per_cell;
  doc["concurrency"] = provenance.concurrency;
  doc["colocated_fleet"] = provenance.colocated_fleet;
  doc["disaggregated_fleet"] = provenance.disaggregated_fleet;
  const size_t n = heatmap.prefill_bins().size() * heatmap.ratio_bins().size();
  if (samples.size() == n) {
    std::vector<double> colocated, disaggregated;
    for (const PdCellSamples& s : samples) {
      auto mean_ms = [](const std::vector<double>& v) {
        double sum = 0.0;
        for (double x : v) sum += x;
        return v.empty() ? 0.0 : 1000.0 * sum / static_cast<double>(v.size());
      };
      colocated.push_back(mean_ms(s.colocated_jct_s));
      disaggregated.push_back(mean_ms(s.disaggregated_jct_s));
    }
    doc["jct_colocated_ms"] = per_cell(heatmap, colocated);
    doc["jct_disaggregated_ms"] = per_cell(heatmap, disaggregated);
  }
  return doc.dump() + "\n";
}

}  // namespace keel::cluster
