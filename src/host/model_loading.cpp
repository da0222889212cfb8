// has_random_weights / read_weights / load_model (see model_loading.h).
#include "host/model_loading.h"

#include <chrono>

namespace keel::host {

bool has_random_weights(const gguf::GgufFile& file) {
  const gguf::Value* v = file.find("keel.random_weights");
  return v != nullptr && v->as_bool().value_or(false);
}

Result<gguf::GgufFile> read_weights(const std::string& path, bool use_mmap,
                                    const ReadProgress& progress, const model::ExpertShard& shard) {
  gguf::ReadOptions read;
  read.mode = use_mmap ? gguf::DataMode::kMmap : gguf::DataMode::kRead;
  read.progress = progress;
  if (!shard.whole()) {
    read.skip = [shard](const std::vector<gguf::TensorInfo>& tensors) {
      return model::expert_shard_skips(tensors, shard);
    };
  }
  return gguf::GgufFile::open(path, read);
}

Result<LoadedModel> load_model(const std::string& path, const ComputeOptions& compute,
                               const model::ModelOptions& options, const ReadProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedModel out;
  out.path = path;
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        read_weights(path, compute.use_mmap, progress, options.expert_shard));
  out.random_weights = has_random_weights(file);
  KEEL_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(file));
  out.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  model::ModelOptions mopts = options;
  mopts.group_weights = compute.weight_layout != "rows";
  KEEL_ASSIGN_OR_RETURN(out.model, model::Model::load(std::move(file), mopts));
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace keel::host
