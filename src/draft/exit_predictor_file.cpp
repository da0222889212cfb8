// save_exit_predictors / read_exit_predictors / load_exit_predictors (see exit_predictor_file.h).
#include "draft/exit_predictor_file.h"

#include <cmath>
#include <cstdlib>

#include "draft/target_digest.h"
#include "gguf/checked_read.h"
#include "gguf/reader.h"
#include "gguf/writer.h"

namespace keel::draft {
namespace {

constexpr const char* kExitArch = "keel-exit-predictors";
constexpr std::string_view kExitKind = "exit predictor file";

Status bad_exit_file(const std::string& path, const std::string& what) {
  return gguf::file_error(kExitKind, path, what);
}
Result<int64_t> get_exit_int(const gguf::GgufFile& f, const std::string& key, int64_t lo,
                             int64_t hi) {
  return gguf::read_int_key(f, kExitKind, key, lo, hi);
}
std::string exit_blk(size_t l, const char* name) { return "blk." + std::to_string(l) + "." + name; }

Status read_layers(const gguf::GgufFile& f, ExitPredictors* p) {
  const int64_t h = p->hidden;
  p->layers.resize(static_cast<size_t>(p->n_layer - 1));
  std::vector<float> b2;
  for (size_t l = 0; l < p->layers.size(); ++l) {
    LayerExitPredictor& q = p->layers[l];
    KEEL_TRY(
        gguf::read_f32_tensor(f, kExitKind, exit_blk(l, "fc1.weight"), {kExitFeatures, h}, &q.w1));
    KEEL_TRY(gguf::read_f32_tensor(f, kExitKind, exit_blk(l, "fc1.bias"), {h}, &q.b1));
    KEEL_TRY(gguf::read_f32_tensor(f, kExitKind, exit_blk(l, "fc2.weight"), {h}, &q.w2));
    KEEL_TRY(gguf::read_f32_tensor(f, kExitKind, exit_blk(l, "fc2.bias"), {1}, &b2));
    q.b2 = b2[0];
  }
  return Status();
}

}  // namespace

std::string default_exit_path(const std::string& model_path) {
  constexpr std::string_view kExt = ".gguf";
  std::string stem = model_path;
  if (stem.size() > kExt.size() && stem.ends_with(kExt)) stem.resize(stem.size() - kExt.size());
  return stem + ".exit.gguf";
}

Status save_exit_predictors(const ExitPredictorFile& file, const std::string& path) {
  const ExitPredictors& p = file.predictors;
  KEEL_TRY(p.validate());
  if (static_cast<int64_t>(file.accuracy.size()) != p.n_layer - 1) {
    return Status::invalid_argument("exit predictor file: one accuracy per predictor expected");
  }
  gguf::GgufWriter w;
  w.set("general.architecture", kExitArch);
  w.set("keel.exit.version", int64_t{kExitFileVersion});
  w.set("keel.exit.n_layer", p.n_layer);
  w.set("keel.exit.n_embd", file.n_embd);
  w.set("keel.exit.n_vocab", file.n_vocab);
  w.set("keel.exit.hidden", p.hidden);
  w.set("keel.exit.candidates", int64_t{kExitCandidates});
  w.set("keel.exit.target.digest", digest_hex(file.target_digest));
  w.set("keel.exit.target.name", file.target_name);
  w.set("keel.exit.train.tokens", file.train_tokens);
  w.set("keel.exit.train.epochs", file.train_epochs);
  w.set("keel.exit.train.seed", static_cast<int64_t>(file.train_seed));
  w.set("keel.exit.command", file.command);
  std::vector<std::vector<float>> b2(p.layers.size());  // alive until write()
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerExitPredictor& q = p.layers[l];
    b2[l] = {q.b2};
    KEEL_TRY(gguf::add_f32_tensor(w, exit_blk(l, "fc1.weight"), q.w1, {kExitFeatures, p.hidden}));
    KEEL_TRY(gguf::add_f32_tensor(w, exit_blk(l, "fc1.bias"), q.b1, {p.hidden}));
    KEEL_TRY(gguf::add_f32_tensor(w, exit_blk(l, "fc2.weight"), q.w2, {p.hidden}));
    KEEL_TRY(gguf::add_f32_tensor(w, exit_blk(l, "fc2.bias"), b2[l], {1}));
  }
  const std::vector<float> counts(p.exit_counts.begin(), p.exit_counts.end());
  KEEL_TRY(gguf::add_f32_tensor(w, "exit_counts", counts, {p.n_layer}));
  KEEL_TRY(gguf::add_f32_tensor(w, "accuracy", file.accuracy, {p.n_layer - 1}));
  return w.write(path);
}

