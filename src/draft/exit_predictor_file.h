// The exit predictor file: trained ExitPredictors and the model they belong to, stored as a small
// GGUF beside the target (`<model stem>.exit.gguf`, written by `keel train-exit`). Layout:
//   general.architecture = "keel-exit-predictors", keel.exit.version = 1
//   keel.exit.{n_layer, n_embd, n_vocab, hidden, candidates (= 4)}
//   keel.exit.target.digest   16 hex digits, target_digest() of the model it was trained on
//   keel.exit.target.name     that model's file name (for messages)
//   keel.exit.train.{tokens, epochs, seed}   how it was trained
//   keel.exit.command         the command that produced the file
//   tensors (F32): blk.<l>.fc1.weight [12, H], blk.<l>.fc1.bias [H], blk.<l>.fc2.weight [H],
//   blk.<l>.fc2.bias [1] for l in [0, n_layer − 1); exit_counts [n_layer] (the calibration
//   histogram, whole numbers); accuracy [n_layer − 1] (each predictor's held-out accuracy)
// read/load check every key, type, shape and value and (load) the digest and shape against the
// model: anything else is InvalidArgument naming the file (NotFound / IoError for an unreadable
// path), never a crash. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "draft/exit_predictor.h"
#include "model/model.h"

namespace keel::draft {

inline constexpr int64_t kExitFileVersion = 1;

struct ExitPredictorFile {
  ExitPredictors predictors;
  int64_t n_embd = 0;
  int64_t n_vocab = 0;
  uint64_t target_digest = 0;
  std::string target_name;
  int64_t train_tokens = 0;
  int64_t train_epochs = 0;
  uint64_t train_seed = 0;
  std::vector<float> accuracy;  // [n_layer − 1] held-out accuracy per predictor
  std::string command;
};

// `<model path without .gguf>.exit.gguf`.
[[nodiscard]] std::string default_exit_path(const std::string& model_path);

[[nodiscard]] Status save_exit_predictors(const ExitPredictorFile& file, const std::string& path);
// The file alone, without a target check.
[[nodiscard]] Result<ExitPredictorFile> read_exit_predictors(const std::string& path);
// The file checked against `target` (shape and digest).
[[nodiscard]] Result<ExitPredictorFile> load_exit_predictors(const std::string& path,
                                                             const model::Model& target);

}  // namespace keel::draft
