// save_draft_head / read_draft_head / load_draft_head (see draft_head_file.h).
#include "draft/draft_head_file.h"

#include <cstring>
#include <span>

#include "draft/target_digest.h"
#include "gguf/checked_read.h"
#include "gguf/reader.h"
#include "gguf/writer.h"

namespace keel::draft {
namespace {

constexpr const char* kArch = "keel-draft-head";

constexpr std::string_view kKind = "draft head";

Status bad(const std::string& path, const std::string& what) {
  return gguf::file_error(kKind, path, what);
}
Status add_f32(gguf::GgufWriter& w, const std::string& name, const std::vector<float>& v,
               std::vector<int64_t> shape) {
  return gguf::add_f32_tensor(w, name, v, std::move(shape));
}
Status read_f32(const gguf::GgufFile& f, const std::string& name, const std::vector<int64_t>& shape,
                std::vector<float>* out) {
  return gguf::read_f32_tensor(f, kKind, name, shape, out);
}
Result<int64_t> get_int(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  return gguf::read_int_key(f, kKind, key, lo, hi);
}
Result<double> get_float(const gguf::GgufFile& f, const std::string& key) {
  return gguf::read_float_key(f, kKind, key);
}
Result<std::string> get_string(const gguf::GgufFile& f, const std::string& key) {
  return gguf::read_string_key(f, kKind, key);
}

Status read_train_info(const gguf::GgufFile& f, DraftTrainInfo* t) {
  constexpr int64_t kBig = int64_t{1} << 40;
  KEEL_ASSIGN_OR_RETURN(t->tokens, get_int(f, "keel.draft.train.tokens", 0, kBig));
  KEEL_ASSIGN_OR_RETURN(t->epochs, get_int(f, "keel.draft.train.epochs", 0, kBig));
  KEEL_ASSIGN_OR_RETURN(int64_t seed, get_int(f, "keel.draft.train.seed", 0, INT64_MAX));
  t->seed = static_cast<uint64_t>(seed);
  KEEL_ASSIGN_OR_RETURN(t->loss, get_float(f, "keel.draft.train.loss"));
  KEEL_ASSIGN_OR_RETURN(t->accuracy, get_float(f, "keel.draft.train.accuracy"));
  return Status();
}

}  // namespace

std::string default_draft_head_path(const std::string& model_path) {
  constexpr std::string_view kExt = ".gguf";
  std::string stem = model_path;
  if (stem.size() > kExt.size() && stem.ends_with(kExt)) stem.resize(stem.size() - kExt.size());
  return stem + ".draft.gguf";
}

Status save_draft_head(const DraftHeadFile& file, const std::string& path) {
  const DraftHeadWeights& h = file.weights;
  KEEL_TRY(h.validate());
  gguf::GgufWriter w;
  w.set("general.architecture", kArch);
  w.set("keel.draft.version", int64_t{kDraftHeadVersion});
  w.set("keel.draft.n_embd", h.n_embd);
  w.set("keel.draft.hidden", h.hidden);
  w.set("keel.draft.n_vocab", file.n_vocab);
  w.set("keel.draft.rms_eps", double{h.rms_eps});
  w.set("keel.draft.target.digest", digest_hex(file.target_digest));
  w.set("keel.draft.target.name", file.target_name);
  w.set("keel.draft.train.tokens", file.train.tokens);
  w.set("keel.draft.train.epochs", file.train.epochs);
  w.set("keel.draft.train.seed", static_cast<int64_t>(file.train.seed));
  w.set("keel.draft.train.loss", file.train.loss);
  w.set("keel.draft.train.accuracy", file.train.accuracy);
  w.set("keel.draft.command", file.command);
  const int64_t d = h.n_embd, hid = h.hidden;
  KEEL_TRY(add_f32(w, "fc_in.weight", h.w_in, {2 * d, d}));
  KEEL_TRY(add_f32(w, "fc_in.bias", h.b_in, {d}));
  KEEL_TRY(add_f32(w, "up.weight", h.w_up, {d, hid}));
  KEEL_TRY(add_f32(w, "up.bias", h.b_up, {hid}));
  KEEL_TRY(add_f32(w, "down.weight", h.w_down, {hid, d}));
  KEEL_TRY(add_f32(w, "down.bias", h.b_down, {d}));
  KEEL_TRY(add_f32(w, "norm.weight", h.norm, {d}));
  return w.write(path);
}

Result<DraftHeadFile> read_draft_head(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(
      const gguf::GgufFile f,
      gguf::open_keel_file(path, kKind, kArch, "keel.draft.version", kDraftHeadVersion));
  DraftHeadFile out;
  DraftHeadWeights& h = out.weights;
  KEEL_ASSIGN_OR_RETURN(h.n_embd, get_int(f, "keel.draft.n_embd", 1, 1 << 16));
  KEEL_ASSIGN_OR_RETURN(h.hidden, get_int(f, "keel.draft.hidden", 1, kMaxDraftHidden));
  KEEL_ASSIGN_OR_RETURN(out.n_vocab, get_int(f, "keel.draft.n_vocab", 1, 1 << 24));
  KEEL_ASSIGN_OR_RETURN(double eps, get_float(f, "keel.draft.rms_eps"));
  h.rms_eps = static_cast<float>(eps);
  KEEL_ASSIGN_OR_RETURN(std::string digest, get_string(f, "keel.draft.target.digest"));
  char* end = nullptr;
  out.target_digest = std::strtoull(digest.c_str(), &end, 16);
  if (digest.size() != 16 || end != digest.c_str() + digest.size()) {
    return bad(path, "keel.draft.target.digest is not 16 hex digits");
  }
  KEEL_ASSIGN_OR_RETURN(out.target_name, get_string(f, "keel.draft.target.name"));
  KEEL_ASSIGN_OR_RETURN(out.command, get_string(f, "keel.draft.command"));
  KEEL_TRY(read_train_info(f, &out.train));
  const int64_t d = h.n_embd, hid = h.hidden;
  KEEL_TRY(read_f32(f, "fc_in.weight", {2 * d, d}, &h.w_in));
  KEEL_TRY(read_f32(f, "fc_in.bias", {d}, &h.b_in));
  KEEL_TRY(read_f32(f, "up.weight", {d, hid}, &h.w_up));
  KEEL_TRY(read_f32(f, "up.bias", {hid}, &h.b_up));
  KEEL_TRY(read_f32(f, "down.weight", {hid, d}, &h.w_down));
  KEEL_TRY(read_f32(f, "down.bias", {d}, &h.b_down));
  KEEL_TRY(read_f32(f, "norm.weight", {d}, &h.norm));
  if (Status s = h.validate(); !s.ok()) return bad(path, s.message());
  return out;
}

Result<std::unique_ptr<DraftHead>> load_draft_head(const std::string& path,
                                                   const model::Model& target) {
  KEEL_ASSIGN_OR_RETURN(DraftHeadFile file, read_draft_head(path));
  const model::HParams& hp = target.hparams();
  if (file.weights.n_embd != hp.n_embd || file.n_vocab != hp.n_vocab) {
    return bad(path, "trained for a model with n_embd " + std::to_string(file.weights.n_embd) +
                         " and " + std::to_string(file.n_vocab) + " tokens (" + file.target_name +
                         "), not " + std::to_string(hp.n_embd) + " and " +
                         std::to_string(hp.n_vocab));
  }
  const uint64_t digest = target_digest(target);
  if (file.target_digest != digest) {
    return bad(path, "trained for another model (" + file.target_name + ", target digest " +
                         digest_hex(file.target_digest) + "), not this one (digest " +
                         digest_hex(digest) + "); train one with keel train-draft");
  }
  return std::make_unique<DraftHead>(std::move(file.weights), target);
}

}  // namespace keel::draft
