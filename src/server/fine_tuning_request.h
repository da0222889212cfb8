// The body of POST /v1/fine_tuning/jobs, read and checked field by field (types, ranges, the
// hyperparameters given either at the top level or, as OpenAI now prefers, under
// method.supervised.hyperparameters — not both), before the route checks the model and the files
// against what the server has.
//
//   model            required string
//   training_file    required string (a file of purpose "fine-tune")
//   validation_file  optional string
//   hyperparameters  {n_epochs: "auto" | 1-50, batch_size: "auto" | 1-256,
//                     learning_rate_multiplier: "auto" | (0, 100]}
//   method           {type: "supervised", supervised: {hyperparameters: {...}}} (dpo and
//                    reinforcement are refused)
//   seed             optional integer in [0, 2^31 − 1]
//   suffix           optional, 1-64 characters of [A-Za-z0-9._-]
//   integrations     null or empty (Weights & Biases is not offered)
//   metadata         optional object: at most 16 string values, keys ≤ 64, values ≤ 512 chars
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/fine_tuning_job.h"

namespace keel::server {

struct FineTuningCreate {
  std::string model;
  std::string training_file;
  std::optional<std::string> validation_file;
  std::optional<std::string> suffix;
  FtHyperparameters hyperparameters;  // nullopt values: "auto"
  std::optional<int64_t> seed;        // nullopt: the server picks one
  nlohmann::json metadata;            // null or an object
};

// 400 invalid_request_error with `param` naming the field at fault.
ApiResult<FineTuningCreate> parse_fine_tuning_create(const nlohmann::json& body);

}  // namespace keel::server
