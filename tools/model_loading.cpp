// read_weights / load_model: default-model fallback, GGUF read with progress, tokenizer, model.
#include "model_loading.h"

#include <chrono>

#include "default_model.h"
#include "gguf/reader.h"
#include "progress.h"

namespace keel::cli {

Result<gguf::GgufFile> read_weights(const std::string& path, const ComputeOptions& compute,
                                    bool show_progress) {
  ProgressReporter progress("loading " + path, "B", show_progress);
  gguf::ReadOptions read;
  read.mode = compute.use_mmap ? gguf::DataMode::kMmap : gguf::DataMode::kRead;
  read.progress = [&progress](uint64_t done, uint64_t total) { progress.update(done, total); };
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::open(path, read));
  progress.finish();
  return file;
}

Result<LoadedModel> load_model(const std::string& path, const ComputeOptions& compute,
                               const model::ModelOptions& options, ThreadPool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedModel out;
  out.path = path;
  if (out.path.empty()) {
    KEEL_ASSIGN_OR_RETURN(out.path, ensure_default_model(pool));
  }
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file, read_weights(out.path, compute, compute.verbose));
  if (const gguf::Value* v = file.find("keel.random_weights")) {
    out.random_weights = v->as_bool().value_or(false);
  }
  KEEL_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(file));
  out.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  model::ModelOptions mopts = options;
  mopts.group_weights = compute.weight_layout != "rows";
  KEEL_ASSIGN_OR_RETURN(out.model, model::Model::load(std::move(file), mopts));
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace keel::cli
