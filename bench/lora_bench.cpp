// Multi-LoRA decode throughput: one Context decoding S sequences per step (one token each), the
// base model alone against every sequence with its own adapter (S adapters in one batch) and all
// sequences on one adapter, timed in interleaved rounds of the same run so the ratios compare like
// with like. Each sequence first prefills a PROMPT-token prompt; a round decodes STEPS tokens per
// sequence from there (the KV written by earlier rounds is overwritten in place).
//   keel_lora_bench DIR STEPS PROMPT THREADS ADAPTERS RANK [SHAPE] [TYPE]
// The base model (SHAPE, default tinyllama-1.1b; TYPE default q8_0; random weights) and ADAPTERS
// random rank-RANK adapters on every projection are written into DIR first when missing (as
// `keel make-model` / `keel make-lora` write them). Prints tokens/s per mode (S × STEPS per
// round, best of 3 rounds) and the ratio to the base model. See bench/lora.sh and
// docs/benchmarks.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/lora_adapter.h"
#include "model/model.h"
#include "model/random_lora.h"
#include "model/random_model.h"

namespace {

using keel::model::Batch;
using keel::model::LoraAdapter;

int fail(const std::string& what) {
  std::fprintf(stderr, "keel_lora_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    return fail("usage: keel_lora_bench DIR STEPS PROMPT THREADS ADAPTERS RANK [SHAPE] [TYPE]");
  }
  const std::string dir = argv[1];
  const int steps = std::atoi(argv[2]), prompt = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  const int n_adapters = std::atoi(argv[5]), rank = std::atoi(argv[6]);
  const std::string shape_name = argc > 7 ? argv[7] : "tinyllama-1.1b";
  const std::string type_name = argc > 8 ? argv[8] : "q8_0";
  if (steps < 1 || prompt < 1 || threads < 1 || n_adapters < 1 || rank < 1) {
    return fail("STEPS, PROMPT, THREADS, ADAPTERS and RANK must be ≥ 1");
  }
  keel::ThreadPool pool(threads);
  const std::string base_path = dir + "/" + shape_name + "-" + type_name + ".gguf";
  if (!std::filesystem::exists(base_path)) {
    keel::model::RandomModelSpec spec;
    const auto shape = keel::model::find_model_shape(shape_name);
    const auto type = keel::dtype_from_name(type_name);
    if (!shape || !type) return fail("unknown shape or type");
    spec.shape = *shape;
    spec.weight_type = *type;
    if (auto st = keel::model::write_random_model(spec, base_path, pool); !st.ok()) {
      return fail(st.to_string());
    }
  }
  auto model = keel::model::Model::open(base_path);
  if (!model.ok()) return fail(model.status().to_string());
  std::vector<std::unique_ptr<LoraAdapter>> adapters;
  for (int i = 1; i <= n_adapters; ++i) {
    const std::string path = dir + "/" + shape_name + "-lora-r" + std::to_string(rank) + "-" +
                             std::to_string(i) + ".gguf";
    if (!std::filesystem::exists(path)) {
      keel::model::RandomLoraSpec spec;
      spec.rank = rank;
      spec.seed = static_cast<uint64_t>(i);
      if (auto st = keel::model::write_random_lora(spec, **model, path); !st.ok()) {
        return fail(st.to_string());
      }
    }
    auto a = LoraAdapter::open(path, **model);
    if (!a.ok()) return fail(a.status().to_string());
    adapters.push_back(std::move(*a));
  }
  const auto n_seqs = static_cast<int32_t>(adapters.size());
  const int32_t block = 16, per_seq = (prompt + steps + block - 1) / block;
  const auto layout =
      keel::model::KvLayout::for_model((*model)->hparams(), block, keel::DType::kF32);
  auto kv = keel::model::KvStorage::create(layout, per_seq * n_seqs);
  if (!kv.ok()) return fail(kv.status().to_string());
  auto isa = keel::kernels::choose_isa_from_env(keel::detect_cpu_features());
  if (!isa.ok()) return fail(isa.status().to_string());
  keel::kernels::Ops ops(*isa, &pool);
  keel::model::Context ctx(**model, std::max<int64_t>(prompt, n_seqs));
  Batch batch;
  for (int32_t s = 0; s < n_seqs; ++s) {
    std::vector<int32_t> table(static_cast<size_t>(per_seq));
    for (int32_t b = 0; b < per_seq; ++b) table[static_cast<size_t>(b)] = s * per_seq + b;
    batch.add_seq(std::move(table));
  }
  std::vector<float> logits;
  // Prefill every sequence (base weights; the bench times decode only).
  for (int32_t s = 0; s < n_seqs; ++s) {
    batch.clear_tokens();
    for (int32_t p = 0; p < prompt; ++p)
      batch.add(1 + (s * 31 + p * 7) % 1000, p, s, p + 1 == prompt);
    if (auto st = ctx.forward(batch, *kv, ops, &logits); !st.ok()) return fail(st.to_string());
  }
  enum Mode { kBase, kEach, kOne };
  const char* names[] = {"base model", "each sequence its own adapter", "one adapter for all"};
  const auto run = [&](Mode mode) {
    for (int32_t s = 0; s < n_seqs; ++s) {
      batch.seqs[static_cast<size_t>(s)].lora =
          mode == kBase ? nullptr : adapters[mode == kEach ? static_cast<size_t>(s) : 0].get();
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      batch.clear_tokens();
      for (int32_t s = 0; s < n_seqs; ++s) batch.add(1 + (s + i) % 1000, prompt + i, s, true);
      if (auto st = ctx.forward(batch, *kv, ops, &logits); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.to_string().c_str());
        std::exit(1);
      }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double best[3] = {1e30, 1e30, 1e30};
  run(kEach);  // warm-up: pages the adapters in
  for (int round = 0; round < 3; ++round) {
    for (Mode m : {kBase, kEach, kOne}) best[m] = std::min(best[m], run(m));
  }
  std::printf(
      "%d sequences, rank %lld adapters, %d decode steps after a %d-token prompt, %d "
      "threads, kernels %s\n",
      n_seqs, static_cast<long long>(adapters[0]->rank()), steps, prompt, threads,
      std::string(ops.kernel_name()).c_str());
  for (Mode m : {kBase, kEach, kOne}) {
    const double tps = n_seqs * steps / best[m];
    std::printf("%-32s %8.1f tokens/s   %.3f of the base model\n", names[m], tps,
                best[kBase] / best[m]);
  }
  return 0;
}
