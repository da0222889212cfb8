// The PD-aware heatmap: validation, its JSON file format, bilinear lookup (pd_heatmap.h).
#include "cluster/job/pd_heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>

namespace keel::cluster {
namespace {

using Json = nlohmann::json;

Status check_bins(const std::vector<double>& bins, std::string_view name, double min_value,
                  bool min_inclusive) {
  if (bins.empty()) return Status::invalid_argument(std::string(name) + " is empty");
  if (bins.size() > PdHeatmap::kMaxBins) {
    return Status::invalid_argument(std::string(name) + " has " + std::to_string(bins.size()) +
                                    " bins (at most " + std::to_string(PdHeatmap::kMaxBins) + ")");
  }
  for (size_t i = 0; i < bins.size(); ++i) {
    const std::string at = std::string(name) + "[" + std::to_string(i) + "]";
    if (!std::isfinite(bins[i])) return Status::invalid_argument(at + " is not finite");
    const bool low = min_inclusive ? bins[i] < min_value : bins[i] <= min_value;
    if (low) {
      return Status::invalid_argument(at + " = " + std::to_string(bins[i]) + " must be " +
                                      (min_inclusive ? ">= " : "> ") + std::to_string(min_value));
    }
    if (i > 0 && bins[i] <= bins[i - 1]) {
      return Status::invalid_argument(std::string(name) + " must be strictly increasing: " + at +
                                      " = " + std::to_string(bins[i]) +
                                      " <= " + std::to_string(bins[i - 1]));
    }
  }
  return Status();
}

// `value` as an array of numbers; errors name it `what`.
Result<std::vector<double>> number_array(const Json& value, const std::string& what) {
  if (!value.is_array()) return Status::invalid_argument(what + " must be an array of numbers");
  std::vector<double> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_number()) {
      return Status::invalid_argument(what + "[" + std::to_string(i) + "] is not a number");
    }
    out.push_back(value[i].get<double>());
  }
  return out;
}

Result<std::vector<double>> required_array(const Json& doc, const std::string& key) {
  auto it = doc.find(key);
  if (it == doc.end()) return Status::invalid_argument("missing key \"" + key + "\"");
  return number_array(*it, key);
}

// Index of the last bin <= x and the weight of the next one, x clamped to the bins' range.
std::pair<size_t, double> locate(const std::vector<double>& bins, double x) {
  if (x <= bins.front() || bins.size() == 1) return {0, 0.0};
  if (x >= bins.back()) return {bins.size() - 1, 0.0};
  const size_t hi = static_cast<size_t>(std::upper_bound(bins.begin(), bins.end(), x) -
                                        bins.begin());  // bins[hi - 1] <= x < bins[hi]
  const size_t lo = hi - 1;
  return {lo, (x - bins[lo]) / (bins[hi] - bins[lo])};
}

}  // namespace

Result<PdHeatmap> PdHeatmap::create(std::vector<double> prefill_bins,
                                    std::vector<double> ratio_bins,
                                    std::vector<std::vector<double>> values) {
  KEEL_TRY(check_bins(prefill_bins, "prefill_bins", 0.0, /*min_inclusive=*/false));
  KEEL_TRY(check_bins(ratio_bins, "ratio_bins", 0.0, /*min_inclusive=*/true));
  if (values.size() != prefill_bins.size()) {
    return Status::invalid_argument("values has " + std::to_string(values.size()) +
                                    " rows but prefill_bins has " +
                                    std::to_string(prefill_bins.size()) + " bins");
  }
  for (size_t r = 0; r < values.size(); ++r) {
    const std::string row = "values[" + std::to_string(r) + "]";
    if (values[r].size() != ratio_bins.size()) {
      return Status::invalid_argument(row + " has " + std::to_string(values[r].size()) +
                                      " columns but ratio_bins has " +
                                      std::to_string(ratio_bins.size()) + " bins");
    }
    for (size_t c = 0; c < values[r].size(); ++c) {
      if (!std::isfinite(values[r][c])) {
        return Status::invalid_argument(row + "[" + std::to_string(c) + "] is not finite");
      }
    }
  }
  PdHeatmap map;
  map.prefill_bins_ = std::move(prefill_bins);
  map.ratio_bins_ = std::move(ratio_bins);
  map.values_ = std::move(values);
  return map;
}

