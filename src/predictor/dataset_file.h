// A cache of built samples, so that retraining (other buckets, another head) does not regenerate
// the labels. Text, one sample per line after a header line that holds the DatasetSpec and the
// two models' file names:
//   keel-length-dataset v1 <prompts> <min> <max> <max_new> <temperature> <top_k> <seed>
//                          <heldout_every> <served model> <side model>
//   <index> <generated> <prompt token> ...   (every index of the spec, in order)
// load_samples() returns NotFound for a missing file and InvalidArgument for a malformed one or
// one made with another spec or other models (the caller then regenerates).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "predictor/dataset.h"

namespace keel::predictor {

// Identifies the dataset a cache holds.
struct DatasetKey {
  DatasetSpec spec;
  std::string served_model;  // file names
  std::string side_model;
};

[[nodiscard]] Status save_samples(const std::string& path, const DatasetKey& key,
                                  const std::vector<LengthSample>& samples);
[[nodiscard]] Result<std::vector<LengthSample>> load_samples(const std::string& path,
                                                             const DatasetKey& key);

}  // namespace keel::predictor
