// save_predictor / load_predictor (see predictor_file.h).
#include "predictor/predictor_file.h"

#include <cstring>
#include <span>

#include "gguf/checked_read.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "predictor/features.h"

namespace keel::predictor {
namespace {

constexpr const char* kArch = "keel-length-predictor";
constexpr int64_t kVersion = 1;

constexpr std::string_view kKind = "predictor file";

Status add_f32(gguf::GgufWriter& w, const std::string& name, const std::vector<float>& v,
               std::vector<int64_t> shape) {
  return gguf::add_f32_tensor(w, name, v, std::move(shape));
}
Status bad(const std::string& path, const std::string& what) {
  return gguf::file_error(kKind, path, what);
}
// As gguf::read_f32_tensor; a missing tensor is no error when `optional` (*out left empty).
Status read_f32(const gguf::GgufFile& f, const std::string& name, const std::vector<int64_t>& shape,
                bool optional, std::vector<float>* out) {
  out->clear();
  if (optional && f.find_tensor(name) == nullptr) return Status();
  return gguf::read_f32_tensor(f, kKind, name, shape, out);
}
Result<int64_t> get_int(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  return gguf::read_int_key(f, kKind, key, lo, hi);
}
Result<std::string> get_string(const gguf::GgufFile& f, const std::string& key) {
  return gguf::read_string_key(f, kKind, key);
}

Status read_dataset(const gguf::GgufFile& f, DatasetSpec* d) {
  constexpr int64_t kBig = int64_t{1} << 30;
  const std::string p = "keel.predictor.dataset.";
  KEEL_ASSIGN_OR_RETURN(d->num_prompts, get_int(f, p + "prompts", 1, kBig));
  KEEL_ASSIGN_OR_RETURN(d->min_prompt_tokens, get_int(f, p + "min_prompt_tokens", 2, kBig));
  KEEL_ASSIGN_OR_RETURN(d->max_prompt_tokens, get_int(f, p + "max_prompt_tokens", 2, kBig));
  KEEL_ASSIGN_OR_RETURN(d->max_new_tokens, get_int(f, p + "max_new_tokens", 1, kBig));
  KEEL_ASSIGN_OR_RETURN(d->top_k, get_int(f, p + "top_k", 0, kBig));
  KEEL_ASSIGN_OR_RETURN(d->heldout_every, get_int(f, p + "heldout_every", 2, kBig));
  KEEL_ASSIGN_OR_RETURN(int64_t seed, get_int(f, p + "seed", 0, INT64_MAX));
  d->seed = static_cast<uint64_t>(seed);
  Result<double> t = f.get_float(p + "temperature");
  if (!t.ok()) return bad(f.path(), t.error().message());
  d->temperature = static_cast<float>(*t);
  Status s = d->validate();
  return s.ok() ? s : bad(f.path(), s.message());
}

}  // namespace

Status save_predictor(const PredictorFile& file, const std::string& path) {
  const LengthHead& h = file.head;
  KEEL_TRY(h.validate());
  KEEL_TRY(file.dataset.validate());
  gguf::GgufWriter w;
  w.set("general.architecture", kArch);
  w.set("keel.predictor.version", int64_t{kVersion});
  w.set("keel.predictor.command", file.command);
  w.set("keel.predictor.bucket_width", int64_t{h.buckets.width});
  w.set("keel.predictor.max_tokens", int64_t{h.buckets.max_tokens});
  w.set("keel.predictor.hidden", int64_t{h.hidden});
  w.set("keel.predictor.majority_bucket", int64_t{file.majority_bucket});
  w.set("keel.predictor.feature_model.name", file.feature_model);
  w.set("keel.predictor.feature_model.n_embd", file.feature_n_embd);
  w.set("keel.predictor.feature_model.n_vocab", file.feature_n_vocab);
  w.set("keel.predictor.served_model", file.served_model);
  const DatasetSpec& d = file.dataset;
  const std::string p = "keel.predictor.dataset.";
  w.set(p + "prompts", int64_t{d.num_prompts});
  w.set(p + "min_prompt_tokens", int64_t{d.min_prompt_tokens});
  w.set(p + "max_prompt_tokens", int64_t{d.max_prompt_tokens});
  w.set(p + "max_new_tokens", int64_t{d.max_new_tokens});
  w.set(p + "temperature", double{d.temperature});
  w.set(p + "top_k", int64_t{d.top_k});
  w.set(p + "seed", static_cast<int64_t>(d.seed));
  w.set(p + "heldout_every", int64_t{d.heldout_every});
  const int64_t b = h.num_buckets();
  KEEL_TRY(add_f32(w, "feature_mean", h.feature_mean, {h.input_dim}));
  KEEL_TRY(add_f32(w, "feature_scale", h.feature_scale, {h.input_dim}));
  if (h.hidden > 0) {
    KEEL_TRY(add_f32(w, "w1", h.w1, {h.input_dim, h.hidden}));
    KEEL_TRY(add_f32(w, "b1", h.b1, {h.hidden}));
  }
  KEEL_TRY(add_f32(w, "w2", h.w2, {h.last_dim(), b}));
  KEEL_TRY(add_f32(w, "b2", h.b2, {b}));
  return w.write(path);
}

Result<PredictorFile> load_predictor(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(
      const gguf::GgufFile f,
      gguf::open_keel_file(path, kKind, kArch, "keel.predictor.version", kVersion));
  PredictorFile out;
  LengthHead& h = out.head;
  constexpr int64_t kMax = LengthBuckets::kMaxTokens;
  KEEL_ASSIGN_OR_RETURN(h.buckets.width, get_int(f, "keel.predictor.bucket_width", 1, kMax));
  KEEL_ASSIGN_OR_RETURN(h.buckets.max_tokens, get_int(f, "keel.predictor.max_tokens", 1, kMax));
  Status bs = h.buckets.validate();
  if (!bs.ok()) return bad(path, bs.message());
  KEEL_ASSIGN_OR_RETURN(h.hidden, get_int(f, "keel.predictor.hidden", 0, 4096));
  KEEL_ASSIGN_OR_RETURN(out.majority_bucket, get_int(f, "keel.predictor.majority_bucket", 0,
                                                     h.buckets.num_buckets() - 1));
  KEEL_ASSIGN_OR_RETURN(out.feature_model, get_string(f, "keel.predictor.feature_model.name"));
  KEEL_ASSIGN_OR_RETURN(out.feature_n_embd,
                        get_int(f, "keel.predictor.feature_model.n_embd", 1, 1 << 15));
  KEEL_ASSIGN_OR_RETURN(out.feature_n_vocab,
                        get_int(f, "keel.predictor.feature_model.n_vocab", 1, 1 << 24));
  KEEL_ASSIGN_OR_RETURN(out.served_model, get_string(f, "keel.predictor.served_model"));
  KEEL_ASSIGN_OR_RETURN(out.command, get_string(f, "keel.predictor.command"));
  KEEL_TRY(read_dataset(f, &out.dataset));
  if (out.dataset.max_new_tokens != h.buckets.max_tokens) {
    return bad(path, "the buckets' max tokens differ from the dataset's max new tokens");
  }
  h.input_dim = FeatureExtractor::dim_for(out.feature_n_embd);
  const int64_t b = h.buckets.num_buckets();
  KEEL_TRY(read_f32(f, "feature_mean", {h.input_dim}, false, &h.feature_mean));
  KEEL_TRY(read_f32(f, "feature_scale", {h.input_dim}, false, &h.feature_scale));
  KEEL_TRY(read_f32(f, "w1", {h.input_dim, h.hidden}, h.hidden == 0, &h.w1));
  KEEL_TRY(read_f32(f, "b1", {h.hidden}, h.hidden == 0, &h.b1));
  KEEL_TRY(read_f32(f, "w2", {h.last_dim(), b}, false, &h.w2));
  KEEL_TRY(read_f32(f, "b2", {b}, false, &h.b2));
  Status hs = h.validate();
  if (!hs.ok()) return bad(path, hs.message());
  return out;
}

}  // namespace keel::predictor
