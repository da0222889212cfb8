// LoraAdapter::load: header checks, A/B pairing by base tensor name, shape and rank validation
// against the base model; the content digest is lora_content_digest (lora_summary.h).
#include "model/lora_adapter.h"

#include "model/lora_summary.h"

#include <cmath>
#include <cstring>
#include <map>

namespace keel::model {
namespace {

constexpr std::array<std::string_view, kNumLoraTargets> kTargetNames = {"q",    "k",  "v",   "o",
                                                                        "gate", "up", "down"};
constexpr std::array<std::string_view, kNumLoraTargets> kTensorNames = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

const kernels::Matrix& base_matrix(const LayerWeights& w, LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ:
      return w.wq;
    case LoraTarget::kK:
      return w.wk;
    case LoraTarget::kV:
      return w.wv;
    case LoraTarget::kO:
      return w.wo;
    case LoraTarget::kGate:
      return w.w_gate;
    case LoraTarget::kUp:
      return w.w_up;
    case LoraTarget::kDown:
      return w.w_down;
  }
  KEEL_CHECK_MSG(false, "unknown LoRA target");
  return w.wq;
}

std::string lora_shape_string(const std::vector<int64_t>& shape) {
  std::string s = "{";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "}";
}

// "blk.<il>.<tensor>.weight" → (il, target); nullopt for any other name.
std::optional<std::pair<int64_t, LoraTarget>> parse_base_name(const std::string& name) {
  constexpr std::string_view kPrefix = "blk.", kSuffix = ".weight";
  if (name.rfind(kPrefix, 0) != 0 || name.size() <= kPrefix.size() + kSuffix.size() ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  const size_t dot = name.find('.', kPrefix.size());
  if (dot == std::string::npos || dot == kPrefix.size() || dot - kPrefix.size() > 6) {
    return std::nullopt;
  }
  int64_t il = 0;
  for (size_t i = kPrefix.size(); i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    il = il * 10 + (name[i] - '0');
  }
  const std::string tensor = name.substr(dot + 1, name.size() - kSuffix.size() - dot - 1);
  for (size_t t = 0; t < kNumLoraTargets; ++t) {
    if (tensor == kTensorNames[t]) return std::make_pair(il, static_cast<LoraTarget>(t));
  }
  return std::nullopt;
}

// An F32 matrix of the tensor: a view of the file's bytes when they are F32, else its values
// widened into `owned` (F16/BF16 adapters run in F32: exact products, as if merged in F32).
kernels::Matrix view(const gguf::GgufFile& file, const gguf::TensorInfo& info,
                     std::vector<std::vector<float>>* owned) {
  kernels::Matrix m;
  m.dtype = DType::kF32;
  m.cols = info.shape[0];
  m.rows = info.shape[1];
  m.row_bytes = dtype_row_bytes(DType::kF32, m.cols);
  const auto bytes = file.tensor_data(info);
  if (info.dtype == DType::kF32) {
    m.data = bytes.data();
    return m;
  }
  std::vector<float>& f = owned->emplace_back(static_cast<size_t>(m.rows * m.cols));
  const size_t src_row = dtype_row_bytes(info.dtype, m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    kernels::dequantize_row(info.dtype, bytes.data() + static_cast<size_t>(r) * src_row,
                            f.data() + r * m.cols, m.cols);
  }
  m.data = reinterpret_cast<const std::byte*>(f.data());
  return m;
}

}  // namespace

std::string_view lora_target_name(LoraTarget t) { return kTargetNames[static_cast<size_t>(t)]; }

std::optional<LoraTarget> lora_target_from_name(std::string_view name) {
  for (size_t t = 0; t < kNumLoraTargets; ++t) {
    if (name == kTargetNames[t]) return static_cast<LoraTarget>(t);
  }
  return std::nullopt;
}

std::string lora_base_tensor_name(LoraTarget t, int64_t il) {
  return "blk." + std::to_string(il) + "." + std::string(kTensorNames[static_cast<size_t>(t)]) +
         ".weight";
}

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::open(const std::string& path, const Model& base,
                                                       float scale) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::open(path));
  return load(std::move(file), base, scale);
}

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::load(gguf::GgufFile file, const Model& base,
                                                       float scale) {
  if (!file.has_data() && !file.tensors().empty()) {
    return Status::invalid_argument(file.path() + ": the adapter was opened without its data");
  }
  if (!std::isfinite(scale)) {
    return Status::invalid_argument(file.path() + ": the adapter scale must be finite");
  }
  std::unique_ptr<LoraAdapter> a(new LoraAdapter(std::move(file)));
  KEEL_TRY(a->validate_header(base));
  if (const gguf::Value* alpha = a->file_.find("adapter.lora.alpha"); alpha != nullptr) {
    KEEL_ASSIGN_OR_RETURN(const double v, a->file_.get_float("adapter.lora.alpha"));
    if (!std::isfinite(v)) {
      return Status::invalid_argument(a->path() + ": adapter.lora.alpha is not finite");
    }
    a->alpha_ = static_cast<float>(v);
  }
  KEEL_TRY(a->bind_tensors(base));
  a->effective_scale_ =
      a->alpha_ != 0.0f ? scale * a->alpha_ / static_cast<float>(a->rank_) : scale;
  a->digest_ = lora_content_digest(a->file_, a->effective_scale_);
  return a;
}

