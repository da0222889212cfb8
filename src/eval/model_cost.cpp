// model_cost, attention_flops and speed_bound (see model_cost.h).
#include "eval/model_cost.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <map>
#include <utility>

namespace keel::eval {
namespace {

// A mixture-of-experts model's expert tensors (blk.N.ffn_*_exps.weight, or one per expert:
// blk.N.ffn_{gate,up,down}.E.weight): a token reads only n_expert_used / n_expert of them.
bool is_expert_tensor(const std::string& name) {
  if (name.find("_exps.") != std::string::npos) return true;
  for (const char* kind : {".ffn_gate.", ".ffn_up.", ".ffn_down."}) {
    const size_t at = name.find(kind);
    if (at != std::string::npos && at + std::strlen(kind) < name.size() &&
        std::isdigit(static_cast<unsigned char>(name[at + std::strlen(kind)]))) {
      return true;
    }
  }
  return false;
}

bool is_quantized(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_K || t == DType::kQ5_K ||
         t == DType::kQ6_K;
}

// The peak (G ops/s) the prefill matmuls of `type` can reach on this table, and its name.
std::pair<double, std::string> prefill_peak(const kernels::Roofline& r, DType type) {
  if (is_quantized(type) && r.int8_gops > 0) return {r.int8_gops, r.int8_instruction};
  if (type == DType::kBF16 && r.bf16_gflops > 0) return {r.bf16_gflops, "vdpbf16ps"};
  return {r.fp32_gflops, "fp32 FMA"};
}

}  // namespace

ModelCost model_cost(const model::Model& m) {
  ModelCost c;
  const auto& tensors = m.file().tensors();
  const bool has_output = m.file().find_tensor("output.weight") != nullptr;
  const model::MoeParams& moe = m.hparams().moe;
  const double active =
      moe.n_expert > 0 ? static_cast<double>(moe.n_expert_used) / static_cast<double>(moe.n_expert)
                       : 1.0;
  std::map<DType, uint64_t> bytes_by_type;
  for (const auto& t : tensors) {
    c.size_bytes += t.num_bytes;
    c.n_params += static_cast<uint64_t>(t.num_elements);
    const bool embd = t.name == "token_embd.weight";
    const double share = is_expert_tensor(t.name) ? active : 1.0;  // per token
    if (!(embd && has_output)) {
      c.decode_bytes += static_cast<uint64_t>(share * static_cast<double>(t.num_bytes));
    }
    if (t.shape.size() >= 2 && !embd && t.name != "output.weight") {
      c.matmul_flops += 2.0 * share * static_cast<double>(t.num_elements);
      bytes_by_type[t.dtype] += t.num_bytes;
    }
  }
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > most) most = bytes, c.main_type = type;
  }
  return c;
}

double attention_flops(const model::HParams& hp, int32_t n) {
  return 4.0 * static_cast<double>(hp.n_layer * hp.n_head * hp.head_dim) * (n + 1) / 2.0;
}

SpeedBound speed_bound(const ModelCost& cost, const model::HParams& hp,
                       const kernels::Roofline& roof, int32_t n_prompt) {
  if (n_prompt > 0) {
    const auto [peak, what] = prefill_peak(roof, cost.main_type);
    if (peak <= 0) return {};
    return {peak * 1e9 / (cost.matmul_flops + attention_flops(hp, n_prompt)),
            fmt::format("{:.0f} G/s {}", peak, what)};
  }
  return {roof.read_gbs * 1e9 / static_cast<double>(cost.decode_bytes),
          fmt::format("{:.1f} GB/s read", roof.read_gbs)};
}

}  // namespace keel::eval
