// reference_logits: a deliberately plain double-precision Llama-family forward pass over a
// TinyModel's stored values (one sequence, one token at a time), used to check keel's forward.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tiny_model.h"

namespace keel::model::testing {
namespace {

using Vec = std::vector<double>;

class Reference {
 public:
  explicit Reference(const TinyModel& m) : m_(m), s_(m.spec) {}

  const std::vector<float>& t(const std::string& name) const { return m_.tensors.at(name); }
  bool has(const std::string& name) const { return m_.tensors.contains(name); }

  // y = W x for W [rows][cols]; `matrix` picks matrix i of a 3-D tensor ([n][rows][cols]).
  Vec matvec(const std::string& name, const Vec& x, int64_t rows, int64_t matrix = 0) const {
    const std::vector<float>& w = t(name);
    const auto cols = static_cast<int64_t>(x.size());
    const int64_t base = matrix * rows * cols;
    Vec y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c)
        sum += double{w[static_cast<size_t>(base + r * cols + c)]} * x[static_cast<size_t>(c)];
      y[static_cast<size_t>(r)] = sum;
    }
    return y;
  }

  // SwiGLU: down · (silu(gate · x) ⊙ (up · x)), of matrix `e` of the given tensors.
  Vec swiglu(const std::string& gate, const std::string& up, const std::string& down, const Vec& x,
             int64_t ff, int64_t e = 0) const {
    Vec g = matvec(gate, x, ff, e);
    const Vec u = matvec(up, x, ff, e);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return matvec(down, g, s_.n_embd, e);
  }

