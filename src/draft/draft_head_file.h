// The draft head file: trained DraftHeadWeights and what they belong to, stored as a small GGUF
// beside the target (`<model stem>.draft.gguf`, written with gguf::GgufWriter). Layout:
//   general.architecture = "keel-draft-head", keel.draft.version = 1
//   keel.draft.{n_embd, hidden, n_vocab, rms_eps}
//   keel.draft.target.digest   16 hex digits, target_digest() of the model it was trained on
//   keel.draft.target.name     that model's file name (for messages)
//   keel.draft.train.{tokens, epochs, seed, loss, accuracy}   how it was trained, its final
//                              training loss and greedy top-1 agreement with the target
//   keel.draft.command         the command that produced the file
//   tensors (F32, GGML order: shape[0] contiguous): fc_in.weight [2d, d], fc_in.bias [d],
//   up.weight [d, H], up.bias [H], down.weight [H, d], down.bias [d], norm.weight [d]
// load_draft_head() checks every key, type, shape and value, and the digest against the model it
// will draft for: a missing, mistyped or inconsistent one, a file that is not GGUF, or a head
// trained for another model is InvalidArgument naming the file (NotFound / IoError for an
// unreadable path), never a crash.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "draft/draft_head.h"
#include "model/model.h"

namespace keel::draft {

inline constexpr int64_t kDraftHeadVersion = 1;

struct DraftTrainInfo {
  int64_t tokens = 0;  // training pairs
  int64_t epochs = 0;
  uint64_t seed = 0;
  double loss = 0;      // final mean training loss (cross-entropy + feature term)
  double accuracy = 0;  // share of training pairs whose argmax is the target's next token
};

struct DraftHeadFile {
  DraftHeadWeights weights;
  int64_t n_vocab = 0;
  uint64_t target_digest = 0;
  std::string target_name;
  DraftTrainInfo train;
  std::string command;
};

// `<model path without .gguf>.draft.gguf`: where `keel train-draft` writes by default and where an
// engine looks for a head when it is given none.
[[nodiscard]] std::string default_draft_head_path(const std::string& model_path);

[[nodiscard]] Status save_draft_head(const DraftHeadFile& file, const std::string& path);
// The file alone, without a target check.
[[nodiscard]] Result<DraftHeadFile> read_draft_head(const std::string& path);
// The file checked against `target` (shape and digest), as a DraftHead bound to it.
[[nodiscard]] Result<std::unique_ptr<DraftHead>> load_draft_head(const std::string& path,
                                                                 const model::Model& target);

}  // namespace keel::draft