Status LoraAdapter::validate_header(const Model& base) const {
  const std::string& p = path();
  Result<std::string> type = file_.get_string("general.type");
  if (!type.ok() || *type != "adapter") {
    return Status::invalid_argument(p + ": not a LoRA adapter (general.type is " +
                                    (type.ok() ? "'" + *type + "'" : "missing") +
                                    ", expected 'adapter')");
  }
  Result<std::string> kind = file_.get_string("adapter.type");
  if (!kind.ok() || *kind != "lora") {
    return Status::invalid_argument(p + ": not a LoRA adapter (adapter.type is " +
                                    (kind.ok() ? "'" + *kind + "'" : "missing") +
                                    ", expected 'lora')");
  }
  Result<std::string> arch = file_.get_string("general.architecture");
  Result<std::string> base_arch = base.file().get_string("general.architecture");
  if (!arch.ok()) return Status::invalid_argument(p + ": general.architecture is missing");
  if (base_arch.ok() && *arch != *base_arch) {
    return Status::invalid_argument(p + ": the adapter is for architecture '" + *arch +
                                    "', the base model is '" + *base_arch + "'");
  }
  return Status();
}

Status LoraAdapter::bind_tensors(const Model& base) {
  const std::string& p = path();
  // Pairs by base name, in name order (the digest must not depend on the file's tensor order).
  std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> pairs;
  for (const gguf::TensorInfo& t : file_.tensors()) {
    const bool is_a = t.name.ends_with(".lora_a"), is_b = t.name.ends_with(".lora_b");
    if (!is_a && !is_b) {
      return Status::invalid_argument(p + ": tensor '" + t.name +
                                      "' is neither a .lora_a nor a .lora_b tensor");
    }
    auto& pair = pairs[t.name.substr(0, t.name.size() - 7)];
    (is_a ? pair.first : pair.second) = &t;
  }
  if (pairs.empty()) return Status::invalid_argument(p + ": the adapter has no tensors");
  const HParams& hp = base.hparams();
  layers_.assign(static_cast<size_t>(hp.n_layer), LoraLayer{});
  Status status;
  for (const auto& [name, pair] : pairs) {
    const auto [ta, tb] = pair;
    if (ta == nullptr || tb == nullptr) {
      status =
          Status::invalid_argument(p + ": '" + name + "' has a " + (ta ? ".lora_a" : ".lora_b") +
                                   " tensor but no " + (ta ? ".lora_b" : ".lora_a"));
      break;
    }
    const auto target = parse_base_name(name);
    if (!target || target->first >= hp.n_layer) {
      status = Status::invalid_argument(
          p + ": '" + name +
          "' names no matrix keel can adapt (blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,"
          "ffn_up,ffn_down}.weight with N < " +
          std::to_string(hp.n_layer) + ")");
      break;
    }
    for (const gguf::TensorInfo* t : {ta, tb}) {
      if (status.ok() && t->dtype != DType::kF32 && t->dtype != DType::kF16 &&
          t->dtype != DType::kBF16) {
        status = Status::unsupported(p + ": " + t->name + " has type " +
                                     std::string(dtype_name(t->dtype)) +
                                     " (LoRA tensors must be F32, F16 or BF16)");
      }
    }
    if (!status.ok()) break;
    const kernels::Matrix& w =
        base_matrix(base.weights().layers[size_t(target->first)], target->second);
    if (w.rows == 0) {  // an MoE model's FFN: experts, not one matrix
      status = Status::unsupported(p + ": '" + name +
                                   "' targets the FFN of a mixture-of-experts model; keel applies "
                                   "LoRA to an MoE model's attention projections only");
      break;
    }
    if (ta->shape.size() != 2 || tb->shape.size() != 2 || ta->shape[0] != w.cols ||
        tb->shape[1] != w.rows || ta->shape[1] != tb->shape[0] || ta->shape[1] < 1) {
      status = Status::invalid_argument(
          p + ": '" + name + "' has lora_a " + lora_shape_string(ta->shape) + " and lora_b " +
          lora_shape_string(tb->shape) + "; the base matrix {" + std::to_string(w.cols) + ", " +
          std::to_string(w.rows) + "} needs lora_a {" + std::to_string(w.cols) +
          ", rank} and lora_b {rank, " + std::to_string(w.rows) + "} (GGML order)");
      break;
    }
    if (rank_ != 0 && ta->shape[1] != rank_) {
      status =
          Status::invalid_argument(p + ": '" + name + "' has rank " + std::to_string(ta->shape[1]) +
                                   ", other tensors rank " + std::to_string(rank_));
      break;
    }
    rank_ = ta->shape[1];
    layers_[size_t(target->first)][size_t(target->second)] =
        LoraPair{view(file_, *ta, &widened_), view(file_, *tb, &widened_)};
    for (const gguf::TensorInfo* t : {ta, tb}) num_bytes_ += file_.tensor_data(*t).size();
  }
  return status;
}

std::string LoraAdapter::targets_string() const {
  std::string out;
  for (size_t t = 0; t < kNumLoraTargets; ++t) {
    for (const LoraLayer& l : layers_) {
      if (!l[t]) continue;
      out += (out.empty() ? "" : ",") + std::string(kTargetNames[t]);
      break;
    }
  }
  return out;
}

}  // namespace keel::model
