// write_embedded_model: reads and checks the embedded model, plans each body tensor as a function
// from a row index to that row's values (placed by EmbedLayout), fills and converts the rows in
// parallel, and writes the GGUF with the embedded model's tokenizer.
#include "model/embedded_model.h"

#include <cmath>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/kernels.h"
#include "model/embed_layout.h"
#include "model/hparams.h"
#include "model/normal_stream.h"
#include "model/weights.h"

namespace keel::model {
namespace {

// The embedded model: its file (which owns the bytes the weight views point into), its
// hyper-parameters and weights. Held by pointer so the views never move.
struct EmbedSource {
  explicit EmbedSource(gguf::GgufFile f) : file(std::move(f)) {}
  gguf::GgufFile file;
  HParams hp;
  Weights w;
  std::string name;  // the file's base name, for messages
};

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The model's own checks, then the construction's: a dense llama without biases or RoPE scaling.
Status check_embeddable(const EmbedSource& s) {
  const std::string& p = s.file.path();
  if (s.hp.is_moe()) {
    return Status::invalid_argument(p + " is a mixture of experts; --embed takes a dense llama");
  }
  if (s.hp.rope.freq_scale != 1.0f || s.hp.rope.ext_factor != 0.0f || s.hp.rope.mscale != 1.0f ||
      !s.w.rope_freqs.empty()) {
    return Status::invalid_argument(p +
                                    " scales its RoPE frequencies; --embed does not carry that");
  }
  for (const LayerWeights& l : s.w.layers) {
    if (!l.bq.empty() || !l.bk.empty() || !l.bv.empty() || !l.bo.empty()) {
      return Status::invalid_argument(p + " has attention biases; --embed takes a llama without");
    }
  }
  return {};
}

Result<std::unique_ptr<EmbedSource>> open_embed_source(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::open(path));
  auto s = std::make_unique<EmbedSource>(std::move(file));
  KEEL_ASSIGN_OR_RETURN(std::string arch, s->file.get_string("general.architecture"));
  if (arch != "llama") {
    return Status::invalid_argument(path + " has architecture '" + arch +
                                    "'; --embed takes a dense llama model");
  }
  KEEL_ASSIGN_OR_RETURN(s->hp, parse_hparams(s->file));
  KEEL_ASSIGN_OR_RETURN(s->hp.n_vocab, read_vocab_size(s->file, s->hp));
  KEEL_ASSIGN_OR_RETURN(s->w, load_weights(s->file, s->hp));
  KEEL_TRY(check_embeddable(*s));
  s->name = base_name(path);
  return s;
}

// One body tensor: row r (of the GGML shape's rows) is produced in F32 by `row`, then converted.
struct BodyTensor {
  std::string name;
  std::vector<int64_t> shape;  // GGML order: {cols, rows}, or {n} for a vector
  DType dtype;
  std::function<void(int64_t r, std::span<float> out)> row;
};

// Row sources of a matrix that reads the residual (besides an embedded row index).
constexpr int64_t kRandomRow = -1;
constexpr int64_t kZeroRow = -2;

// Builds the body's tensors over the layout. Borrows the source and layout, which must outlive
// the returned row functions.
class BodyPlanner {
 public:
  BodyPlanner(const EmbedSource& src, const EmbedLayout& layout, DType weight_type, uint64_t seed)
      : src_(src), l_(layout), wt_(weight_type), seed_(seed) {}

  [[nodiscard]] std::vector<BodyTensor> plan() const;