  // The mixture-of-experts FFN from the formulas: softmax router, top-k, renormalised except for
  // qwen2moe, weighted sum of the chosen SwiGLU experts, + qwen2moe's sigmoid-gated shared expert.
  Vec moe(const std::string& p, const Vec& x) const {
    Vec prob = matvec(p + "ffn_gate_inp.weight", x, s_.n_expert);
    const double mx = *std::max_element(prob.begin(), prob.end());
    double sum = 0.0;
    for (double& v : prob) sum += (v = std::exp(v - mx));
    for (double& v : prob) v /= sum;
    std::vector<int64_t> order(prob.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return prob[static_cast<size_t>(a)] > prob[static_cast<size_t>(b)];
    });
    double wsum = 0.0;
    for (int64_t j = 0; j < s_.n_expert_used; ++j) wsum += prob[static_cast<size_t>(order[j])];
    const bool renorm = s_.arch != "qwen2moe";
    Vec out(x.size(), 0.0);
    for (int64_t j = 0; j < s_.n_expert_used; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      const double w = prob[static_cast<size_t>(e)] / (renorm ? wsum : 1.0);
      const Vec y = swiglu(p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight",
                           p + "ffn_down_exps.weight", x, s_.n_ff_exp, e);
      for (size_t i = 0; i < out.size(); ++i) out[i] += w * y[i];
    }
    if (s_.n_ff_shexp > 0) {
      const std::vector<float>& gw = t(p + "ffn_gate_inp_shexp.weight");
      double g = 0.0;
      for (size_t i = 0; i < x.size(); ++i) g += gw[i] * x[i];
      const double gate = 1.0 / (1.0 + std::exp(-g));
      const Vec y = swiglu(p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight",
                           p + "ffn_down_shexp.weight", x, s_.n_ff_shexp);
      for (size_t i = 0; i < out.size(); ++i) out[i] += gate * y[i];
    }
    return out;
  }

  // RMSNorm of each `dim`-wide group of x, times weight.
  Vec rms_norm(const Vec& x, const std::string& weight, int64_t dim) const {
    const std::vector<float>& w = t(weight);
    Vec y(x.size());
    for (size_t g = 0; g < x.size(); g += static_cast<size_t>(dim)) {
      double ss = 0.0;
      for (int64_t i = 0; i < dim; ++i)
        ss += x[g + static_cast<size_t>(i)] * x[g + static_cast<size_t>(i)];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(dim) + s_.rms_eps);
      for (int64_t i = 0; i < dim; ++i)
        y[g + static_cast<size_t>(i)] =
            x[g + static_cast<size_t>(i)] * scale * w[static_cast<size_t>(i)];
    }
    return y;
  }

  void add_bias(Vec& x, const std::string& name) const {
    if (!has(name)) return;
    for (size_t i = 0; i < x.size(); ++i) x[i] += t(name)[i];
  }

  void rope_heads(Vec& x, int64_t n_heads, int64_t pos) const {
    double freq_scale = 1.0;
    if (s_.rope_scaling_factor != 0 && s_.rope_scaling_type != "none") {
      freq_scale = 1.0 / s_.rope_scaling_factor;
    }
    const double attn_factor = s_.rope_attn_factor != 0 ? s_.rope_attn_factor : 1.0;
    YarnReference yarn{.mscale = attn_factor};
    if (s_.rope_scaling_type == "yarn") {
      yarn = yarn_reference(s_.n_rot, s_.rope_orig_ctx != 0 ? s_.rope_orig_ctx : s_.n_ctx,
                            s_.freq_base, 1.0 / freq_scale, attn_factor);
    }
    const bool neox = s_.arch != "llama";
    for (int64_t h = 0; h < n_heads; ++h) {
      Vec head(x.begin() + h * s_.head_dim, x.begin() + (h + 1) * s_.head_dim);
      reference_rope(head, pos, s_.n_rot, s_.freq_base, freq_scale, neox, s_.rope_freqs, yarn);
      std::copy(head.begin(), head.end(), x.begin() + h * s_.head_dim);
    }
  }

  Vec attention(const Vec& q, const std::vector<Vec>& keys, const std::vector<Vec>& values) const {
    const int64_t hd = s_.head_dim, group = s_.n_head / s_.n_head_kv;
    Vec out(q.size(), 0.0);
    for (int64_t h = 0; h < s_.n_head; ++h) {
      const int64_t kvh = h / group;
      Vec scores(keys.size());
      double max_s = -1e300;
      for (size_t j = 0; j < keys.size(); ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < hd; ++d)
          dot += q[static_cast<size_t>(h * hd + d)] * keys[j][static_cast<size_t>(kvh * hd + d)];
        scores[j] = dot / std::sqrt(static_cast<double>(hd));
        max_s = std::max(max_s, scores[j]);
      }
      double sum = 0.0;
      for (double& sc : scores) sum += (sc = std::exp(sc - max_s));
      for (size_t j = 0; j < keys.size(); ++j) {
        for (int64_t d = 0; d < hd; ++d) {
          out[static_cast<size_t>(h * hd + d)] +=
              scores[j] / sum * values[j][static_cast<size_t>(kvh * hd + d)];
        }
      }
    }
    return out;
  }

  std::vector<std::vector<float>> run(const std::vector<int32_t>& tokens) const {
    const int64_t q_dim = s_.n_head * s_.head_dim, kv_dim = s_.n_head_kv * s_.head_dim;
    std::vector<std::vector<Vec>> keys(static_cast<size_t>(s_.n_layer)), values(keys.size());
    std::vector<std::vector<float>> logits;
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      const std::vector<float>& e = t("token_embd.weight");
      Vec x(e.begin() + tokens[pos] * s_.n_embd, e.begin() + (tokens[pos] + 1) * s_.n_embd);
      for (int64_t il = 0; il < s_.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const Vec xn = rms_norm(x, p + "attn_norm.weight", s_.n_embd);
        Vec q = matvec(p + "attn_q.weight", xn, q_dim);
        Vec k = matvec(p + "attn_k.weight", xn, kv_dim);
        Vec v = matvec(p + "attn_v.weight", xn, kv_dim);
        add_bias(q, p + "attn_q.bias");
        add_bias(k, p + "attn_k.bias");
        add_bias(v, p + "attn_v.bias");
        if (has(p + "attn_q_norm.weight")) {
          q = rms_norm(q, p + "attn_q_norm.weight", s_.head_dim);
          k = rms_norm(k, p + "attn_k_norm.weight", s_.head_dim);
        }
        rope_heads(q, s_.n_head, static_cast<int64_t>(pos));
        rope_heads(k, s_.n_head_kv, static_cast<int64_t>(pos));
        keys[static_cast<size_t>(il)].push_back(k);
        values[static_cast<size_t>(il)].push_back(v);
        const Vec a = attention(q, keys[static_cast<size_t>(il)], values[static_cast<size_t>(il)]);
        const Vec o = matvec(p + "attn_output.weight", a, s_.n_embd);
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
        const Vec fn = rms_norm(x, p + "ffn_norm.weight", s_.n_embd);
        const Vec dn = s_.n_expert > 0 ? moe(p, fn)
                                       : swiglu(p + "ffn_gate.weight", p + "ffn_up.weight",
                                                p + "ffn_down.weight", fn, s_.n_ff);
        for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
      }
      const Vec xn = rms_norm(x, "output_norm.weight", s_.n_embd);
      const Vec l = matvec(s_.tied_output ? "token_embd.weight" : "output.weight", xn, s_.n_vocab);
      logits.emplace_back(l.begin(), l.end());
    }
    return logits;
  }

 private:
  const TinyModel& m_;
  const TinySpec& s_;
};

}  // namespace

std::vector<std::vector<float>> reference_logits(const TinyModel& model,
                                                 const std::vector<int32_t>& tokens) {
  return Reference(model).run(tokens);
}

}  // namespace keel::model::testing
