// keel: the single binary. Parses the command line (CLI11) into a subcommand's options struct and
// calls its entry point. Usage errors exit 2; command failures exit 1 with one line on stderr.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli_flags.h"
#include "cluster_cli.h"
#include "commands.h"
#include "core/log.h"
#include "cp_prefill_command.h"
#include "http_front_flags.h"
#include "kv/pic.h"
#include "model/random_model.h"
#include "model_pull.h"
#include "predictor_cli.h"
#include "semi_pd_flags.h"
#include "serve_flags.h"
#include "state_flags.h"

namespace keel::cli {

int report_error(const Status& s) {
  std::fprintf(stderr, "keel: %s\n", s.message().c_str());
  return 1;
}

}  // namespace keel::cli

void add_compute_options(CLI::App* cmd, keel::cli::ComputeOptions* o) {
  cmd->add_option("-t,--threads", o->threads, "Compute threads (0 = all hardware threads)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--isa", o->isa, "Force a kernel table: scalar, avx2 or avx512")
      ->check(CLI::IsMember({"scalar", "avx2", "avx512"}));
  cmd->add_flag("--mmap", o->use_mmap, "Map the model file instead of reading it into memory");
  cmd->add_option("--weight-layout", o->weight_layout,
                  "Quantized weights: grouped (rewritten at load for the decode kernels) or rows "
                  "(as stored in the file)")
      ->check(CLI::IsMember({"grouped", "rows"}));
  cmd->add_flag("--verbose", o->verbose, "Print load time and token rates to stderr");
}