 private:
  // A matrix of `rows` rows that reads the residual. Row r: source(r) ≥ 0 is the embedded
  // matrix `m`'s row source(r), its column i at residual_slot(i), zeros elsewhere before
  // embd_pad, random values after; kRandomRow is random throughout, kZeroRow zero.
  [[nodiscard]] BodyTensor reads(const std::string& name, int64_t rows, const kernels::Matrix* m,
                                 std::function<int64_t(int64_t)> source) const;
  // A matrix that writes into the residual: row residual_slot(i) is the embedded matrix `m`'s
  // row i (null: an identity layer, all zero) with its column c at column col(c); the rest is
  // zero.
  [[nodiscard]] BodyTensor writes(const std::string& name, int64_t cols, const kernels::Matrix* m,
                                  std::function<int64_t(int64_t)> col) const;
  // A norm weight: the embedded one at the residual slots (null: an identity layer, ones),
  // × norm_scale.
  [[nodiscard]] BodyTensor norm(const std::string& name, const std::vector<float>* w) const;
  void plan_layer(int64_t layer, std::vector<BodyTensor>& out) const;

  const EmbedSource& src_;
  const EmbedLayout& l_;
  DType wt_;
  uint64_t seed_;
};

void dequantize_into(const kernels::Matrix& m, int64_t r, std::span<float> out) {
  kernels::dequantize_row(m.dtype, m.data + static_cast<size_t>(r) * m.row_bytes, out.data(),
                          m.cols);
}

// The embedded matrix's row `r` placed at the residual slots of `out` (other values untouched).
void scatter_to_slots(const EmbedLayout& l, const kernels::Matrix& m, int64_t r,
                      std::span<float> out) {
  std::vector<float> real(static_cast<size_t>(m.cols));
  dequantize_into(m, r, real);
  for (int64_t i = 0; i < m.cols; ++i) {
    out[static_cast<size_t>(l.residual_slot(i))] = real[static_cast<size_t>(i)];
  }
}

BodyTensor BodyPlanner::reads(const std::string& name, int64_t rows, const kernels::Matrix* m,
                              std::function<int64_t(int64_t)> source) const {
  const int64_t cols = l_.wide.n_embd;
  const float std_dev = 1.0f / std::sqrt(static_cast<float>(cols));
  const uint64_t seed = seed_;
  const EmbedLayout* l = &l_;
  return {name,
          {cols, rows},
          wt_,
          [name, m, l, source = std::move(source), std_dev, seed](int64_t r, std::span<float> out) {
            const int64_t from = source(r);
            if (from == kZeroRow) {
              std::fill(out.begin(), out.end(), 0.0f);
              return;
            }
            NormalStream normal = NormalStream::for_row(seed, name, r);
            for (float& v : out) v = std_dev * normal.next();
            if (from == kRandomRow) return;
            std::fill(out.begin(), out.begin() + l->embd_pad, 0.0f);
            scatter_to_slots(*l, *m, from, out);
          }};
}

BodyTensor BodyPlanner::writes(const std::string& name, int64_t cols, const kernels::Matrix* m,
                               std::function<int64_t(int64_t)> col) const {
  const EmbedLayout* l = &l_;
  return {name,
          {cols, l_.wide.n_embd},
          wt_,
          [m, l, col = std::move(col)](int64_t r, std::span<float> out) {
            std::fill(out.begin(), out.end(), 0.0f);
            const int64_t i = m ? l->real_dim(r) : -1;
            if (i < 0) return;
            std::vector<float> real(static_cast<size_t>(m->cols));
            dequantize_into(*m, i, real);
            for (int64_t c = 0; c < m->cols; ++c) {
              out[static_cast<size_t>(col(c))] = real[static_cast<size_t>(c)];
            }
          }};
}

BodyTensor BodyPlanner::norm(const std::string& name, const std::vector<float>* w) const {
  const float scale = w ? l_.norm_scale : 1.0f;
  const EmbedLayout* l = &l_;
  return {name, {l_.wide.n_embd}, DType::kF32, [w, l, scale](int64_t, std::span<float> out) {
            for (size_t c = 0; c < out.size(); ++c) {
              const int64_t i = w ? l->real_dim(static_cast<int64_t>(c)) : -1;
              out[c] = scale * (i >= 0 ? (*w)[static_cast<size_t>(i)] : 1.0f);
            }
          }};
}

void BodyPlanner::plan_layer(int64_t layer, std::vector<BodyTensor>& out) const {
  const std::string b = "blk." + std::to_string(layer) + ".";
  const int64_t src_layer = l_.layer_source[static_cast<size_t>(layer)];
  const LayerWeights* rl =
      src_layer >= 0 ? &src_.w.layers[static_cast<size_t>(src_layer)] : nullptr;
  const EmbedLayout* l = &l_;
  const int64_t hd = l->wide.head_dim;
  const int64_t q_rows = l->wide.n_head * hd, kv_rows = l->wide.n_head_kv * hd;
  // Query row r is head r / hd's: an embedded head's row where the layout puts one.
  auto q_source = [l, rl, hd](int64_t r) {
    const int64_t j = rl ? l->real_head(r / hd) : -1;
    return j < 0 ? kRandomRow : j * hd + r % hd;
  };
  // Embedded KV head g is the body's KV head g.
  auto kv_source = [l, rl, hd](int64_t r) {
    return rl && r < l->real.n_head_kv * hd ? r : kRandomRow;
  };
  // FFN rows: the embedded ones, zero rows to the block's end, random after.
  auto ff_source = [l, rl](int64_t r) {
    if (!rl || r >= l->ff_pad) return kRandomRow;
    return r < l->real.n_ff ? r : kZeroRow;
  };
  auto head_col = [l, hd](int64_t c) { return l->wide_head(c / hd) * hd + c % hd; };
  out.push_back(norm(b + "attn_norm.weight", rl ? &rl->attn_norm : nullptr));
  out.push_back(reads(b + "attn_q.weight", q_rows, rl ? &rl->wq : nullptr, q_source));
  out.push_back(reads(b + "attn_k.weight", kv_rows, rl ? &rl->wk : nullptr, kv_source));
  out.push_back(reads(b + "attn_v.weight", kv_rows, rl ? &rl->wv : nullptr, kv_source));
  out.push_back(writes(b + "attn_output.weight", q_rows, rl ? &rl->wo : nullptr, head_col));
  out.push_back(norm(b + "ffn_norm.weight", rl ? &rl->ffn_norm : nullptr));
  const int64_t ff = l->wide.n_ff;
  out.push_back(reads(b + "ffn_gate.weight", ff, rl ? &rl->w_gate : nullptr, ff_source));
  out.push_back(reads(b + "ffn_up.weight", ff, rl ? &rl->w_up : nullptr, ff_source));
  out.push_back(
      writes(b + "ffn_down.weight", ff, rl ? &rl->w_down : nullptr, [](int64_t c) { return c; }));
}

std::vector<BodyTensor> BodyPlanner::plan() const {
  const Weights& w = src_.w;
  const int64_t n_vocab = src_.hp.n_vocab;
  std::vector<BodyTensor> out;
  // The token embedding writes the residual: the embedded rows at the residual slots, zeros
  // elsewhere.
  const EmbedLayout* l = &l_;
  const Weights* wp = &w;
  out.push_back({"token_embd.weight",
                 {l_.wide.n_embd, n_vocab},
                 wt_,
                 [wp, l](int64_t r, std::span<float> row) {
                   std::fill(row.begin(), row.end(), 0.0f);
                   scatter_to_slots(*l, wp->token_embd, r, row);
                 }});
  for (int64_t layer = 0; layer < l_.wide.n_layer; ++layer) plan_layer(layer, out);
  out.push_back(norm("output_norm.weight", &w.output_norm));
  if (!w.tied_output) {
    out.push_back(reads("output.weight", n_vocab, &w.output, [](int64_t r) { return r; }));
  }
  return out;
}

// Fills one tensor: rows produced in parallel and converted to its type.
Status fill_body_tensor(const BodyTensor& t, ThreadPool& pool, std::span<std::byte> out) {
  const int64_t cols = t.shape[0];
  const int64_t rows = t.shape.size() > 1 ? t.shape[1] : 1;
  const size_t row_bytes = dtype_row_bytes(t.dtype, cols);
  if (out.size() != row_bytes * static_cast<size_t>(rows)) {
    return Status::internal("tensor '" + t.name + "' size mismatch");
  }
  pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      t.row(r, row);
      kernels::quantize_row(t.dtype, row.data(), out.data() + static_cast<size_t>(r) * row_bytes,
                            cols);
    }
  });
  return {};
}

