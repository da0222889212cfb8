// Test helper: a Runner bundling a Model with a thread pool, kernels::Ops, a KvCache and a Context,
// with one-liners for prefill / decode / greedy generation, plus small numeric helpers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace keel::model::testing {

inline int32_t argmax(const float* v, int64_t n) {
  return static_cast<int32_t>(std::max_element(v, v + n) - v);
}
inline int32_t argmax(const std::vector<float>& v) {
  return argmax(v.data(), static_cast<int64_t>(v.size()));
}

inline double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double{a[i]} - double{b[i]}));
  return m;
}
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return max_abs_diff(a.data(), b.data(), std::min(a.size(), b.size()));
}

inline kernels::Isa test_isa() {
  auto isa = kernels::choose_isa_from_env(detect_cpu_features());
  KEEL_CHECK_MSG(isa.ok(), "KEEL_ISA names a kernel table this CPU cannot run");
  return *isa;
}

class Runner {
 public:
  // Loads `path`; check ok() before use. One thread by default: the 2 shared CPUs of CI make
  // pool hand-offs slow; tests that want the pool exercised pass 2. Kernels: the best table for
  // this CPU, or the one KEEL_ISA names (the test command runs the suite under each).
  explicit Runner(const std::string& path, ModelOptions options = {}, int threads = 1,
                  int64_t max_batch = 64)
      : pool_(threads), ops_(test_isa(), &pool_) {
    auto m = Model::open(path, options);
    if (!m.ok()) {
      status_ = m.error();
      return;
    }
    model_ = std::move(*m);
    auto c = KvCache::for_model(*model_);
    if (!c.ok()) {
      status_ = c.error();
      return;
    }
    cache_ = std::make_unique<KvCache>(std::move(*c));
    ctx_ = std::make_unique<Context>(*model_, max_batch);
  }

  [[nodiscard]] bool ok() const { return status_.ok(); }
  [[nodiscard]] const Status& status() const { return status_; }
  Model& model() { return *model_; }
  KvCache& cache() { return *cache_; }
  kernels::Ops& ops() { return ops_; }
  [[nodiscard]] int64_t n_vocab() const { return model_->hparams().n_vocab; }

  Status forward(const Batch& b, std::vector<float>* logits) {
    return ctx_->forward(b, *cache_, ops_, logits);
  }

  // Feeds tokens at positions start.. into `slot` in one batch (or one at a time when
  // `one_by_one`); returns the logits of every token, [n][n_vocab].
  std::vector<float> feed(const std::vector<int32_t>& tokens, int32_t slot, int32_t start = 0,
                          bool one_by_one = false) {
    std::vector<float> all, out;
    Batch b;
    for (size_t i = 0; i < tokens.size(); ++i) {
      b.add(tokens[i], start + static_cast<int32_t>(i), slot, true);
      if (one_by_one || i + 1 == tokens.size()) {
        Status st = forward(b, &out);
        EXPECT_TRUE(st.ok()) << st.to_string();
        all.insert(all.end(), out.begin(), out.end());
        b.clear();
      }
    }
    return all;
  }

  // Prompt (in one batch, or token by token), then `n` greedy steps; returns the generated ids.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n, int32_t slot = 0,
                              bool one_by_one = false) {
    cache_->clear(slot);
    std::vector<float> logits = feed(prompt, slot, 0, one_by_one);
    std::vector<int32_t> gen;
    auto pos = static_cast<int32_t>(prompt.size());
    for (int i = 0; i < n; ++i) {
      const int32_t next =
          argmax(logits.data() + logits.size() - static_cast<size_t>(n_vocab()), n_vocab());
      gen.push_back(next);
      if (i + 1 < n) logits = feed({next}, slot, pos++);
    }
    return gen;
  }

 private:
  Status status_;
  ThreadPool pool_;
  kernels::Ops ops_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Context> ctx_;
};

}  // namespace keel::model::testing
