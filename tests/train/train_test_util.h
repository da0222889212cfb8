// Test helpers of the train tests: stories260K's path, a tokenized training sequence, and the
// cross-entropy of trained targets from keel's own inference logits.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/model_pass.h"

namespace keel::train::testing {

inline std::string stories_path() { return KEEL_REPO_STORIES; }

// The tokens of `text` (with BOS), the first `n` of them, every target trained except those at
// t % 5 == 0 (so the mask matters).
inline TrainSequence story_sequence(const model::Model& m, const std::string& text, size_t n) {
  auto tok = tokenizer::Tokenizer::from_gguf(m.file());
  EXPECT_TRUE(tok.ok());
  TrainSequence s;
  s.tokens = tok->encode(text, true, false);
  EXPECT_GE(s.tokens.size(), n);
  s.tokens.resize(n);
  s.target.assign(n, 0);
  for (size_t t = 1; t < n; ++t) s.target[t] = t % 5 != 0;
  return s;
}

// Σ −ln p(target) from logits [n][n_vocab] of every position (row t predicts token t + 1).
inline double loss_from_logits(const std::vector<float>& logits, int64_t n_vocab,
                               const TrainSequence& s) {
  double loss = 0.0;
  for (size_t t = 1; t < s.tokens.size(); ++t) {
    if (!s.target[t]) continue;
    const float* l = logits.data() + (t - 1) * static_cast<size_t>(n_vocab);
    double mx = l[0];
    for (int64_t i = 0; i < n_vocab; ++i) mx = std::max(mx, double{l[i]});
    double sum = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(double{l[i]} - mx);
    loss += mx + std::log(sum) - l[s.tokens[t]];
  }
  return loss;
}

}  // namespace keel::train::testing
