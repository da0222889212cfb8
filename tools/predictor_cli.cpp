// PredictorCli (see predictor_cli.h).
#include "predictor_cli.h"

namespace keel::cli {

PredictorCli::PredictorCli(CLI::App& app, CLI::App& eval, const AddCompute& add_compute, int argc,
                           char** argv) {
  train_.command_line = "keel";
  for (int i = 1; i < argc; ++i) train_.command_line += std::string(" ") + argv[i];

  TrainPredictorOptions& t = train_;
  train_cmd_ = app.add_subcommand(
      "train-predictor",
      "Train a decode-length predictor (side-model features, bucket classifier)");
  CLI::App* c = train_cmd_;
  c->option_defaults()->always_capture_default();
  c->add_option("-m,--model", t.model_path, "The served model: its generation lengths are labels")
      ->required();
  c->add_option("--predictor-model", t.predictor_model_path,
                "The side model that writes prompts and gives features (default: -m)");
  c->add_option("--prompts", t.prompts, "Dataset size (1 in 5 held out)")
      ->check(CLI::Range(10, 1000000));
  c->add_option("--bucket-width", t.bucket_width, "Tokens per length bucket")
      ->check(CLI::Range(1, 1 << 16));
  c->add_option("--max-new-tokens", t.max_new_tokens, "Generation cap of the labels")
      ->check(CLI::Range(1, 1 << 16));
  c->add_option("--min-prompt-tokens", t.min_prompt_tokens, "Shortest prompt, BOS included")
      ->check(CLI::Range(2, 1 << 16));
  c->add_option("--max-prompt-tokens", t.max_prompt_tokens, "Longest prompt, BOS included")
      ->check(CLI::Range(2, 1 << 16));
  c->add_option("--temp", t.temperature, "Served model's sampling temperature (0 = greedy)")
      ->check(CLI::Range(0.0, 10.0));
  c->add_option("--top-k", t.top_k, "Served model's top-k (0 = off)")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("--seed", t.seed, "Seed of prompts, labels and initial weights");
  c->add_option("--hidden", t.hidden, "Hidden units of the head (0 = softmax regression)")
      ->check(CLI::Range(0, 4096));
  c->add_option("--steps", t.steps, "Full-batch Adam steps")->check(CLI::Range(0, 100000));
  c->add_option("--lr", t.learning_rate, "Adam learning rate")->check(CLI::Range(1e-6, 10.0));
  c->add_option("--weight-decay", t.weight_decay, "L2 penalty on the weights")
      ->check(CLI::Range(0.0, 10.0));
  c->add_option("--dataset", t.dataset_path,
                "Dataset cache: read when it holds this dataset, else written after generating");
  c->add_option("-o,--output", t.output_path,
                "Predictor file (default: <predictor model stem>-length.gguf)");
  add_compute(c, &t.compute);

  EvalPredictorOptions& e = eval_;
  eval_cmd_ = eval.add_subcommand(
      "predictor", "A decode-length predictor's held-out accuracy against the majority bucket");
  c = eval_cmd_;
  c->option_defaults()->always_capture_default();
  c->add_option("-m,--model", e.model_path, "The served model the predictor was trained for")
      ->required();
  c->add_option("--predictor-model", e.predictor_model_path,
                "The side model it was trained on (default: -m)");
  c->add_option("--predictor", e.predictor_path, "Predictor file (from keel train-predictor)")
      ->required();
  c->add_option("--limit", e.limit, "Held-out prompts evaluated (0 = all)")
      ->check(CLI::Range(0, 1000000));
  c->add_option("--dataset", e.dataset_path,
                "Dataset cache from train-predictor (regenerated held-out samples otherwise)");
  c->add_flag("--json", e.json, "One JSON object instead of text");
  add_compute(c, &e.compute);
}

std::optional<int> PredictorCli::run() const {
  if (train_cmd_->parsed()) return run_train_predictor(train_);
  if (eval_cmd_->parsed()) return run_eval_predictor(eval_);
  return std::nullopt;
}

}  // namespace keel::cli
