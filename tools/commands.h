// The keel subcommands: one options struct (filled by the CLI parser in keel_main.cpp) and one
// entry point each, returning the process exit code. Entry points print results to stdout and a
// single-line error to stderr on failure; they never throw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/semi_pd_controller.h"
#include "eval/pic_eval.h"
#include "eval/sparse_eval.h"
#include "host/compute.h"
#include "host/pipeline_stage.h"
#include "host/serve_options.h"
#include "train/finetune_job.h"

namespace keel::cli {

// Options every command that computes shares (threads, kernel table, weight handling).
using ComputeOptions = host::ComputeOptions;

// Prints "keel: <message>" to stderr and returns the exit code 1.
int report_error(const Status& s);

struct InfoOptions {
  std::string model_path;     // "" only with cpu_only
  bool list_tensors = false;  // print every tensor, not only the per-type summary
  bool cpu_only = false;      // --cpu: only the CPU features and the kernel tables
  std::string isa;            // --isa: the table a command would use when forced
};
int run_info(const InfoOptions& opts);

struct RunOptions {
  ComputeOptions compute;
  std::string model_path;  // "" = the built-in default (stories260K); builtin:NAME
  std::string prompt;
  int32_t n_predict = 128;  // tokens to generate; -1 = until end of generation or context full
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  std::optional<uint64_t> seed;
  int64_t ctx_size = 0;         // 0 = from the model
  std::string kv_type = "f32";  // KV storage element type: f32 | f16 | q8_0
  bool ignore_eos = false;
  bool echo_prompt = false;  // print the prompt before the continuation
};
int run_run(const RunOptions& opts);

// keel serve's configuration (host/serve_options.h: the defaults and the engine mappings).
using ServeOptions = host::ServeOptions;
int run_serve(const ServeOptions& opts);

// `keel pp-stage`: stage 1 of a pipeline-parallel engine (`keel serve --pp 2` starts one).
struct PpStageOptions {
  ComputeOptions compute;
  std::string model_path;       // the same GGUF as stage 0's
  std::string listen;           // HOST:PORT (port 0 = a free one; "" = 127.0.0.1:0)
  int64_t ctx_size = 0;         // as stage 0's --ctx-size
  bool exit_with_peer = false;  // exit when the stage-0 link closes
  // --spec SOURCE: model, listen address (host:port), threads, kernels, context and weight layout
  // from a TeSpec (cluster/protocol/te_spec.h; "-" = stdin) instead of the flags above.
  std::string spec_source;
};
int run_pp_stage(const PpStageOptions& opts);
// `keel ep-expert`: an expert member of `keel serve --ep N` (ep/expert_member.h).
struct EpExpertOptions {
  ComputeOptions compute;
  std::string model_path;  // the leader's GGUF
  std::string shard;       // "I/N": this member holds the I-th of N contiguous expert ranges
  std::string channel;     // the leader's shared-memory channel name (a child of `keel serve`)
  std::string listen;      // or HOST:PORT to listen on for leaders on other hosts (UCX)
  // With --listen: exit once the first leader says goodbye or its connection fails, instead of
  // serving the next one (how a node agent starts a gang's member: it dies with its leader).
  bool exit_with_leader = false;
  // --spec SOURCE: model, listen host, shard (engine.ep_member of engine.ep), threads, kernels and
  // weight layout from a TeSpec (cluster/protocol/te_spec.h; "-" = stdin), as node agents start
  // members; implies --listen HOST:0.
  std::string spec_source;
};
int run_ep_expert(const EpExpertOptions& opts);
// The model id the API shows: `given` (--served-model-name) when set, builtin_model_name() for a
// built-in model (no -m, or builtin:NAME), else the stem of the model file (`resolved_path`).
std::string served_model_name(const std::string& given, const std::string& model_path,
                              const std::string& resolved_path);

// `keel bench`: prompt processing (pp) and token generation (tg) speed of one model, like
// llama-bench, and with --roofline this machine's bandwidth and peaks and each test's efficiency
// (eval/model_bench.h).
struct BenchOptions {
  ComputeOptions compute;
  std::string model_path;                 // "" = the built-in default (stories260K)
  std::vector<int32_t> n_prompt = {512};  // pp tests (0 = none)
  std::vector<int32_t> n_gen = {128};     // tg tests (0 = none)
  int32_t reps = 5;
  std::string output = "md";  // md | json
  bool roofline = false;
  std::vector<int32_t> n_depth = {0};           // -d: tg tests after this many prefilled tokens
  std::vector<std::string> kv_types = {"f32"};  // --kv-type f32,f16,q8_0: every test per type
  // --grammar FILE: the structured-output benchmark instead (bench_grammar_command.cpp), with
  // grammar_runs constrained generations of n_gen[0] tokens.
  std::string grammar_file;
  int32_t grammar_runs = 10;
  // --exit-predictors FILE|random: every tg test also with SpecEE's predictors at every layer and
  // no token exiting (eval/exit_bench.h), interleaved rep by rep, with the overhead.
  // --draft-head FILE: the head whose candidates they read (FILE only; default beside the model).
  std::string exit_predictors;
  std::string draft_head;
};
int run_bench(const BenchOptions& opts);
int run_bench_grammar(const BenchOptions& opts, const host::ComputeSetup& setup);

struct MakeModelOptions {
  std::string arch = "llama";  // llama | qwen2 | qwen3 (MoE shapes name their own)
  std::string shape = "tiny";  // model::model_shape_names(), e.g. qwen3-30b-a3b, mixtral-tiny
  std::string expert_layout = "stacked";  // stacked | gate-up | per-expert (MoE shapes)
  std::string type = "f32";               // f32 | f16 | bf16 | q8_0 | q4_0 | q4_k
  std::string vocab = "byte";             // byte | PATH.gguf to copy the tokenizer from
  uint64_t seed = 42;
  int64_t ctx = 0;    // context length written to the file; 0 = the shape's
  std::string embed;  // a llama GGUF to embed (model/embedded_model.h); "" = random weights
  std::string output_path;
  // RoPE scaling written to the file (model::RandomModelSpec): "" = none written.
  std::string rope_scaling;   // none | linear | yarn
  float rope_scale = 0.0f;    // rope.scaling.factor
  int64_t rope_orig_ctx = 0;  // yarn: rope.scaling.original_context_length (0 = the context)
};
int run_make_model(const MakeModelOptions& opts);

// `keel make-lora`: a random LoRA adapter for a base model (model/random_lora.h).
struct MakeLoraOptions {
  std::string base_path;    // -m: the base model GGUF
  std::string output_path;  // -o
  int64_t rank = 16;
  std::string targets = "q,k,v,o,gate,up,down";
  std::string type = "f32";  // f32 | f16 | bf16
  uint64_t seed = 1;
  float alpha = 0.0f;  // 0 = rank
};
int run_make_lora(const MakeLoraOptions& opts);

// `keel finetune`: a LoRA adapter trained on chat JSONL (train/finetune_job.h).
struct FinetuneOptions {
  train::FinetuneJobSpec spec;                   // paths, config and threads from the flags
  std::string targets = "q,k,v,o,gate,up,down";  // --targets
  std::string lr_schedule = "linear";            // --lr-schedule: constant | linear | cosine
};
int run_finetune(const FinetuneOptions& opts);

// `keel bench-serve`: a streaming load generator for OpenAI-compatible servers, mirroring
// `vllm bench serve` (see docs/cli.md). Flag values are checked by the loadgen module.
struct BenchServeOptions {
  std::string base_url = "http://127.0.0.1:8080";
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // "" = the first model of GET /v1/models
  std::string api_key;                       // "" = $OPENAI_API_KEY when set, else none
  std::vector<std::string> headers;          // extra request headers, "Name=value" each
  std::string dataset = "random";            // random | shared-prefix | rag
  std::string prompt_format = "auto";        // auto | token-ids | text (auto: text for chat)
  int64_t input_len = 512;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  int64_t vocab_size = 32000;  // token ids are drawn from [min_token_id, vocab_size)
  int64_t min_token_id = 3;
  int64_t num_groups = 10;           // shared-prefix
  int64_t prefix_len = 256;          // shared-prefix
  int64_t suffix_len = 256;          // shared-prefix
  int64_t rag_num_docs = 16;         // rag
  int64_t rag_docs_per_request = 4;  // rag
  int64_t rag_doc_len = 256;         // rag (words)
  int64_t rag_question_len = 16;     // rag (words)
  int64_t length_bucket = 0;         // by-output-length report; 0 = 512 for long-decode, else off
  double kv_poll_interval_s = 0.25;  // /metrics reads for it
  int64_t num_prompts = 1000;
  std::string request_rate = "inf";  // requests/s or "inf"
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0 = unlimited
  uint64_t seed = 0;
  double temperature = 0.0;
  bool ignore_eos = true;
  std::string extra_body;            // JSON object merged into every request
  std::vector<std::string> goodput;  // "ttft:MS", "tpot:MS", "e2el:MS"
  std::string percentile_metrics = "ttft,tpot,itl,e2el";
  std::string metric_percentiles = "90,99";
  std::string save_result;  // JSON output path; "" = none
  bool save_detailed = false;
  double request_timeout_s = 600.0;
  bool skip_test_request = false;
  double disconnect_prob = 0.0;  // requests that hang up mid-stream (cancelled, not failed)
};
int run_bench_serve(const BenchServeOptions& opts);

// `keel eval pic`: EPIC variants against full recompute on model-written multi-chunk prompts
// (eval/pic_eval.h).
struct EvalPicOptions : eval::PicEvalConfig {  // the harness's configuration and the CLI's
  ComputeOptions compute;
  std::string model_path;  // "" = the built-in default (stories260K)
  bool json = false;
};
int run_eval_pic(const EvalPicOptions& opts);

// `keel eval sparse`: sparse-decode policies against dense decoding on long model-written
// generations (teacher-forced), with pages held and decode time per token (eval/sparse_eval.h).
struct EvalSparseOptions : eval::SparseEvalConfig {  // the harness's configuration and the CLI's
  ComputeOptions compute;
  std::string model_path;  // "" = the built-in default (stories260K)
  bool json = false;
};
int run_eval_sparse(const EvalSparseOptions& opts);

// `keel eval spec`: speculative decoding against autoregressive decoding through the engine
// (eval/spec_eval.h).
struct EvalSpecOptions {
  ComputeOptions compute;
  std::string model_path;    // "" = the built-in default (stories260K)
  int32_t max_tokens = 128;  // greedy tokens per prompt
  int32_t k = 4;             // drafted tokens per step
  int32_t ngram_max = 3;
  int32_t ngram_min = 1;
  std::string draft_head_path;       // "" = the default file beside the model (draft-head rows)
  std::string draft_model_path;      // "" = no draft-model rows
  std::string exit_predictors_path;  // "" = the default file beside the model (early-exit rows)
  std::vector<float> exit_thresholds = {0.5f, 0.95f};  // one early-exit row pair per threshold
  bool json = false;
};
int run_eval_spec(const EvalSpecOptions& opts);

// `keel train-draft`: the EAGLE-like draft head (src/draft) for one model, trained on the
// model's own text and hidden states and written beside it (train_draft_command.cpp).
struct TrainDraftOptions {
  ComputeOptions compute;
  std::string model_path;   // the target model (required)
  std::string output_path;  // "" = draft::default_draft_head_path(model_path)
  int64_t tokens = 32768;   // training pairs
  int32_t epochs = 8;
  int32_t hidden = 256;   // the head's MLP hidden units
  int32_t seq_len = 256;  // tokens per generated sequence at most
  float learning_rate = 2e-3f;
  float feature_weight = 0.1f;
  uint64_t seed = 1;
  std::string command_line;  // recorded in the file
};
int run_train_draft(const TrainDraftOptions& opts);

// `keel train-exit`: SpecEE's per-layer exit predictors (src/draft/exit_predictor.h) for one
// model, trained on the model's own greedy text with its draft head's candidates, and written
// beside it (train_exit_command.cpp).
struct TrainExitOptions {
  ComputeOptions compute;
  std::string model_path;       // the target model (required)
  std::string output_path;      // "" = draft::default_exit_path(model_path)
  std::string draft_head_path;  // "" = the draft head beside the model
  int64_t tokens = 8192;        // training tokens (each gives one sample per layer)
  int32_t epochs = 20;
  int32_t hidden = 512;
  int32_t seq_len = 256;
  uint64_t seed = 1;
  std::string command_line;  // recorded in the file
};
int run_train_exit(const TrainExitOptions& opts);

// `keel eval kv`: KV cache element types against f32 KV (eval/kv_eval.h).
struct EvalKvOptions {
  ComputeOptions compute;
  std::string model_path;   // "" = the built-in default (stories260K)
  int32_t prompts = 8;      // model-written sequences
  int32_t prompt_len = 32;  // prefilled tokens, BOS included
  int32_t max_len = 256;    // teacher-forced sequence length; 0 = the model's context
  int32_t greedy = 64;      // greedy ids generated after each prompt
  uint64_t seed = 1;
  std::vector<std::string> kv_types = {"f16", "q8_0"};  // compared with f32 (always run)
  bool json = false;
};
int run_eval_kv(const EvalKvOptions& opts);

// `keel train-predictor`: the decode-length predictor (src/predictor) for one served model — a
// dataset of side-model-written prompts labelled with the served model's generation lengths, a
// head trained on the side model's features, written to a small GGUF (see docs/cli.md).
struct TrainPredictorOptions {
  ComputeOptions compute;
  std::string model_path;            // the served model (labels)
  std::string predictor_model_path;  // the side model (prompts, features); "" = model_path
  int32_t prompts = 2000;
  int32_t bucket_width = 32;
  int32_t max_new_tokens = 256;
  int32_t min_prompt_tokens = 4;
  int32_t max_prompt_tokens = 250;  // prompts end anywhere in a story, not only at its opening
  float temperature = 0.0f;         // the served model's sampling of the labels; 0 = greedy
  int32_t top_k = 40;
  uint64_t seed = 1;
  int32_t hidden = 0;  // hidden units of the head; 0 = softmax regression
  int32_t steps = 200;
  float learning_rate = 0.01f;
  float weight_decay = 0.02f;
  std::string dataset_path;  // dataset cache (predictor/dataset_file.h); "" = none
  std::string output_path;   // "" = <predictor model stem>-length.gguf in the working directory
  std::string command_line;  // the command as typed, recorded in the file
};
int run_train_predictor(const TrainPredictorOptions& opts);

// `keel eval predictor`: a predictor file's held-out accuracy, the majority-bucket baseline, a
// confusion summary, mean absolute error in tokens and cost per prediction.
struct EvalPredictorOptions {
  ComputeOptions compute;
  std::string model_path;            // the served model (labels of the held-out prompts)
  std::string predictor_model_path;  // the side model; "" = model_path
  std::string predictor_path;        // the predictor file
  int32_t limit = 0;                 // held-out samples evaluated; 0 = all
  std::string dataset_path;          // dataset cache to read the held-out samples from; "" = none
  bool json = false;
};
int run_eval_predictor(const EvalPredictorOptions& opts);

}  // namespace keel::cli
