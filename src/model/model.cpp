// Model::load: hyper-parameters, vocabulary size, weight views, the expert shard, and the maximum
// sequence length.
#include "model/model.h"

#include <string>
#include <vector>

#include "model/group_weights.h"

namespace keel::model {
namespace {

constexpr int64_t kMaxContextLength = int64_t{1} << 24;

}  // namespace

Status ModelOptions::validate() const {
  if (n_ctx < 0 || n_ctx > kMaxContextLength) {
    return Status::invalid_argument("model option n_ctx = " + std::to_string(n_ctx) +
                                    " is out of range [0, " + std::to_string(kMaxContextLength) +
                                    "]");
  }
  return expert_shard.validate().with_prefix("model option expert_shard");
}

Result<std::unique_ptr<Model>> Model::load(gguf::GgufFile file, const ModelOptions& options) {
  KEEL_TRY(options.validate());
  std::unique_ptr<Model> m(new Model(std::move(file)));
  KEEL_ASSIGN_OR_RETURN(m->hparams_, parse_hparams(m->file_));
  KEEL_ASSIGN_OR_RETURN(m->hparams_.n_vocab, read_vocab_size(m->file_, m->hparams_));
  KEEL_ASSIGN_OR_RETURN(m->weights_, load_weights(m->file_, m->hparams_));
  KEEL_TRY(mark_pregrouped(m->file_, m->weights_));  // a store entry's bytes come grouped
  m->expert_shard_ = options.expert_shard;
  if (!options.expert_shard.whole()) {
    if (!m->hparams_.is_moe()) {
      return Status::invalid_argument(m->file_.path() +
                                      ": an expert shard needs a mixture-of-experts model");
    }
    // After mark_pregrouped (which checks its list against every view), before grouping (which
    // then rewrites only the kept views: the skipped bytes were never read).
    apply_expert_shard(m->weights_, options.expert_shard);
  }
  if (options.group_weights) group_weights(m->file_, m->weights_);
  if (!m->weights_.rope_freqs.empty()) {
    m->hparams_.rope.freq_factors = m->weights_.rope_freqs.data();
  }
  m->n_ctx_ = options.n_ctx > 0 ? options.n_ctx : m->hparams_.n_ctx_train;
  return m;
}

Result<std::unique_ptr<Model>> Model::open(const std::string& path, const ModelOptions& options,
                                           gguf::DataMode mode) {
  KEEL_TRY(options.validate());
  gguf::ReadOptions read;
  read.mode = mode;
  if (mode == gguf::DataMode::kRead && !options.expert_shard.whole()) {
    read.skip = [shard = options.expert_shard](const std::vector<gguf::TensorInfo>& tensors) {
      return expert_shard_skips(tensors, shard);
    };
  }
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::open(path, read));
  return load(std::move(file), options);
}

}  // namespace keel::model
