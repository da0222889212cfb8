// `keel eval spec`: speculative decoding against autoregressive decoding on one model, through
// the engine itself (docs/speculative.md). Two workloads: "stories" (short story openings the
// model continues) and "repetitive" (openings that repeat a sentence, where prompt lookup
// shines). Per workload and configuration — autoregressive, n-gram speculation, draft-head
// speculation (the head of --draft-head, or the one beside the model) — each prompt is
// decoded greedily (--max-tokens, EOS ignored) one request at a time on a fresh engine, and the
// row reports: token agreement with autoregressive greedy decoding (ids equal at the same
// position), the acceptance rate (accepted / drafted), tokens per decode step (generated tokens
// over the engine steps that produced them, the prefill step included) and tokens per second
// (generated tokens over the wall time from submit to the last token, summed over prompts).
// Output: a markdown table, or one JSON object per row (--json).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/engine.h"
#include "host/compute.h"
#include "model_loading.h"

namespace keel::cli {
namespace {

struct Workload {
  std::string name;
  std::vector<std::string> prompts;
};

std::vector<Workload> workloads() {
  return {
      {"stories",
       {"Once upon a time, there was a little girl named Lily.", "Tom had a big red ball.",
        "One day, a cat found a box in the park.", "The sun was hot and the bird was sad.",
        "Sam and his mom went to the store.", "There was a small dog who liked to run."}},
      {"repetitive",
       {"The cat sat on the mat. The cat sat on the mat. The cat sat on the mat.",
        "Lily said hello to Tom. Lily said hello to Tom. Lily said hello to Tom.",
        "One, two, three, one, two, three, one, two, three,",
        "The dog ran and ran. The dog ran and ran. The dog ran and ran. The dog",
        "Ben had a toy car. Ben had a toy car. Ben had a toy car.",
        "Mom made a cake for Sue. Mom made a cake for Sue. Mom made a cake"}},
  };
}

struct Row {
  std::vector<std::vector<int32_t>> outputs;  // per prompt
  double seconds = 0;
  int64_t generated = 0, steps = 0, drafted = 0, accepted = 0;
};

class Sink final : public engine::OutputSink {
 public:
  void on_event(engine::TokenEvent ev) override {
    std::lock_guard lock(mu_);
    tokens_.insert(tokens_.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finish) {
      done_ = true;
      cv_.notify_all();
    }
  }
  std::vector<int32_t> wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  bool done_ = false;
};

Result<Row> run(const LoadedModel& loaded, const host::ComputeSetup& setup,
                const EvalSpecOptions& opts, const std::vector<std::vector<int32_t>>& prompts,
                const engine::SpeculativeParams& spec) {
  engine::EngineConfig c;
  c.threads = setup.threads;
  c.isa = setup.isa;
  c.eog_token_ids.assign(loaded.tokenizer->eog_ids().begin(), loaded.tokenizer->eog_ids().end());
  c.speculative = spec;
  c.draft_head_path = opts.draft_head_path;
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e, engine::Engine::start(*loaded.model, c));
  Row row;
  for (const std::vector<int32_t>& p : prompts) {
    engine::GenerationRequest r;
    r.prompt_tokens = p;
    r.max_tokens = opts.max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    auto sink = std::make_shared<Sink>();
    const auto t0 = std::chrono::steady_clock::now();
    KEEL_TRY(e->submit(std::move(r), sink).status());
    row.outputs.push_back(sink->wait());
    row.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  e->drain(std::chrono::seconds(10));
  const engine::EngineStats s = e->stats();
  row.generated = s.generation_tokens_total;
  row.steps = s.steps_total;
  row.drafted = s.spec_drafted_tokens;
  row.accepted = s.spec_accepted_tokens;
  return row;
}

double agreement(const Row& row, const Row& reference) {
  int64_t same = 0, total = 0;
  for (size_t i = 0; i < reference.outputs.size(); ++i) {
    const std::vector<int32_t>& a = reference.outputs[i];
    const std::vector<int32_t>& b = row.outputs[i];
    for (size_t j = 0; j < a.size(); ++j) same += j < b.size() && a[j] == b[j];
    total += static_cast<int64_t>(a.size());
  }
  return total > 0 ? static_cast<double>(same) / static_cast<double>(total) : 0.0;
}

void print(const EvalSpecOptions& opts, const std::string& workload, const std::string& config,
           const Row& row, const Row& reference) {
  const double acceptance =
      row.drafted > 0 ? static_cast<double>(row.accepted) / static_cast<double>(row.drafted) : 0;
  const double per_step = static_cast<double>(row.generated) / std::max<double>(row.steps, 1);
  const double tps = static_cast<double>(row.generated) / std::max(row.seconds, 1e-9);
  const double speedup =
      (tps / (static_cast<double>(reference.generated) / std::max(reference.seconds, 1e-9)));
  if (opts.json) {
    const nlohmann::json j = {{"workload", workload},
                              {"config", config},
                              {"k", opts.k},
                              {"token_agreement", agreement(row, reference)},
                              {"drafted_tokens", row.drafted},
                              {"accepted_tokens", row.accepted},
                              {"acceptance_rate", acceptance},
                              {"tokens_per_step", per_step},
                              {"generated_tokens", row.generated},
                              {"tokens_per_second", tps},
                              {"speedup", speedup}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("| %s | %s | %.4f | %lld | %.3f | %.3f | %.0f | %.2fx |\n", workload.c_str(),
              config.c_str(), agreement(row, reference), static_cast<long long>(row.drafted),
              acceptance, per_step, tps, speedup);
}

Status evaluate(const EvalSpecOptions& opts, const host::ComputeSetup& setup) {
  ThreadPool pool(setup.threads);
  KEEL_ASSIGN_OR_RETURN(LoadedModel loaded,
                        load_model(opts.model_path, opts.compute, model::ModelOptions{}, pool));
  if (!opts.json) {
    std::printf(
        "| workload | config | token agreement | drafted | acceptance rate | tokens/step | "
        "tokens/s | speed-up |\n|---|---|---|---|---|---|---|---|\n");
  }
  for (const Workload& w : workloads()) {
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& text : w.prompts) {
      prompts.push_back(loaded.tokenizer->encode(text, /*add_special=*/true, false));
    }
    KEEL_ASSIGN_OR_RETURN(const Row ar, run(loaded, setup, opts, prompts, {}));
    const engine::SpeculativeParams ngram{engine::SpecMethod::kNgram, opts.k, opts.ngram_max,
                                          opts.ngram_min};
    KEEL_TRY(ngram.validate());
    KEEL_ASSIGN_OR_RETURN(const Row spec, run(loaded, setup, opts, prompts, ngram));
    print(opts, w.name, "autoregressive", ar, ar);
    print(opts, w.name, "ngram k=" + std::to_string(opts.k), spec, ar);
    const engine::SpeculativeParams head{engine::SpecMethod::kDraftHead, opts.k, opts.ngram_max,
                                         opts.ngram_min};
    Result<Row> drafted = run(loaded, setup, opts, prompts, head);
    if (!drafted.ok()) {
      std::fprintf(stderr, "keel: draft-head rows skipped: %s\n",
                   drafted.error().message().c_str());
      continue;
    }
    print(opts, w.name, "draft-head k=" + std::to_string(opts.k), *drafted, ar);
  }
  return Status();
}

}  // namespace

int run_eval_spec(const EvalSpecOptions& opts) {
  auto setup = host::setup_compute(opts.compute);
  if (!setup.ok()) return report_error(setup.status());
  const Status s = evaluate(opts, *setup);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