void set_fixture_metadata(const EmbedModelSpec& spec, const EmbedSource& src, const EmbedLayout& l,
                          gguf::GgufWriter& w) {
  const std::string type(dtype_name(spec.weight_type));
  w.set("general.architecture", std::string("llama"));
  w.set("general.name", spec.name.empty() ? "keel " + spec.shape.name + " " + type + " embedding " +
                                                src.name + " (benchmark fixture)"
                                          : spec.name);
  w.set("general.description",
        "benchmark fixture written by keel make-model --embed, not a model: " + src.name +
            "'s function in a " + spec.shape.name + " body of its size and cost");
  w.set("general.file_type", llama_file_type(spec.weight_type));
  for (const auto& kv : src.file.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);
  }
  w.set("keel.benchmark_fixture", true);
  w.set("keel.embedded_model", src.name);
  std::vector<uint32_t> real_layers;
  for (size_t i = 0; i < l.layer_source.size(); ++i) {
    if (l.layer_source[i] >= 0) real_layers.push_back(static_cast<uint32_t>(i));
  }
  w.set("keel.embedded_layers", gguf::make_array(gguf::ValueType::kUint32, real_layers));
  w.set("keel.random_seed", uint64_t{spec.seed});
  const HParams& hp = src.hp;
  w.set("llama.context_length", uint32_t(spec.n_ctx > 0 ? spec.n_ctx : hp.n_ctx_train));
  w.set("llama.embedding_length", uint32_t(l.wide.n_embd));
  w.set("llama.block_count", uint32_t(l.wide.n_layer));
  w.set("llama.feed_forward_length", uint32_t(l.wide.n_ff));
  w.set("llama.attention.head_count", uint32_t(l.wide.n_head));
  w.set("llama.attention.head_count_kv", uint32_t(l.wide.n_head_kv));
  w.set("llama.attention.layer_norm_rms_epsilon", hp.rms_eps * l.eps_scale);
  w.set("llama.rope.freq_base", hp.rope.freq_base);
  w.set("llama.rope.dimension_count", uint32_t(hp.rope.n_rot));
  if (l.wide.n_head * l.wide.head_dim != l.wide.n_embd) {
    w.set("llama.attention.key_length", uint32_t(l.wide.head_dim));
    w.set("llama.attention.value_length", uint32_t(l.wide.head_dim));
  }
}

}  // namespace

