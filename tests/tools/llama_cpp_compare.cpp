// llama_cpp_greedy and compare_with_llama_cpp (see llama_cpp_compare.h).
#include "llama_cpp_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "serve_process.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::vector<double> log_softmax(const float* logits, int64_t n) {
  const double mx = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double{logits[i]} - mx);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = logits[i] - mx - std::log(sum);
  return out;
}

}  // namespace

json llama_cpp_greedy(int port, const std::vector<int32_t>& prompt, int n_predict, int n_probs) {
  const json req = {{"prompt", prompt},
                    {"n_predict", n_predict},
                    {"temperature", 0.0},
                    {"n_probs", n_probs},
                    {"cache_prompt", false}};
  const HttpResponse r =
      http_request(port, "POST", "/completion", req.dump(), {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 400);
  const json body = json::parse(r.body, nullptr, false);
  if (r.status != 200 || !body.contains("completion_probabilities")) {
    ADD_FAILURE() << "no completion_probabilities: " << r.body.substr(0, 400);
    return json::array();
  }
  return body["completion_probabilities"];
}

void compare_with_llama_cpp(model::testing::Runner& keel, int32_t seq,
                            const std::vector<int32_t>& prompt, const json& probs,
                            double clear_margin, LlamaCppComparison* c) {
  const int64_t nv = keel.n_vocab();
  std::vector<float> logits = keel.feed(prompt, seq);
  auto pos = static_cast<int32_t>(prompt.size());
  for (const json& step : probs) {
    const float* last = logits.data() + logits.size() - static_cast<size_t>(nv);
    const std::vector<double> lp = log_softmax(last, nv);
    const json& top = step["top_logprobs"];
    for (const json& t : top) {
      const auto id = t["id"].get<int32_t>();
      c->worst =
          std::max(c->worst, std::fabs(lp[static_cast<size_t>(id)] - t["logprob"].get<double>()));
    }
    const auto token = step["id"].get<int32_t>();
    c->llama_tokens.push_back(token);
    ++c->steps;
    if (top.size() >= 2 &&
        top[0]["logprob"].get<double>() - top[1]["logprob"].get<double>() > clear_margin) {
      ++c->clear_steps;
      c->greedy_agree += model::testing::argmax(last, nv) == token;
    }
    logits = keel.feed({token}, seq, pos++);
  }
}

}  // namespace keel::testing
