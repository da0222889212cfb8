// load_moe_layer: the router, the experts in one of three layouts, and qwen2moe's shared expert.
#include "model/moe_weights.h"

#include <string>

#include "model/tensor_loader.h"

namespace keel::model {
namespace {

// One 2-D tensor per expert: blk.N.<kind>.E.weight for E in [0, n).
Result<std::vector<kernels::Matrix>> per_expert(TensorLoader& t, const std::string& prefix,
                                                const std::string& kind, int64_t n, int64_t rows,
                                                int64_t cols) {
  std::vector<kernels::Matrix> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    KEEL_ASSIGN_OR_RETURN(
        kernels::Matrix m,
        t.matrix(prefix + kind + "." + std::to_string(e) + ".weight", rows, cols));
    out.push_back(m);
  }
  return out;
}

Status load_experts(TensorLoader& t, const HParams& hp, const std::string& p, MoeWeights& w) {
  const int64_t n = hp.moe.n_expert, ff = hp.moe.n_ff_exp, d = hp.n_embd;
  const bool merged = t.has(p + "ffn_gate_up_exps.weight");
  const bool stacked = t.has(p + "ffn_gate_exps.weight") || t.has(p + "ffn_up_exps.weight");
  if (merged && stacked) {
    return Status::invalid_argument(t.file().path() + ": layer has both " + p +
                                    "ffn_gate_up_exps.weight and separate gate/up experts");
  }
  if (merged) {
    KEEL_ASSIGN_OR_RETURN(std::vector<kernels::Matrix> gu,
                          t.matrices(p + "ffn_gate_up_exps.weight", n, 2 * ff, d));
    for (kernels::Matrix m : gu) {
      m.rows = ff;
      w.gate.push_back(m);
      m.data += static_cast<size_t>(ff) * m.row_bytes;
      w.up.push_back(m);
    }
  } else if (stacked || !t.has(p + "ffn_gate.0.weight")) {
    KEEL_ASSIGN_OR_RETURN(w.gate, t.matrices(p + "ffn_gate_exps.weight", n, ff, d));
    KEEL_ASSIGN_OR_RETURN(w.up, t.matrices(p + "ffn_up_exps.weight", n, ff, d));
  } else {  // older Mixtral files: one tensor per expert
    KEEL_ASSIGN_OR_RETURN(w.gate, per_expert(t, p, "ffn_gate", n, ff, d));
    KEEL_ASSIGN_OR_RETURN(w.up, per_expert(t, p, "ffn_up", n, ff, d));
    KEEL_ASSIGN_OR_RETURN(w.down, per_expert(t, p, "ffn_down", n, d, ff));
    return Status();
  }
  KEEL_ASSIGN_OR_RETURN(w.down, t.matrices(p + "ffn_down_exps.weight", n, d, ff));
  return Status();
}

}  // namespace

Result<MoeWeights> load_moe_layer(TensorLoader& t, const HParams& hp, int64_t il) {
  const std::string p = "blk." + std::to_string(il) + ".";
  MoeWeights w;
  KEEL_ASSIGN_OR_RETURN(w.router, t.matrix(p + "ffn_gate_inp.weight", hp.moe.n_expert, hp.n_embd));
  KEEL_TRY(load_experts(t, hp, p, w));
  if (hp.moe.n_ff_shexp > 0) {
    const int64_t sf = hp.moe.n_ff_shexp;
    KEEL_ASSIGN_OR_RETURN(w.shared_gate, t.matrix(p + "ffn_gate_shexp.weight", sf, hp.n_embd));
    KEEL_ASSIGN_OR_RETURN(w.shared_up, t.matrix(p + "ffn_up_shexp.weight", sf, hp.n_embd));
    KEEL_ASSIGN_OR_RETURN(w.shared_down, t.matrix(p + "ffn_down_shexp.weight", hp.n_embd, sf));
    KEEL_ASSIGN_OR_RETURN(w.shared_router, t.vector(p + "ffn_gate_inp_shexp.weight", hp.n_embd));
  }
  return w;
}

}  // namespace keel::model
