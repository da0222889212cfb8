// Comparing keel's forward pass with llama-server's greedy generation on the same GGUF file:
// llama-server (LlamaServer) generates greedily with its top log-probabilities (n_probs), keel is
// teacher-forced with the same tokens, and every step's distributions and greedy tokens are
// compared. Used by the MoE and the RoPE-scaling tests against llama.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"

namespace keel::testing {

struct LlamaCppComparison {
  double worst = 0.0;    // max |Δ log-probability| over every token llama.cpp reported
  int steps = 0;         // greedy steps compared
  int clear_steps = 0;   // of which llama.cpp's top-2 margin was clear
  int greedy_agree = 0;  // of which keel's argmax was llama.cpp's token
  std::vector<int32_t> llama_tokens;  // llama.cpp's greedy tokens, every prompt in turn
};

// POSTs /completion {prompt, n_predict, temperature 0, n_probs, cache_prompt false} to the
// llama-server on `port`; returns its completion_probabilities (the test fails, and the result
// is empty, on an HTTP error or a body without them).
nlohmann::json llama_cpp_greedy(int port, const std::vector<int32_t>& prompt, int n_predict,
                                int n_probs);

// Feeds `prompt` to keel's sequence `seq` (positions from 0), then each of llama.cpp's tokens in
// `probs` (one completion_probabilities array), comparing each step's log-softmax with the
// log-probabilities llama.cpp reported; a step counts as clear when llama.cpp's top-2 margin
// exceeds `clear_margin`.
void compare_with_llama_cpp(model::testing::Runner& keel, int32_t seq,
                            const std::vector<int32_t>& prompt, const nlohmann::json& probs,
                            double clear_margin, LlamaCppComparison* c);

}  // namespace keel::testing
