// FinetuneJob: one local fine-tuning run from files to an adapter file — what `keel finetune`
// does, and what a training task will call: open the base model (mapped), its tokenizer and chat
// template (the GGUF's, or a chosen one), read and render the training and validation JSONL
// (chat_data.h), train (finetune.h) and write the adapter (adapter_file.h).
//
// Thread safety: run_finetune_job blocks its caller; the callbacks run on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/file_system.h"
#include "core/result.h"
#include "tokenizer/chat_template_choice.h"
#include "train/finetune.h"

namespace keel::train {

struct FinetuneJobSpec {
  std::string model_path;                       // the base GGUF (required)
  std::string train_path;                       // chat JSONL (required)
  std::string validation_path;                  // chat JSONL, "" = none
  std::string output_path;                      // the adapter GGUF (required)
  tokenizer::ChatTemplateChoice chat_template;  // empty = the GGUF's template
  FinetuneConfig config;
  int threads = 0;  // compute threads, 0 = all hardware threads

  [[nodiscard]] Status validate() const;
};

// What the job says while it runs (each may be empty).
struct FinetuneJobEvents {
  std::function<void(const std::string&)> info;  // one line: data summary, where it wrote
  FinetuneProgress progress;
};

struct FinetuneJobResult {
  FinetuneResult train;
  int64_t train_examples = 0;
  int64_t train_targets = 0;  // trained tokens per epoch
  int64_t validation_examples = 0;
};

// Errors: the spec's, the file system's, the model loader's, "PATH: line N: ..." for bad data,
// the trainer's and the writer's.
Result<FinetuneJobResult> run_finetune_job(const FinetuneJobSpec& spec, FileSystem& fs,
                                           const FinetuneJobEvents& events = {});

}  // namespace keel::train
