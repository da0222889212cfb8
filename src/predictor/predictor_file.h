// The predictor file: a trained LengthHead and what produced it, stored as a small GGUF (written
// with gguf::GgufWriter) beside the side model. Layout:
//   general.architecture = "keel-length-predictor", keel.predictor.version = 1
//   keel.predictor.{bucket_width, max_tokens, hidden, majority_bucket}
//   keel.predictor.feature_model.{name, n_embd, n_vocab}   the side model it was trained on
//   keel.predictor.served_model                            whose generation lengths it predicts
//   keel.predictor.dataset.{prompts, min_prompt_tokens, max_prompt_tokens, max_new_tokens,
//                           temperature, top_k, seed, heldout_every}   (DatasetSpec)
//   keel.predictor.command                                 the command that produced the file
//   tensors (F32): feature_mean [D], feature_scale [D], w1 [D, H], b1 [H], w2 [K, B], b2 [B]
//   (GGML order: shape[0] contiguous; w1/b1 absent when H = 0)
// load_predictor() checks every key, type, shape and value: a missing, mistyped or inconsistent
// one — or a file that is not GGUF — is InvalidArgument (NotFound / IoError for an unreadable
// path), never a crash.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "predictor/dataset.h"
#include "predictor/head.h"

namespace keel::predictor {

struct PredictorFile {
  LengthHead head;
  DatasetSpec dataset;          // how the labels were made (eval regenerates the held-out part)
  int32_t majority_bucket = 0;  // the most frequent training bucket: the baseline's answer
  std::string feature_model;    // file name of the side model
  int64_t feature_n_embd = 0;   // its n_embd (the head's D: FeatureExtractor::dim_for)
  int64_t feature_n_vocab = 0;  // its vocabulary size
  std::string served_model;     // file name of the served model
  std::string command;          // the command line that produced the file
};

[[nodiscard]] Status save_predictor(const PredictorFile& file, const std::string& path);
[[nodiscard]] Result<PredictorFile> load_predictor(const std::string& path);

}  // namespace keel::predictor
