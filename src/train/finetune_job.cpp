// run_finetune_job (finetune_job.h): model → data → training → adapter file.
#include "train/finetune_job.h"

#include <filesystem>

#include "model/model.h"
#include "train/adapter_file.h"
#include "train/chat_data.h"

namespace keel::train {
namespace {

Result<ChatDataset> load_data(const std::string& path, const tokenizer::ChatTemplate& tmpl,
                              const tokenizer::Tokenizer& tok, int64_t n_ctx, FileSystem& fs) {
  KEEL_ASSIGN_OR_RETURN(const std::string text, read_text_file(fs, path));
  Result<ChatDataset> d = parse_chat_jsonl(text, tmpl, tok, ChatDataOptions{n_ctx});
  if (!d.ok()) return Status::invalid_argument(path + ": " + d.status().message());
  return d;
}

std::vector<TrainSequence> sequences(const ChatDataset& d) {
  std::vector<TrainSequence> out;
  out.reserve(d.examples.size());
  for (const ChatExample& ex : d.examples) out.push_back(ex.seq);
  return out;
}

}  // namespace

Status FinetuneJobSpec::validate() const {
  if (model_path.empty()) return Status::invalid_argument("finetune: the model path is required");
  if (train_path.empty()) return Status::invalid_argument("finetune: --train is required");
  if (output_path.empty()) return Status::invalid_argument("finetune: -o is required");
  if (threads < 0) return Status::invalid_argument("finetune: threads must be ≥ 0");
  return config.validate();
}

Result<FinetuneJobResult> run_finetune_job(const FinetuneJobSpec& spec, FileSystem& fs,
                                           const FinetuneJobEvents& events) {
  KEEL_TRY(spec.validate());
  const auto say = [&](const std::string& line) {
    if (events.info) events.info(line);
  };
  model::ModelOptions mo;
  mo.group_weights = false;  // the trainer dequantizes rows; the GGUF layout is enough
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m,
                        model::Model::open(spec.model_path, mo, gguf::DataMode::kMmap));
  KEEL_ASSIGN_OR_RETURN(const tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(m->file()));
  KEEL_ASSIGN_OR_RETURN(std::optional<tokenizer::ChosenChatTemplate> chosen,
                        tokenizer::load_chat_template(spec.chat_template, fs));
  const tokenizer::ChatTemplate tmpl =
      chosen ? chosen->tmpl : tokenizer::ChatTemplate::from_gguf(m->file());
  KEEL_ASSIGN_OR_RETURN(const ChatDataset train,
                        load_data(spec.train_path, tmpl, tok, m->n_ctx(), fs));
  ChatDataset valid;
  if (!spec.validation_path.empty()) {
    KEEL_ASSIGN_OR_RETURN(valid, load_data(spec.validation_path, tmpl, tok, m->n_ctx(), fs));
  }
  FinetuneJobResult r;
  r.train_examples = static_cast<int64_t>(train.examples.size());
  r.train_targets = train.num_targets;
  r.validation_examples = static_cast<int64_t>(valid.examples.size());
  say("data: " + std::to_string(r.train_examples) + " conversations, " +
      std::to_string(train.num_tokens) + " tokens, " + std::to_string(train.num_targets) +
      " trained" +
      (train.num_truncated ? ", " + std::to_string(train.num_truncated) + " cut to the context"
                           : std::string()) +
      (r.validation_examples
           ? "; validation: " + std::to_string(r.validation_examples) + " conversations"
           : std::string()));
  const std::vector<TrainSequence> train_seqs = sequences(train), valid_seqs = sequences(valid);
  ThreadPool pool(spec.threads);
  KEEL_ASSIGN_OR_RETURN(r.train,
                        finetune(*m, train_seqs, valid_seqs, spec.config, pool, events.progress));
  AdapterProvenance info;
  info.name = "keel finetune of " + std::filesystem::path(spec.model_path).filename().string();
  info.steps = r.train.steps;
  info.trained_tokens = r.train.trained_tokens;
  info.train_loss = r.train.last_loss;
  info.seed = spec.config.seed;
  KEEL_TRY(write_lora_adapter(r.train.layout, r.train.params, *m, info, spec.output_path));
  return r;
}

}  // namespace keel::train