Result<PdHeatmap> PdHeatmap::parse(std::string_view json_text) {
  Json doc;
  try {
    doc = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::exception& e) {
    return Status::invalid_argument(std::string("heatmap is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return Status::invalid_argument("heatmap must be a JSON object");
  KEEL_ASSIGN_OR_RETURN(std::vector<double> prefill_bins, required_array(doc, "prefill_bins"));
  KEEL_ASSIGN_OR_RETURN(std::vector<double> ratio_bins, required_array(doc, "ratio_bins"));
  auto values_it = doc.find("values");
  if (values_it == doc.end()) return Status::invalid_argument("missing key \"values\"");
  if (!values_it->is_array()) {
    return Status::invalid_argument("values must be an array of rows (arrays of numbers)");
  }
  std::vector<std::vector<double>> values;
  values.reserve(values_it->size());
  for (size_t r = 0; r < values_it->size(); ++r) {
    KEEL_ASSIGN_OR_RETURN(std::vector<double> row,
                          number_array((*values_it)[r], "values[" + std::to_string(r) + "]"));
    values.push_back(std::move(row));
  }
  return create(std::move(prefill_bins), std::move(ratio_bins), std::move(values));
}

Result<PdHeatmap> PdHeatmap::load(FileSystem& fs, const std::string& path) {
  auto file = fs.open_readable(path);
  if (!file.ok()) return file.error().with_prefix("PD heatmap " + path);
  const uint64_t size = (*file)->size();
  if (size > kMaxFileBytes) {
    return Status::invalid_argument("PD heatmap " + path + ": " + std::to_string(size) +
                                    " bytes (at most " + std::to_string(kMaxFileBytes) + ")");
  }
  std::string text(static_cast<size_t>(size), '\0');
  if (size > 0) {
    Status read = (*file)->read_at(0, text.size(), text.data());
    if (!read.ok()) return read.with_prefix("PD heatmap " + path);
  }
  auto map = parse(text);
  if (!map.ok()) return map.error().with_prefix("PD heatmap " + path);
  return map;
}

std::string PdHeatmap::to_json() const {
  Json doc = Json::object();
  doc["prefill_bins"] = prefill_bins_;
  doc["ratio_bins"] = ratio_bins_;
  doc["values"] = values_;
  return doc.dump() + "\n";
}

Status PdHeatmap::save(FileSystem& fs, const std::string& path) const {
  const std::string tmp = path + ".tmp";
  const std::string text = to_json();
  {
    auto file = fs.open_writable(tmp);
    if (!file.ok()) return file.error().with_prefix("PD heatmap " + tmp);
    const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
    KEEL_TRY((*file)->append({bytes, text.size()}).with_prefix("PD heatmap " + tmp));
    KEEL_TRY((*file)->close().with_prefix("PD heatmap " + tmp));
  }
  return fs.rename(tmp, path).with_prefix("PD heatmap " + path);
}

double PdHeatmap::lookup(int64_t prefill_tokens, int64_t predicted_decode_tokens) const {
  const double prefill = static_cast<double>(std::max<int64_t>(prefill_tokens, 0));
  const double decode = static_cast<double>(std::max<int64_t>(predicted_decode_tokens, 0));
  const double ratio = decode / std::max(prefill, 1.0);
  const auto [r, wr] = locate(prefill_bins_, prefill);
  const auto [c, wc] = locate(ratio_bins_, ratio);
  // Weights of 0 leave the neighbour unread, so the edge cases never index past the table.
  auto at = [&](size_t row, size_t col) { return values_[row][col]; };
  double top = at(r, c);
  if (wc > 0.0) top = (1.0 - wc) * top + wc * at(r, c + 1);
  if (wr == 0.0) return top;
  double bottom = at(r + 1, c);
  if (wc > 0.0) bottom = (1.0 - wc) * bottom + wc * at(r + 1, c + 1);
  return (1.0 - wr) * top + wr * bottom;
}

}  // namespace keel::cluster
