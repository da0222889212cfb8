// make_lora_layout and the seeded initial values of a LoRA adapter's A and B.
#include "train/lora_params.h"

#include <cmath>
#include <string>

namespace keel::train {
namespace {

const kernels::Matrix& base_matrix(const model::LayerWeights& w, model::LoraTarget t) {
  const kernels::Matrix* m[] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down};
  return *m[static_cast<size_t>(t)];
}

template <typename T>
void fill_uniform(std::vector<T>* out, size_t begin, size_t n, uint64_t seed, double range) {
  for (size_t i = 0; i < n; ++i) {
    (*out)[begin + i] = static_cast<T>((2.0 * uniform01(seed, begin + i) - 1.0) * range);
  }
}

}  // namespace

Status LoraConfig::validate() const {
  if (rank < 1 || rank > 4096) {
    return Status::invalid_argument("LoRA rank " + std::to_string(rank) + " is outside [1, 4096]");
  }
  if (!(alpha > 0.0f) || !std::isfinite(alpha)) {
    return Status::invalid_argument("LoRA alpha must be a finite number > 0");
  }
  return Status();
}

const LoraSlot* LoraLayout::find(int64_t il, model::LoraTarget t) const {
  const int32_t s = slot_of[static_cast<size_t>(il)][static_cast<size_t>(t)];
  return s < 0 ? nullptr : &slots[static_cast<size_t>(s)];
}

Result<LoraLayout> make_lora_layout(const model::Model& base, const LoraConfig& config) {
  KEEL_TRY(config.validate());
  const model::HParams& hp = base.hparams();
  if (hp.is_moe()) {
    return Status::unsupported("the LoRA trainer does not train mixture-of-experts models yet");
  }
  std::vector<model::LoraTarget> targets = config.targets;
  if (targets.empty()) {
    for (size_t t = 0; t < model::kNumLoraTargets; ++t) {
      targets.push_back(static_cast<model::LoraTarget>(t));
    }
  }
  LoraLayout layout;
  layout.rank = config.rank;
  layout.alpha = config.alpha;
  layout.slot_of.assign(static_cast<size_t>(hp.n_layer), {-1, -1, -1, -1, -1, -1, -1});
  size_t offset = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    for (size_t t = 0; t < model::kNumLoraTargets; ++t) {
      const auto target = static_cast<model::LoraTarget>(t);
      bool wanted = false;
      for (model::LoraTarget w : targets) wanted = wanted || w == target;
      if (!wanted) continue;
      const kernels::Matrix& m =
          base_matrix(base.weights().layers[static_cast<size_t>(il)], target);
      LoraSlot s;
      s.layer = il;
      s.target = target;
      s.in = m.cols;
      s.out = m.rows;
      s.a_offset = offset;
      s.b_offset = offset + static_cast<size_t>(config.rank * m.cols);
      offset = s.b_offset + static_cast<size_t>(m.rows * config.rank);
      layout.slot_of[static_cast<size_t>(il)][t] = static_cast<int32_t>(layout.slots.size());
      layout.slots.push_back(s);
    }
  }
  layout.num_params = offset;
  return layout;
}

double uniform01(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

template <typename T>
std::vector<T> init_lora_params(const LoraLayout& layout, uint64_t seed) {
  std::vector<T> p(layout.num_params, T{0});
  for (const LoraSlot& s : layout.slots) {
    fill_uniform(&p, s.a_offset, static_cast<size_t>(layout.rank * s.in), seed,
                 1.0 / std::sqrt(static_cast<double>(s.in)));
  }
  return p;
}

template <typename T>
std::vector<T> random_lora_params(const LoraLayout& layout, uint64_t seed, double a_range,
                                  double b_range) {
  std::vector<T> p(layout.num_params, T{0});
  for (const LoraSlot& s : layout.slots) {
    fill_uniform(&p, s.a_offset, static_cast<size_t>(layout.rank * s.in), seed, a_range);
    fill_uniform(&p, s.b_offset, static_cast<size_t>(s.out * layout.rank), seed, b_range);
  }
  return p;
}

template std::vector<float> init_lora_params<float>(const LoraLayout&, uint64_t);
template std::vector<double> init_lora_params<double>(const LoraLayout&, uint64_t);
template std::vector<float> random_lora_params<float>(const LoraLayout&, uint64_t, double, double);
template std::vector<double> random_lora_params<double>(const LoraLayout&, uint64_t, double,
                                                        double);

}  // namespace keel::train