Result<ExitPredictorFile> read_exit_predictors(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(
      const gguf::GgufFile f,
      gguf::open_keel_file(path, kExitKind, kExitArch, "keel.exit.version", kExitFileVersion));
  ExitPredictorFile out;
  ExitPredictors& p = out.predictors;
  KEEL_ASSIGN_OR_RETURN(p.n_layer, get_exit_int(f, "keel.exit.n_layer", 2, 4096));
  KEEL_ASSIGN_OR_RETURN(out.n_embd, get_exit_int(f, "keel.exit.n_embd", 1, 1 << 16));
  KEEL_ASSIGN_OR_RETURN(out.n_vocab, get_exit_int(f, "keel.exit.n_vocab", 1, 1 << 24));
  KEEL_ASSIGN_OR_RETURN(p.hidden, get_exit_int(f, "keel.exit.hidden", 1, kMaxExitHidden));
  KEEL_TRY(get_exit_int(f, "keel.exit.candidates", kExitCandidates, kExitCandidates).status());
  KEEL_ASSIGN_OR_RETURN(std::string digest,
                        gguf::read_string_key(f, kExitKind, "keel.exit.target.digest"));
  char* end = nullptr;
  out.target_digest = std::strtoull(digest.c_str(), &end, 16);
  if (digest.size() != 16 || end != digest.c_str() + digest.size()) {
    return bad_exit_file(path, "keel.exit.target.digest is not 16 hex digits");
  }
  KEEL_ASSIGN_OR_RETURN(out.target_name,
                        gguf::read_string_key(f, kExitKind, "keel.exit.target.name"));
  KEEL_ASSIGN_OR_RETURN(out.command, gguf::read_string_key(f, kExitKind, "keel.exit.command"));
  constexpr int64_t kBig = int64_t{1} << 40;
  KEEL_ASSIGN_OR_RETURN(out.train_tokens, get_exit_int(f, "keel.exit.train.tokens", 0, kBig));
  KEEL_ASSIGN_OR_RETURN(out.train_epochs, get_exit_int(f, "keel.exit.train.epochs", 0, kBig));
  KEEL_ASSIGN_OR_RETURN(int64_t seed, get_exit_int(f, "keel.exit.train.seed", 0, INT64_MAX));
  out.train_seed = static_cast<uint64_t>(seed);
  KEEL_TRY(read_layers(f, &p));
  std::vector<float> counts;
  KEEL_TRY(gguf::read_f32_tensor(f, kExitKind, "exit_counts", {p.n_layer}, &counts));
  for (float c : counts) {
    if (!(c >= 0.0f) || c > 1e15f || c != std::floor(c)) {
      return bad_exit_file(path, "exit_counts must hold whole non-negative counts");
    }
    p.exit_counts.push_back(static_cast<int64_t>(c));
  }
  KEEL_TRY(gguf::read_f32_tensor(f, kExitKind, "accuracy", {p.n_layer - 1}, &out.accuracy));
  if (Status s = p.validate(); !s.ok()) return bad_exit_file(path, s.message());
  return out;
}

Result<ExitPredictorFile> load_exit_predictors(const std::string& path,
                                               const model::Model& target) {
  KEEL_ASSIGN_OR_RETURN(ExitPredictorFile file, read_exit_predictors(path));
  const model::HParams& hp = target.hparams();
  if (file.predictors.n_layer != hp.n_layer || file.n_embd != hp.n_embd ||
      file.n_vocab != hp.n_vocab) {
    return bad_exit_file(path, "trained for a model of " + std::to_string(file.predictors.n_layer) +
                                   " layers, n_embd " + std::to_string(file.n_embd) + " and " +
                                   std::to_string(file.n_vocab) + " tokens (" + file.target_name +
                                   "), not " + std::to_string(hp.n_layer) + ", " +
                                   std::to_string(hp.n_embd) + " and " +
                                   std::to_string(hp.n_vocab));
  }
  const uint64_t digest = target_digest(target);
  if (file.target_digest != digest) {
    return bad_exit_file(path, "trained for another model (" + file.target_name +
                                   ", target digest " + digest_hex(file.target_digest) +
                                   "), not this one (digest " + digest_hex(digest) +
                                   "); train them with keel train-exit");
  }
  return file;
}

}  // namespace keel::draft
