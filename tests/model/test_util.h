// Test helper: a Runner bundling a Model with a thread pool, kernels::Ops, a paged KvStorage and a
// Context, with one-liners for prefill / decode / greedy generation, plus small numeric helpers.
// The Runner owns `n_seqs` sequences whose block tables are a seeded random permutation of all the
// storage's blocks, so every test runs over non-contiguous, out-of-order block tables.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/lora_adapter.h"
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

// The KV storage a Runner allocates.
struct RunnerKv {
  int32_t block_size = 16;
  DType dtype = DType::kF32;
  int32_t n_seqs = 4;         // sequences with their own blocks, each covering n_ctx positions
  int32_t spare_blocks = 0;   // extra blocks owned by no sequence (ids after a shuffle)
  uint32_t shuffle_seed = 5;  // block ids are handed out in a random order
};

class Runner {
 public:
  // Loads `path`; check ok() before use. One thread by default: the 2 shared CPUs of CI make
  // pool hand-offs slow; tests that want the pool exercised pass 2. Kernels: the best table for
  // this CPU, or the one KEEL_ISA names (the test command runs the suite under each).
  explicit Runner(const std::string& path, ModelOptions options = {}, int threads = 1,
                  int64_t max_batch = 64, RunnerKv kv = {})
      : pool_(threads), ops_(test_isa(), &pool_) {
    auto m = Model::open(path, options);
    if (!m.ok()) {
      status_ = m.error();
      return;
    }
    init(std::move(*m), max_batch, kv);
  }
  // Runs a model loaded elsewhere (e.g. mapped from a model store entry).
  explicit Runner(std::unique_ptr<Model> model, int threads = 1, int64_t max_batch = 64,
                  RunnerKv kv = {})
      : pool_(threads), ops_(test_isa(), &pool_) {
    init(std::move(model), max_batch, kv);
  }

 private:
  void init(std::unique_ptr<Model> m, int64_t max_batch, const RunnerKv& kv) {
    model_ = std::move(m);
    const KvLayout layout = KvLayout::for_model(model_->hparams(), kv.block_size, kv.dtype);
    const auto per_seq =
        static_cast<int32_t>((model_->n_ctx() + kv.block_size - 1) / kv.block_size);
    auto s = KvStorage::create(layout, per_seq * kv.n_seqs + kv.spare_blocks);
    if (!s.ok()) {
      status_ = s.error();
      return;
    }
    storage_ = std::make_unique<KvStorage>(std::move(*s));
    std::vector<int32_t> ids(static_cast<size_t>(storage_->num_blocks()));
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937 rng(kv.shuffle_seed);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int32_t q = 0; q < kv.n_seqs; ++q) {
      tables_.emplace_back(ids.begin() + q * per_seq, ids.begin() + (q + 1) * per_seq);
    }
    spare_.assign(ids.begin() + kv.n_seqs * per_seq, ids.end());
    ctx_ = std::make_unique<Context>(*model_, max_batch);
  }

 public:
  [[nodiscard]] bool ok() const { return status_.ok(); }
  [[nodiscard]] const Status& status() const { return status_; }
  Model& model() { return *model_; }
  KvStorage& storage() { return *storage_; }
  Context& context() { return *ctx_; }
  kernels::Ops& ops() { return ops_; }
  [[nodiscard]] int64_t n_vocab() const { return model_->hparams().n_vocab; }
  [[nodiscard]] int32_t block_size() const { return storage_->layout().block_size; }
  // Block table of runner sequence `seq`; blocks owned by no sequence.
  [[nodiscard]] const std::vector<int32_t>& table(int32_t seq) const {
    return tables_[static_cast<size_t>(seq)];
  }
  [[nodiscard]] const std::vector<int32_t>& spare_blocks() const { return spare_; }

  // A batch whose sequences are the runner's sequences (seq_index = runner sequence), each with
  // the adapter set_lora() gave it.
  [[nodiscard]] Batch batch() const {
    Batch b;
    for (const auto& t : tables_) b.add_seq(t);
    for (size_t s = 0; s < lora_.size(); ++s) b.seqs[s].lora = lora_[s];
    return b;
  }
  // Runner sequence `seq` runs with `adapter` (borrowed; null = the base model).
  void set_lora(int32_t seq, const LoraAdapter* adapter) {
    lora_.resize(tables_.size(), nullptr);
    lora_[static_cast<size_t>(seq)] = adapter;
  }

  Status forward(const Batch& b, std::vector<float>* logits) {
    return ctx_->forward(b, *storage_, ops_, logits);
  }

  // Feeds tokens at positions start.. into runner sequence `seq` in one batch (or one at a time
  // when `one_by_one`); returns the logits of every token, [n][n_vocab].
  std::vector<float> feed(const std::vector<int32_t>& tokens, int32_t seq, int32_t start = 0,
                          bool one_by_one = false) {
    std::vector<float> all, out;
    Batch b = batch();
    for (size_t i = 0; i < tokens.size(); ++i) {
      b.add(tokens[i], start + static_cast<int32_t>(i), seq, true);
      if (one_by_one || i + 1 == tokens.size()) {
        Status st = forward(b, &out);
        EXPECT_TRUE(st.ok()) << st.to_string();
        all.insert(all.end(), out.begin(), out.end());
        b.clear_tokens();
      }
    }
    return all;
  }

  // Prompt (in one batch, or token by token), then `n` greedy steps; returns the generated ids.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n, int32_t seq = 0,
                              bool one_by_one = false) {
    std::vector<float> logits = feed(prompt, seq, 0, one_by_one);
    std::vector<int32_t> gen;
    auto pos = static_cast<int32_t>(prompt.size());
    for (int i = 0; i < n; ++i) {
      const int32_t next =
          argmax(logits.data() + logits.size() - static_cast<size_t>(n_vocab()), n_vocab());
      gen.push_back(next);
      if (i + 1 < n) logits = feed({next}, seq, pos++);
    }
    return gen;
  }

  // The K row of `layer` at position `pos` of runner sequence `seq`, widened to f32.
  [[nodiscard]] std::vector<float> k_row(int64_t layer, int32_t seq, int32_t pos) const {
    const KvLayout& l = storage_->layout();
    const std::byte* row = storage_->block(table(seq)[static_cast<size_t>(pos / l.block_size)]) +
                           l.k_offset(layer) +
                           static_cast<size_t>(pos % l.block_size) * l.row_bytes();
    std::vector<float> out(static_cast<size_t>(l.kv_dim));
    for (size_t i = 0; i < out.size(); ++i) {
      if (l.dtype == DType::kF16) {
        uint16_t h;
        std::memcpy(&h, row + i * 2, 2);
        out[i] = fp16_to_fp32(h);
      } else {
        std::memcpy(&out[i], row + i * 4, 4);
      }
    }
    return out;
  }

  // A copy of every byte of the KV storage (to check that a failed call changed nothing).
  [[nodiscard]] std::vector<std::byte> snapshot() const {
    const std::byte* p = storage_->block(0);
    return std::vector<std::byte>(p, p + storage_->bytes());
  }

 private:
  Status status_;
  ThreadPool pool_;
  kernels::Ops ops_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<Context> ctx_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> spare_;
  std::vector<const LoraAdapter*> lora_;  // per runner sequence; empty = none
};

}  // namespace keel::model::testing