Status write_embedded_model(const EmbedModelSpec& spec, const std::string& path, ThreadPool& pool,
                            const std::function<void(size_t, size_t)>& progress) {
  if (!kernels::quantize_supports(spec.weight_type)) {
    return Status::invalid_argument("cannot write weights of type " +
                                    std::string(dtype_name(spec.weight_type)));
  }
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<EmbedSource> src, open_embed_source(spec.embed_path));
  const HParams& hp = src->hp;
  const EmbedDims real{hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_ff};
  KEEL_ASSIGN_OR_RETURN(EmbedLayout layout,
                        plan_embed_layout(real, spec.shape, spec.weight_type, src->name));
  gguf::GgufWriter w;
  set_fixture_metadata(spec, *src, layout, w);
  const BodyPlanner planner(*src, layout, spec.weight_type, spec.seed);
  for (BodyTensor& t : planner.plan()) {
    const DType dtype = t.dtype;
    const std::string name = t.name;
    const std::vector<int64_t> shape = t.shape;
    KEEL_TRY(w.add_tensor(name, dtype, shape, [t = std::move(t), &pool](std::span<std::byte> out) {
      return fill_body_tensor(t, pool, out);
    }));
  }
  return w.write(path, nullptr, progress);
}

}  // namespace keel::model
