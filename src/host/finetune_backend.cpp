// FinetuneBackend (finetune_backend.h): the API's jobs through the CPU LoRA trainer.
#include "host/finetune_backend.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stop_token>
#include <thread>

#include "core/log.h"
#include "core/thread_pool.h"
#include "core/thread_priority.h"
#include "train/adapter_file.h"
#include "train/chat_data.h"
#include "train/finetune.h"
#include "train/train_state.h"

namespace keel::host {
namespace {

std::vector<train::TrainSequence> sequences(const train::ChatDataset& d) {
  std::vector<train::TrainSequence> out;
  out.reserve(d.examples.size());
  for (const train::ChatExample& ex : d.examples) out.push_back(ex.seq);
  return out;
}

train::FinetuneConfig config_for(const server::FineTuneSpec& spec, size_t num_examples) {
  train::FinetuneConfig c;
  c.lora.rank = 8;
  c.lora.alpha = 16.0f;
  c.epochs = spec.n_epochs;
  c.batch_size = spec.batch_size;
  c.seed = spec.seed;
  c.optimizer.learning_rate = kBaseLearningRate * spec.learning_rate_multiplier;
  c.optimizer.warmup_steps = train::total_steps(num_examples, c) / 20;
  c.optimizer.decay = train::LrDecay::kLinear;
  return c;
}

}  // namespace

Result<const model::Model*> FinetuneBackend::model() {
  MutexLock lock(mu_);
  if (model_ == nullptr) {
    model::ModelOptions mo;
    mo.group_weights = false;  // the trainer dequantizes rows; the file's layout is enough
    KEEL_ASSIGN_OR_RETURN(model_,
                          model::Model::open(options_.model_path, mo, gguf::DataMode::kMmap));
  }
  return model_.get();
}

Result<server::FineTuneDataSummary> FinetuneBackend::check_data(const std::string& jsonl) {
  KEEL_ASSIGN_OR_RETURN(const model::Model* m, model());
  KEEL_ASSIGN_OR_RETURN(
      const train::ChatDataset d,
      train::parse_chat_jsonl(jsonl, *options_.chat_template, *options_.tokenizer, {m->n_ctx()}));
  return server::FineTuneDataSummary{static_cast<int64_t>(d.examples.size()), d.num_tokens,
                                     d.num_targets, d.num_truncated};
}

Result<server::FineTuneOutcome> FinetuneBackend::train(const server::FineTuneSpec& spec,
                                                       const std::string& resume_state,
                                                       const server::FineTuneHooks& hooks) {
  if (Status s = lower_to_idle_priority(); !s.ok()) KEEL_LOG_WARN("fine-tuning: {}", s.message());
  KEEL_ASSIGN_OR_RETURN(const model::Model* m, model());
  const train::ChatDataOptions data_options{m->n_ctx()};
  KEEL_ASSIGN_OR_RETURN(const train::ChatDataset train_data,
                        train::parse_chat_jsonl(*spec.training, *options_.chat_template,
                                                *options_.tokenizer, data_options));
  train::ChatDataset valid_data;
  if (spec.validation != nullptr) {
    KEEL_ASSIGN_OR_RETURN(valid_data,
                          train::parse_chat_jsonl(*spec.validation, *options_.chat_template,
                                                  *options_.tokenizer, data_options));
  }
  const std::vector<train::TrainSequence> train_seqs = sequences(train_data);
  const std::vector<train::TrainSequence> valid_seqs = sequences(valid_data);
  const train::FinetuneConfig config = config_for(spec, train_seqs.size());
  KEEL_ASSIGN_OR_RETURN(const train::LoraLayout layout, train::make_lora_layout(*m, config.lora));
  train::TrainState resume;
  if (!resume_state.empty()) {
    KEEL_ASSIGN_OR_RETURN(resume, train::decode_train_state(resume_state));
  }
  train::AdapterProvenance info;
  info.name = "keel fine-tuning job " + spec.job_id;
  info.seed = spec.seed;
  const auto write = [&](const std::vector<float>& params, int64_t step, int64_t tokens,
                         double loss, const std::string& file) -> Result<std::string> {
    const std::string path = (std::filesystem::path(spec.out_dir) / file).string();
    train::AdapterProvenance p = info;
    p.steps = step;
    p.trained_tokens = tokens;
    p.train_loss = loss;
    KEEL_TRY(train::write_lora_adapter(layout, params, *m, p, path));
    return path;
  };

  server::FineTuneStep last;
  train::FinetuneProgress progress;
  progress.on_step = [&](const train::StepReport& r) {
    last = {r.step, r.total_steps, r.epoch, r.loss, r.accuracy, r.trained_tokens};
    if (hooks.on_step) hooks.on_step(last);
  };
  train::FinetuneControl control;
  control.stop = hooks.stop;
  std::atomic<bool> pause{false};
  control.pause = &pause;
  std::jthread watcher;  // while training: pause whenever interactive work is running
  if (options_.interactive_busy) {
    watcher = std::jthread([&pause, &busy = options_.interactive_busy](std::stop_token st) {
      while (!st.stop_requested()) {
        pause.store(busy(), std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  if (!resume_state.empty()) control.resume = &resume;
  control.on_checkpoint = [&](const train::TrainState& s, const train::EpochReport& e) -> Status {
    server::FineTuneCheckpoint c;
    c.step = s.step;
    c.epoch = e.epoch;
    KEEL_ASSIGN_OR_RETURN(c.adapter_path, write(s.params, s.step, s.trained_tokens, last.train_loss,
                                                fmt::format("ckpt-step-{}.gguf", s.step)));
    c.train_loss = last.train_loss;
    c.train_accuracy = last.train_accuracy;
    if (e.valid_loss >= 0) {
      c.valid_loss = e.valid_loss;
      c.valid_accuracy = e.valid_accuracy;
    }
    c.state = train::encode_train_state(s);
    if (hooks.on_checkpoint) hooks.on_checkpoint(c);
    return Status();
  };
  ThreadPool pool(options_.threads);
  pool.run([](int, int) { (void)lower_to_idle_priority(); });
  KEEL_ASSIGN_OR_RETURN(train::FinetuneResult r, train::finetune(*m, train_seqs, valid_seqs, config,
                                                                 pool, progress, control));
  server::FineTuneOutcome out;
  out.stopped = r.stopped;
  out.step = r.steps;
  out.trained_tokens = r.trained_tokens;
  if (r.stopped) {
    out.state = train::encode_train_state(r.state);
    return out;
  }
  KEEL_ASSIGN_OR_RETURN(out.adapter_path,
                        write(r.params, r.steps, r.trained_tokens, r.last_loss, "model.gguf"));
  return out;
}

}  // namespace keel::host
