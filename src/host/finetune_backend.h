// FinetuneBackend: the FineTuner (server/fine_tuner.h) that `keel serve` gives its fine-tuning
// API — the CPU LoRA trainer (src/train) on the served model's GGUF, with the served tokenizer and
// chat template, so a conversation is rendered for training exactly as a chat request is for
// serving.
//   check_data: train::parse_chat_jsonl over the bytes ("line N: ..." for the first bad line).
//   train:      the model opened once (mapped, in the file's layout), the data rendered,
//               train::finetune with the spec's epochs, batch size and seed and the defaults
//               below, on a pool of `threads` whose threads — the calling one too — run at idle
//               priority (core/thread_priority.h); each epoch's end writes
//               <out_dir>/ckpt-step-N.gguf and hands on its TrainState; the end writes
//               <out_dir>/model.gguf (llama.cpp's LoRA format, which the engine serves).
//               While Options::interactive_busy says so (keel serve: requests running or
//               waiting), the trainer pauses (train/train_gate.h).
// Defaults (OpenAI's API sets only epochs, batch size and a learning-rate multiplier): rank 8,
// alpha 16, all seven projections of every layer, learning rate kBaseLearningRate × the
// multiplier, linear warm-up over the first 5 % of the steps then linear decay to 0, the gradient
// clipped at norm 1, no weight decay.
//
// Thread safety: check_data and train may run at the same time (the model is opened once under a
// mutex and then only read).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/mutex.h"
#include "model/model.h"
#include "server/fine_tuner.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace keel::host {

inline constexpr double kBaseLearningRate = 1e-3;

class FinetuneBackend final : public server::FineTuner {
 public:
  struct Options {
    std::string model_path;                                        // the served GGUF
    const tokenizer::Tokenizer* tokenizer = nullptr;               // the served one; outlives this
    std::shared_ptr<const tokenizer::ChatTemplate> chat_template;  // the served one
    int threads = 0;                                               // 0 = all hardware threads
    // Asked every millisecond while a job trains: true pauses the trainer (it waits inside its
    // products and between layers) until it turns false. Empty: never paused.
    std::function<bool()> interactive_busy;
  };
  explicit FinetuneBackend(Options options) : options_(std::move(options)) {}

  Result<server::FineTuneDataSummary> check_data(const std::string& jsonl) override;
  Result<server::FineTuneOutcome> train(const server::FineTuneSpec& spec,
                                        const std::string& resume_state,
                                        const server::FineTuneHooks& hooks) override;

 private:
  // The base model, opened on first use.
  Result<const model::Model*> model();

  const Options options_;
  Mutex mu_;
  std::unique_ptr<model::Model> model_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::host