namespace {

void add_bench_serve_options(CLI::App* cmd, keel::cli::BenchServeOptions* o) {
  cmd->option_defaults()->always_capture_default();
  cmd->add_option("--base-url", o->base_url, "Server URL, http://host:port[/prefix]");
  cmd->add_option("--endpoint", o->endpoint, "API path: /v1/completions or /v1/chat/completions");
  cmd->add_option("--model", o->model, "Model name (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", o->api_key, "Bearer token (default: $OPENAI_API_KEY)");
  cmd->add_option("--header", o->headers, "Extra request header Name=value (repeatable)");
  cmd->add_option("--dataset-name,--workload", o->dataset, "Workload")
      ->check(CLI::IsMember({"random", "shared-prefix", "rag", "long-decode"}));
  cmd->add_option("--prompt-format", o->prompt_format,
                  "token-ids or text (auto: token ids for completions, text for chat)")
      ->check(CLI::IsMember({"auto", "token-ids", "text"}));
  cmd->add_option("--input-len", o->input_len, "random: prompt tokens (or words)");
  cmd->add_option("--output-len", o->output_len, "max_tokens of every request");
  cmd->add_option("--range-ratio", o->range_ratio,
                  "Spread lengths uniformly over [len*(1-r), len*(1+r)], 0 <= r < 1");
  cmd->add_option("--vocab-size", o->vocab_size, "Token ids are drawn below this");
  cmd->add_option("--min-token-id", o->min_token_id, "Token ids are drawn from here up");
  cmd->add_option("--num-groups", o->num_groups, "shared-prefix: number of distinct prefixes");
  cmd->add_option("--rag-num-docs", o->rag_num_docs, "rag: documents in the pool");
  cmd->add_option("--rag-docs-per-request", o->rag_docs_per_request,
                  "rag: documents per request, in random order");
  cmd->add_option("--rag-doc-len", o->rag_doc_len, "rag: words per document");
  cmd->add_option("--rag-question-len", o->rag_question_len, "rag: words of the question");
  cmd->add_option("--length-bucket", o->length_bucket,
                  "Report ITL and the server's KV usage by output length in buckets of this many "
                  "tokens (0: 512 for long-decode, off otherwise)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--kv-poll-interval", o->kv_poll_interval_s,
                  "Seconds between reads of the server's keel:kv_cache_usage_perc for it")
      ->check(CLI::Range(0.01, 3600.0));
  cmd->add_option("--prefix-len", o->prefix_len, "shared-prefix: tokens (words) per prefix");
  cmd->add_option("--suffix-len", o->suffix_len, "shared-prefix: unique tokens (words) after it");
  cmd->add_option("--num-prompts", o->num_prompts, "Requests to send");
  cmd->add_option("--request-rate", o->request_rate,
                  "Requests per second, Poisson arrivals; inf = all at once");
  cmd->add_option("--burstiness", o->burstiness,
                  "Gamma shape of the inter-arrival gaps (1 = Poisson, <1 burstier)");
  cmd->add_option("--max-concurrency", o->max_concurrency,
                  "Requests in flight at most (0 = no limit)");
  cmd->add_option("--seed", o->seed, "Seed of prompts and arrival times");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature sent with each request");
  cmd->add_flag("--ignore-eos,!--no-ignore-eos", o->ignore_eos,
                "Send ignore_eos so every request generates output-len tokens (default on)");
  cmd->add_option("--extra-body", o->extra_body, "JSON object merged into every request body");
  cmd->add_option("--goodput", o->goodput, "SLOs for goodput: ttft:MS tpot:MS e2el:MS");
  cmd->add_option("--percentile-metrics", o->percentile_metrics,
                  "Latency sections to print: comma list of ttft,tpot,itl,e2el");
  cmd->add_option("--metric-percentiles", o->metric_percentiles,
                  "Percentiles to report besides mean/median/std, comma list");
  cmd->add_option("--save-result", o->save_result, "Write the result as JSON to this file");
  cmd->add_flag("--save-detailed", o->save_detailed,
                "Add per-request arrays (and generated texts) to the JSON");
  cmd->add_option("--request-timeout", o->request_timeout_s,
                  "Fail a request that makes no progress for this many seconds");
  cmd->add_flag("--skip-test-request", o->skip_test_request,
                "Do not send the first prompt alone before the run");
  cmd->add_option("--disconnect-prob", o->disconnect_prob,
                  "Probability that a request hangs up mid-stream (counted as cancelled)")
      ->check(CLI::Range(0.0, 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  keel::init_logging(keel::LogLevel::kWarn);
  CLI::App app{"keel: a serverless LLM serving system (CPU inference, OpenAI-compatible API)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "keel 0.1.0");
  // Every subcommand's --help shows each option's default (subcommands inherit this).
  app.option_defaults()->always_capture_default();

  keel::cli::RunOptions run;
  CLI::App* run_cmd = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
  run_cmd->add_option("-m,--model", run.model_path,
                      "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  run_cmd->add_option("-p,--prompt", run.prompt, "Prompt text")->required();
  run_cmd->add_option("-n,--n-predict", run.n_predict, "Tokens to generate (-1 = until EOS)")
      ->check(CLI::Range(-1, 1 << 30));
  run_cmd->add_option("--temp", run.temperature, "Sampling temperature (0 = greedy)");
  run_cmd->add_option("--top-k", run.top_k, "Top-k (0 = off)");
  run_cmd->add_option("--top-p", run.top_p, "Top-p / nucleus (1 = off)");
  run_cmd->add_option("--min-p", run.min_p, "Min-p (0 = off)");
  run_cmd->add_option("--repeat-penalty", run.repeat_penalty, "Repetition penalty (1 = off)");
  run_cmd->add_option("--seed", run.seed, "Random seed (same seed, same text)");
  run_cmd->add_option("-c,--ctx-size", run.ctx_size, "Context length (0 = the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  run_cmd->add_option("--kv-type", run.kv_type, "KV cache element type: f32, f16 or q8_0")
      ->check(CLI::IsMember(kv_type_names()));
  run_cmd->add_flag("--ignore-eos", run.ignore_eos, "Keep generating after end-of-generation");
  run_cmd->add_flag("--echo", run.echo_prompt, "Print the prompt before the continuation");
  add_compute_options(run_cmd, &run.compute);

  keel::cli::ServeOptions serve;
  CLI::App* serve_cmd = keel::cli::add_serve_command(app, &serve);

  keel::cli::CpPrefillOptions cpp;
  CLI::App* cpp_cmd = keel::cli::add_cp_prefill_command(app, &cpp);

  keel::cli::EpExpertOptions epx;
  CLI::App* epx_cmd = app.add_subcommand(
      "ep-expert",
      "Run an expert member of an expert-parallel MoE model (started by --ep, or --listen for "
      "--ep-remote)");
  epx_cmd->add_option("-m,--model", epx.model_path, "The leader's GGUF (or --spec)");
  epx_cmd->add_option("--shard", epx.shard,
                      "I/N: hold the I-th of N contiguous ranges of each layer's experts");
  auto* epx_channel =
      epx_cmd->add_option("--channel", epx.channel, "The leader's shared-memory channel");
  epx_cmd
      ->add_option("--listen", epx.listen,
                   "HOST:PORT to serve leaders on other hosts over UCX (port 0: a free one; the "
                   "ready line names it); leader after leader, until stopped")
      ->excludes(epx_channel);
  epx_cmd->add_flag("--exit-with-leader", epx.exit_with_leader,
                    "With --listen or --spec: exit when the first leader says goodbye or its "
                    "connection fails (how node agents start a gang's member)");
  epx_cmd
      ->add_option("--spec", epx.spec_source,
                   "Read the model, listen host, shard, compute and weight layout from a versioned "
                   "TE spec (JSON; - = stdin), as node agents start members")
      ->excludes(epx_channel);
  add_compute_options(epx_cmd, &epx.compute);

  keel::cli::PpStageOptions pps;
  CLI::App* pps_cmd = app.add_subcommand(
      "pp-stage", "Run stage 1 of a pipeline-parallel engine (started by `keel serve --pp 2`)");
  pps_cmd->add_option("-m,--model", pps.model_path, "The GGUF stage 0 runs (or --spec)");
  pps_cmd->add_option("--spec", pps.spec_source,
                      "Read the model, listen address, compute and context from a versioned TE "
                      "spec (JSON; - = stdin), as node agents start stages; only --exit-with-peer "
                      "goes with it");
  pps_cmd->add_option("--listen", pps.listen, "HOST:PORT to listen on (port 0 = a free one)")
      ->default_val("127.0.0.1:0");
  pps_cmd->add_option("-c,--ctx-size", pps.ctx_size, "Max model length, as stage 0's")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  pps_cmd->add_flag("--exit-with-peer", pps.exit_with_peer,
                    "Exit when the stage-0 link closes (how stage 0 starts it)");
  add_compute_options(pps_cmd, &pps.compute);

  keel::cli::InfoOptions info;
  CLI::App* info_cmd = app.add_subcommand("info", "Describe a GGUF model and this CPU");
  info_cmd->add_option("model", info.model_path, "GGUF model file (not needed with --cpu)");
  info_cmd->add_flag("--tensors", info.list_tensors, "List every tensor");
  info_cmd->add_flag("--cpu", info.cpu_only, "Only the CPU features and kernel tables");
  info_cmd->add_option("--isa", info.isa, "Show the table a forced --isa would use")
      ->check(CLI::IsMember({"scalar", "avx2", "avx512"}));

  keel::cli::MakeModelOptions mk;
  CLI::App* mk_cmd = app.add_subcommand(
      "make-model", "Write a GGUF with seeded random weights in a real model's shape");
  mk_cmd->add_option("--arch", mk.arch, "Architecture (a mixture-of-experts shape has its own)")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3"}));
  mk_cmd->add_option("--shape", mk.shape, "Model shape")
      ->check(CLI::IsMember(keel::model::model_shape_names()));
  mk_cmd
      ->add_option("--expert-layout", mk.expert_layout,
                   "MoE expert tensors: stacked (ffn_*_exps), gate-up (ffn_gate_up_exps) or "
                   "per-expert (ffn_*.E, older Mixtral files)")
      ->check(CLI::IsMember({"stacked", "gate-up", "per-expert"}));
  mk_cmd->add_option("--type", mk.type, "Weight type")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k"}));
  mk_cmd->add_option("--vocab", mk.vocab, "'byte' or a GGUF file to copy the tokenizer from");
  mk_cmd->add_option("--seed", mk.seed, "Random seed");
  mk_cmd->add_option("--ctx", mk.ctx, "Context length written to the file (0 = the shape's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  mk_cmd->add_option("--embed", mk.embed,
                     "A llama GGUF (e.g. stories260K) to embed in the shape's body: a benchmark "
                     "fixture with the shape's cost and the embedded model's text");
  mk_cmd
      ->add_option("--rope-scaling", mk.rope_scaling,
                   "Write <arch>.rope.scaling.type: none, linear or yarn (with --rope-scale)")
      ->check(CLI::IsMember({"none", "linear", "yarn"}));
  mk_cmd
      ->add_option("--rope-scale", mk.rope_scale,
                   "RoPE scaling factor (rope.scaling.factor), e.g. 4 for 4x the context")
      ->check(CLI::Range(0.0f, 1e6f));
  mk_cmd
      ->add_option("--rope-orig-ctx", mk.rope_orig_ctx,
                   "YaRN: the original (trained) context, rope.scaling.original_context_length "
                   "(0 = the context length)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  mk_cmd->add_option("-o,--output", mk.output_path, "Output GGUF path")->required();

  keel::cli::MakeLoraOptions ml;
  CLI::App* ml_cmd = app.add_subcommand(
      "make-lora", "Write a random LoRA adapter (llama.cpp's GGUF adapter format) for a model");
  ml_cmd->add_option("-m,--model", ml.base_path, "Base model GGUF")->required();
  ml_cmd->add_option("-o,--output", ml.output_path, "Output adapter GGUF path")->required();
  ml_cmd->add_option("--rank", ml.rank, "LoRA rank")->check(CLI::Range(1, 4096));
  ml_cmd->add_option("--targets", ml.targets, "Adapted projections: any of q,k,v,o,gate,up,down");
  ml_cmd->add_option("--type", ml.type, "A/B tensor type")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  ml_cmd->add_option("--seed", ml.seed, "Random seed");
  ml_cmd->add_option("--alpha", ml.alpha, "adapter.lora.alpha (0 = the rank: scale 1)")
      ->check(CLI::Range(0.0f, 1e6f));

  keel::cli::FinetuneOptions ft;
  keel::train::FinetuneConfig& ftc = ft.spec.config;
  CLI::App* ft_cmd = app.add_subcommand(
      "finetune", "Train a LoRA adapter on chat JSONL (OpenAI's fine-tuning format) on the CPU");
  ft_cmd->option_defaults()->always_capture_default();
  ft_cmd->add_option("-m,--model", ft.spec.model_path, "Base model GGUF")->required();
  ft_cmd
      ->add_option("--train", ft.spec.train_path,
                   "Training conversations: JSONL of {\"messages\": [...]}, optional \"tools\" "
                   "and \"weight\": 0|1 on assistant messages")
      ->required();
  ft_cmd->add_option("--validation", ft.spec.validation_path,
                     "Validation conversations (same format), measured after each epoch");
  ft_cmd->add_option("-o,--output", ft.spec.output_path, "Output adapter GGUF (llama.cpp LoRA)")
      ->required();
  ft_cmd->add_option("--rank", ftc.lora.rank, "LoRA rank")->check(CLI::Range(1, 4096));
  ft_cmd->add_option("--alpha", ftc.lora.alpha, "LoRA alpha (scale = alpha / rank)")
      ->check(CLI::Range(1e-6f, 1e6f));
  ft_cmd->add_option("--targets", ft.targets, "Adapted projections: any of q,k,v,o,gate,up,down");
  ft_cmd->add_option("--epochs", ftc.epochs, "Passes over the training data")
      ->check(CLI::Range(1, 100000));
  ft_cmd->add_option("--lr", ftc.optimizer.learning_rate, "Peak AdamW learning rate")
      ->check(CLI::Range(1e-9, 10.0));
  ft_cmd
      ->add_option("--batch-size", ftc.batch_size,
                   "Conversations per optimizer step (gradients accumulated)")
      ->check(CLI::Range(1, 1 << 20));
  ft_cmd->add_option("--warmup", ftc.optimizer.warmup_steps, "Linear warm-up steps")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  ft_cmd->add_option("--lr-schedule", ft.lr_schedule, "Decay after the warm-up")
      ->check(CLI::IsMember({"constant", "linear", "cosine"}));
  ft_cmd->add_option("--weight-decay", ftc.optimizer.weight_decay, "AdamW's decoupled weight decay")
      ->check(CLI::Range(0.0, 10.0));
  ft_cmd
      ->add_option("--max-grad-norm", ftc.optimizer.max_grad_norm,
                   "Clip the gradient's global L2 norm to this (0 = no clipping)")
      ->check(CLI::Range(0.0, 1e9));
  ft_cmd->add_option("--seed", ftc.seed, "Seed of the initial A and the order of the examples");
  ft_cmd->add_flag("--checkpoint-layers", ftc.checkpoint_layers,
                   "Recompute each layer's activations in the backward pass (less memory)");
  ft_cmd->add_option("--chat-template", ft.spec.chat_template.name_or_file,
                     "Chat template instead of the GGUF's: a built-in name, Jinja text or a file");
  ft_cmd->add_option("--chat-template-file", ft.spec.chat_template.file,
                     "Chat template file instead of the GGUF's");
  ft_cmd->add_option("-t,--threads", ft.spec.threads, "Compute threads (0 = all)")
      ->check(CLI::Range(0, 4096));

  keel::cli::BenchOptions bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "Prompt (pp) and generation (tg) speed of a model, like llama-bench");
  bench_cmd->option_defaults()->always_capture_default();
  bench_cmd->add_option("-m,--model", bench.model_path,
                        "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  bench_cmd->add_option("-p,--n-prompt", bench.n_prompt, "Prompt lengths of pp tests (0 = none)")
      ->delimiter(',');
  bench_cmd->add_option("-n,--n-gen", bench.n_gen, "Generated lengths of tg tests (0 = none)")
      ->delimiter(',');
  bench_cmd->add_option("-r,--repetitions", bench.reps, "Timed runs per test")
      ->check(CLI::Range(1, 1000));
  bench_cmd->add_option("-o,--output", bench.output, "Output format")
      ->check(CLI::IsMember({"md", "json"}));
  bench_cmd->add_flag("--roofline", bench.roofline,
                      "Measure bandwidth and peaks first; report each test's efficiency");
  bench_cmd
      ->add_option("-d,--n-depth", bench.n_depth,
                   "Context depth of tg tests: tokens prefilled (untimed) before decoding")
      ->delimiter(',');
  bench_cmd->add_option("--kv-type", bench.kv_types, "KV cache element types (each test per type)")
      ->delimiter(',')
      ->check(CLI::IsMember(kv_type_names()));
  bench_cmd->add_option("--grammar", bench.grammar_file,
                        "Structured outputs: per-token grammar cost for this JSON Schema (.json, "
                        "or an array of them) or GBNF file, decoding -n tokens per run");
  bench_cmd->add_option("--grammar-runs", bench.grammar_runs, "Constrained generations")
      ->check(CLI::Range(1, 100000));
  bench_cmd->add_option("--exit-predictors", bench.exit_predictors,
                        "SpecEE cost: run each tg test also with the exit predictors of FILE, or "
                        "seeded random ones (random), at every layer with no token exiting; "
                        "reports the overhead");
  bench_cmd->add_option("--draft-head", bench.draft_head,
                        "Draft head for --exit-predictors FILE (default: beside the model)");
  add_compute_options(bench_cmd, &bench.compute);

  keel::cli::EvalPicOptions pic;
  CLI::App* eval_cmd = app.add_subcommand("eval", "Accuracy of approximate methods against exact");
  eval_cmd->require_subcommand(1);
  CLI::App* pic_cmd = eval_cmd->add_subcommand(
      "pic", "EPIC position-independent caching variants against full recompute");
  pic_cmd->option_defaults()->always_capture_default();
  pic_cmd->add_option("-m,--model", pic.model_path,
                      "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  pic_cmd->add_option("--prompts", pic.prompts, "Prompts")->check(CLI::Range(1, 10000));
  pic_cmd->add_option("--chunks", pic.chunks, "Chunks per prompt")->check(CLI::Range(1, 64));
  pic_cmd->add_option("--chunk-len", pic.chunk_len, "Tokens per chunk, BOS included")
      ->check(CLI::Range(2, 8192));
  pic_cmd->add_option("--query-len", pic.query_len, "Tokens after the last chunk")
      ->check(CLI::Range(1, 8192));
  pic_cmd->add_option("--continuation", pic.continuation, "Greedy tokens compared")
      ->check(CLI::Range(1, 8192));
  pic_cmd->add_option("--seed", pic.seed, "Seed of the prompts");
  pic_cmd
      ->add_option("--variants", pic.variants,
                   "full, naive, legolink-K, cacheblend-R (comma-separated)")
      ->delimiter(',');
  pic_cmd->add_flag("--json", pic.json, "One JSON object per variant instead of a table");
  add_compute_options(pic_cmd, &pic.compute);

  keel::cli::EvalSparseOptions sp;
  CLI::App* sparse_cmd = eval_cmd->add_subcommand(
      "sparse", "Sparse decode policies (StreamingLLM, H2O, Quest, RaaS) against dense decoding");
  sparse_cmd->option_defaults()->always_capture_default();
  sparse_cmd->add_option("-m,--model", sp.model_path,
                         "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  sparse_cmd->add_option("--prompts", sp.prompts, "Generations")->check(CLI::Range(1, 10000));
  sparse_cmd->add_option("--prompt-len", sp.prompt_len, "Prompt tokens, BOS included")
      ->check(CLI::Range(2, 1 << 20));
  sparse_cmd
      ->add_option("--max-len", sp.max_len,
                   "Prompt + generated tokens (0 = the model's context length)")
      ->check(CLI::Range(0, 1 << 20));
  sparse_cmd->add_option("--budget", sp.budget, "L: tokens attended per step, every policy")
      ->check(CLI::Range(1, 1 << 20));
  sparse_cmd->add_option("--page-size", sp.page_size, "Tokens per KV page")
      ->check(CLI::Range(1, 1024));
  sparse_cmd->add_option("--alpha", sp.alpha, "RaaS: the softmaxed page score that refreshes it")
      ->check(CLI::Range(0.0, 1.0));
  sparse_cmd->add_option("--sink", sp.sink, "StreamingLLM sink tokens")
      ->check(CLI::Range(0, 1 << 20));
  sparse_cmd->add_option("--window", sp.window, "StreamingLLM/H2O window (0 = from the budget)")
      ->check(CLI::Range(0, 1 << 20));
  sparse_cmd->add_option("--dense-layers", sp.dense_layers, "First layers attending densely")
      ->check(CLI::Range(0, 1024));
  sparse_cmd->add_option("--seed", sp.seed, "Seed of the prompts and generations");
  sparse_cmd
      ->add_option("--policies", sp.policies,
                   "dense, streaming, h2o, quest, raas (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"dense", "streaming", "h2o", "quest", "raas"}));
  sparse_cmd->add_flag("--json", sp.json, "One JSON object per policy instead of a table");
  add_compute_options(sparse_cmd, &sp.compute);

  keel::cli::EvalKvOptions ekv;
  CLI::App* kv_eval_cmd =
      eval_cmd->add_subcommand("kv", "KV cache element types (f16, q8_0) against f32 KV");
  kv_eval_cmd->option_defaults()->always_capture_default();
  kv_eval_cmd->add_option(
      "-m,--model", ekv.model_path,
      "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  kv_eval_cmd->add_option("--prompts", ekv.prompts, "Model-written sequences")
      ->check(CLI::Range(1, 10000));
  kv_eval_cmd->add_option("--prompt-len", ekv.prompt_len, "Prefilled tokens, BOS included")
      ->check(CLI::Range(2, 1 << 20));
  kv_eval_cmd
      ->add_option("--max-len", ekv.max_len,
                   "Teacher-forced sequence length (0 = the model's context length)")
      ->check(CLI::Range(0, 1 << 20));
  kv_eval_cmd->add_option("--greedy", ekv.greedy, "Greedy ids generated after each prompt")
      ->check(CLI::Range(1, 1 << 20));
  kv_eval_cmd->add_option("--seed", ekv.seed, "Seed of the model-written sequences");
  kv_eval_cmd->add_option("--kv-type", ekv.kv_types, "KV types compared with f32 KV")
      ->delimiter(',')
      ->check(CLI::IsMember(kv_type_names()));
  kv_eval_cmd->add_flag("--json", ekv.json, "One JSON object per KV type instead of a table");
  add_compute_options(kv_eval_cmd, &ekv.compute);

  keel::cli::EvalSpecOptions esp;
  CLI::App* spec_eval_cmd = eval_cmd->add_subcommand(
      "spec",
      "Speculative decoding (n-gram prompt lookup, draft head) against autoregressive decoding");
  spec_eval_cmd->option_defaults()->always_capture_default();
  spec_eval_cmd->add_option(
      "-m,--model", esp.model_path,
      "GGUF model file, or builtin:stories260K (the default) or builtin:random");
  spec_eval_cmd->add_option("--max-tokens", esp.max_tokens, "Greedy tokens per prompt")
      ->check(CLI::Range(1, 1 << 20));
  spec_eval_cmd->add_option("--spec-k", esp.k, "Tokens drafted per step")->check(CLI::Range(1, 16));
  spec_eval_cmd->add_option("--ngram-max", esp.ngram_max, "Longest n-gram matched")
      ->check(CLI::Range(1, 16));
  spec_eval_cmd->add_option("--ngram-min", esp.ngram_min, "Shortest n-gram matched")
      ->check(CLI::Range(1, 16));
  spec_eval_cmd->add_option("--draft-head", esp.draft_head_path,
                            "Draft head file (default: <model>.draft.gguf beside the model)");
  spec_eval_cmd->add_option("--draft-model,--model-draft", esp.draft_model_path,
                            "Draft model (GGUF, the same vocabulary): adds draft-model rows");
  spec_eval_cmd->add_option("--exit-predictors", esp.exit_predictors_path,
                            "Exit predictor file (default: <model>.exit.gguf beside the model)");
  spec_eval_cmd
      ->add_option("--exit-thresholds", esp.exit_thresholds,
                   "Early-exit rows: the predictors' thresholds (the paper: 0.5)")
      ->delimiter(',');
  spec_eval_cmd->add_flag("--json", esp.json, "One JSON object per row instead of a table");

  keel::cli::TrainDraftOptions td;
  td.command_line = "keel";
  for (int i = 1; i < argc; ++i) td.command_line += std::string(" ") + argv[i];
  CLI::App* td_cmd = app.add_subcommand(
      "train-draft",
      "Train an EAGLE-like draft head on the model's own hidden states (draft-head speculation)");
  td_cmd->option_defaults()->always_capture_default();
  td_cmd->add_option("-m,--model", td.model_path, "The target model (GGUF)")->required();
  td_cmd->add_option("-o,--output", td.output_path,
                     "Draft head file (default: <model>.draft.gguf beside the model)");
  td_cmd->add_option("--tokens", td.tokens, "Training pairs (tokens of the model's own text)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  td_cmd->add_option("--epochs", td.epochs, "Passes over the pairs")->check(CLI::Range(1, 1000));
  td_cmd->add_option("--hidden", td.hidden, "Hidden units of the head's MLP")
      ->check(CLI::Range(1, 16384));
  td_cmd->add_option("--seq-len", td.seq_len, "Tokens per generated sequence at most")
      ->check(CLI::Range(3, 1 << 20));
  td_cmd->add_option("--lr", td.learning_rate, "Adam learning rate")->check(CLI::Range(1e-6, 1.0));
  td_cmd->add_option("--feature-weight", td.feature_weight, "Weight of the feature regression term")
      ->check(CLI::Range(0.0, 100.0));
  td_cmd->add_option("--seed", td.seed, "Seed of the text, the initial weights and the shuffle");
  add_compute_options(td_cmd, &td.compute);

  keel::cli::TrainExitOptions te;
  te.command_line = td.command_line;
  CLI::App* te_cmd = app.add_subcommand(
      "train-exit",
      "Train SpecEE's per-layer exit predictors on the model's own text (early exit)");
  te_cmd->option_defaults()->always_capture_default();
  te_cmd->add_option("-m,--model", te.model_path, "The target model (GGUF)")->required();
  te_cmd->add_option("-o,--output", te.output_path,
                     "Exit predictor file (default: <model>.exit.gguf beside the model)");
  te_cmd->add_option("--draft-head", te.draft_head_path,
                     "Draft head giving the candidates (default: <model>.draft.gguf)");
  te_cmd->add_option("--tokens", te.tokens, "Training tokens (one sample per layer each)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  te_cmd->add_option("--epochs", te.epochs, "Passes over each layer's tokens")
      ->check(CLI::Range(1, 1000));
  te_cmd->add_option("--hidden", te.hidden, "Hidden units of each predictor (the paper: 512)")
      ->check(CLI::Range(1, 16384));
  te_cmd->add_option("--seq-len", te.seq_len, "Tokens per generated sequence at most")
      ->check(CLI::Range(3, 1 << 20));
  te_cmd->add_option("--seed", te.seed, "Seed of the text, the initial weights and the shuffle");
  add_compute_options(te_cmd, &te.compute);
  add_compute_options(spec_eval_cmd, &esp.compute);

  const keel::cli::PredictorCli predictor_cli(app, *eval_cmd, add_compute_options, argc, argv);

  keel::cli::BenchServeOptions bs;
  CLI::App* bs_cmd = app.add_subcommand(
      "bench-serve", "Benchmark an OpenAI-compatible server with streamed requests (like vLLM's)");
  add_bench_serve_options(bs_cmd, &bs);

  keel::cli::PullOptions pull;
  CLI::App* pull_cmd = app.add_subcommand(
      "pull", "Download a GGUF (URL or org/repo/file.gguf) into the model cache; print its path");
  pull_cmd->add_option("ref", pull.ref, "https://... URL, or a Hugging Face org/repo/file.gguf")
      ->required();
  pull_cmd->add_option("--sha256", pull.sha256,
                       "Expected SHA-256 (hex); default: the server's X-Linked-ETag, if any");
  pull_cmd->add_option("--retries", pull.retries, "Attempts in all (each resumes)")
      ->check(CLI::Range(1, 100));
  pull_cmd->add_option("--timeout", pull.timeout_s, "Seconds a socket may make no progress")
      ->check(CLI::PositiveNumber);
  pull_cmd->add_flag("--force", pull.force, "Download again even when cached");

  keel::cli::ClusterCli cluster_cli = keel::cli::add_cluster_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // bench-serve and serve report a bad flag on one line; other commands keep CLI11's message.
    if (e.get_exit_code() != 0 && bs_cmd->parsed()) {
      std::fprintf(stderr, "keel: bench-serve: %s (see keel bench-serve --help)\n", e.what());
      return e.get_exit_code();
    }
    if (e.get_exit_code() != 0 && serve_cmd->parsed()) {
      std::fprintf(stderr, "keel: serve: %s (see keel serve --help)\n", e.what());
      return e.get_exit_code();
    }
    return app.exit(e);
  }
  if (run_cmd->parsed()) return keel::cli::run_run(run);
  if (serve_cmd->parsed()) return keel::cli::run_serve(serve);
  if (epx_cmd->parsed()) return keel::cli::run_ep_expert(epx);
  if (cpp_cmd->parsed()) return keel::cli::run_cp_prefill(cpp);
  if (pps_cmd->parsed()) {
    if (!pps.spec_source.empty()) {
      const std::string other = first_option_besides(*pps_cmd, {"--spec", "--exit-with-peer"});
      if (!other.empty()) {
        return keel::cli::report_error(keel::Status::invalid_argument(
            "pp-stage: --spec holds the model, address and compute; " + other +
            " goes without it"));
      }
    } else if (pps.model_path.empty()) {
      return keel::cli::report_error(
          keel::Status::invalid_argument("pp-stage: -m or --spec is required"));
    }
    return keel::cli::run_pp_stage(pps);
  }
  if (info_cmd->parsed()) return keel::cli::run_info(info);
  if (mk_cmd->parsed()) return keel::cli::run_make_model(mk);
  if (ml_cmd->parsed()) return keel::cli::run_make_lora(ml);
  if (ft_cmd->parsed()) return keel::cli::run_finetune(ft);
  if (pull_cmd->parsed()) return keel::cli::run_pull(pull);
  if (bs_cmd->parsed()) return keel::cli::run_bench_serve(bs);
  if (bench_cmd->parsed()) return keel::cli::run_bench(bench);
  if (pic_cmd->parsed()) return keel::cli::run_eval_pic(pic);
  if (sparse_cmd->parsed()) return keel::cli::run_eval_sparse(sp);
  if (kv_eval_cmd->parsed()) return keel::cli::run_eval_kv(ekv);
  if (spec_eval_cmd->parsed()) return keel::cli::run_eval_spec(esp);
  if (td_cmd->parsed()) return keel::cli::run_train_draft(td);
  if (te_cmd->parsed()) return keel::cli::run_train_exit(te);
  if (auto code = keel::cli::run_cluster_commands(cluster_cli)) return *code;
  if (auto rc = predictor_cli.run()) return *rc;
  return 2;
}
