// write_random_lora: seeded A/B values per (seed, tensor name), written with GgufWriter.
#include "model/random_lora.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "gguf/writer.h"

namespace keel::model {
namespace {

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// rows × cols normals of standard deviation `std`, converted to `dtype` rows.
std::vector<std::byte> random_rows(uint64_t seed, int64_t rows, int64_t cols, float std,
                                   DType dtype) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, std);
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  std::vector<std::byte> out(row_bytes * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    kernels::quantize_row(dtype, row.data(), out.data() + static_cast<size_t>(r) * row_bytes, cols);
  }
  return out;
}

const kernels::Matrix& target_matrix(const LayerWeights& w, LoraTarget t) {
  const kernels::Matrix* m[] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down};
  return *m[static_cast<size_t>(t)];
}

}  // namespace

Result<std::vector<LoraTarget>> parse_lora_targets(const std::string& list) {
  std::vector<LoraTarget> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    const std::optional<LoraTarget> t = lora_target_from_name(item);
    if (!t) {
      return Status::invalid_argument("unknown LoRA target '" + item +
                                      "' (expected q, k, v, o, gate, up or down)");
    }
    if (std::find(out.begin(), out.end(), *t) == out.end()) out.push_back(*t);
    start = comma + 1;
  }
  return out;
}

Status write_random_lora(const RandomLoraSpec& spec, const Model& base, const std::string& path) {
  if (spec.rank < 1 || spec.rank > 4096) {
    return Status::invalid_argument("LoRA rank " + std::to_string(spec.rank) +
                                    " is outside [1, 4096]");
  }
  if (spec.dtype != DType::kF32 && spec.dtype != DType::kF16 && spec.dtype != DType::kBF16) {
    return Status::invalid_argument("LoRA tensors are F32, F16 or BF16, not " +
                                    std::string(dtype_name(spec.dtype)));
  }
  std::vector<LoraTarget> targets = spec.targets;
  const bool moe = base.hparams().is_moe();  // LoRA on attention only (lora_adapter.cpp)
  if (targets.empty()) {
    const size_t n = moe ? size_t{4} : kNumLoraTargets;  // q, k, v, o first
    for (size_t t = 0; t < n; ++t) targets.push_back(static_cast<LoraTarget>(t));
  }
  for (LoraTarget t : targets) {
    if (moe && static_cast<size_t>(t) >= 4) {
      return Status::unsupported(
          "LoRA on the FFN of a mixture-of-experts model is not supported (targets: q, k, v, o)");
    }
  }
  KEEL_ASSIGN_OR_RETURN(const std::string arch, base.file().get_string("general.architecture"));
  gguf::GgufWriter w;
  w.set("general.architecture", arch);
  w.set("general.type", std::string("adapter"));
  w.set("general.name", std::string("keel random LoRA (seed " + std::to_string(spec.seed) + ")"));
  w.set("adapter.type", std::string("lora"));
  w.set("adapter.lora.alpha", spec.alpha > 0 ? spec.alpha : static_cast<float>(spec.rank));
  const float b_std = spec.b_std > 0 ? spec.b_std : 0.3f / std::sqrt(float(spec.rank));
  for (size_t il = 0; il < base.weights().layers.size(); ++il) {
    for (LoraTarget t : targets) {
      const kernels::Matrix& m = target_matrix(base.weights().layers[il], t);
      const std::string name = lora_base_tensor_name(t, static_cast<int64_t>(il));
      const float a_std = 1.0f / std::sqrt(static_cast<float>(m.cols));
      KEEL_TRY(w.add_tensor(name + ".lora_a", spec.dtype, {m.cols, spec.rank},
                            random_rows(name_seed(spec.seed, name + ".lora_a"), spec.rank, m.cols,
                                        a_std, spec.dtype)));
      KEEL_TRY(w.add_tensor(name + ".lora_b", spec.dtype, {spec.rank, m.rows},
                            random_rows(name_seed(spec.seed, name + ".lora_b"), m.rows, spec.rank,
                                        b_std, spec.dtype)));
    }
  }
  return w.write(path);
}

}  // namespace keel::model
