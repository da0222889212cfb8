// SemiPdEngine implementation (see semi_pd_engine.h): start-up (KV sizing as the colocated
// engine's), submit's checks, the request registry for abort, re-split and the sample window.
#include "engine/semi_pd_engine.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "core/log.h"
#include "engine/request_checks.h"
#include "engine/resumed_request.h"
#include "engine/steady_time.h"

namespace keel::engine {

namespace {

// The switch downtime buckets: 10 µs to 1 s.
std::vector<double> switch_buckets() {
  return {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0};
}

// InvalidArgument for what this mode does not run.
Status check_supported(const GenerationRequest& r) {
  const char* what = nullptr;
  if (!r.grammar.empty()) what = "structured outputs (grammar)";
  if (!r.lora.empty()) what = "LoRA adapters";
  if (!r.retain_as.empty()) what = "context caches (retain_as)";
  if (!r.pic_chunks.empty()) what = "position-independent chunks";
  if (r.sparse.has_value() && r.sparse->policy != "dense") what = "sparse decode";
  if (r.speculative.has_value() && r.speculative->enabled()) what = "speculative decoding";
  if (r.early_exit.has_value() && r.early_exit->enabled) what = "early exit requests";
  if (r.resumed_tokens > 0) what = "resumed requests";
  if (what == nullptr) return {};
  return Status::invalid_argument(std::string(what) + " are not supported in --mode semi-pd");
}

}  // namespace

Result<std::unique_ptr<SemiPdEngine>> SemiPdEngine::start(const model::Model& model,
                                                          EngineConfig config, SemiPdDeps deps) {
  KEEL_TRY(config.validate());
  if (!config.semi_pd.has_value()) return Status::invalid_argument("no semi-PD split given");
  KEEL_TRY(config.semi_pd->validate(static_cast<int32_t>(allowed_cores().size())));
  if (config.early_exit.enabled) {
    return Status::invalid_argument("--early-exit is not supported in --mode semi-pd");
  }
  if (!config.draft_model_path.empty()) {
    return Status::invalid_argument("--draft-model is not supported in --mode semi-pd");
  }
  if (config.kv_host_bytes > 0 || !config.kv_disk_dir.empty()) {
    return Status::invalid_argument("KV tiers are not supported in --mode semi-pd");
  }
  const int64_t max_len = config.scheduler.max_model_len > 0
                              ? std::min<int64_t>(config.scheduler.max_model_len, model.n_ctx())
                              : model.n_ctx();
  config.scheduler.max_model_len = static_cast<int32_t>(max_len);
  config.enable_prefix_cache = false;
  const model::KvLayout layout =
      model::KvLayout::for_model(model.hparams(), config.block_size, config.kv_dtype);
  KEEL_ASSIGN_OR_RETURN(const int32_t num_blocks, kv_pool_blocks(config, max_len, layout));
  KEEL_ASSIGN_OR_RETURN(model::KvStorage storage, model::KvStorage::create(layout, num_blocks));
  return std::unique_ptr<SemiPdEngine>(
      new SemiPdEngine(model, std::move(config), std::move(storage), num_blocks, std::move(deps)));
}

SemiPdEngine::SemiPdEngine(const model::Model& model, EngineConfig config, model::KvStorage storage,
                           int32_t num_blocks, SemiPdDeps deps)
    : model_(model),
      config_(std::move(config)),
      tokenizer_(deps.tokenizer),
      cores_(allowed_cores()),
      storage_(std::move(storage)),
      blocks_(num_blocks),
      switch_seconds_(switch_buckets()),
      split_(*config_.semi_pd) {
  shared_.model = &model_;
  shared_.storage = &storage_;
  shared_.blocks = &blocks_;
  shared_.config = &config_;
  shared_.metrics = &metrics_;
  if (const model::HParams& hp = model_.hparams(); hp.is_moe()) {
    expert_counts_ = std::make_unique<model::ExpertTokenCounts>(hp.n_layer, hp.moe.n_expert);
    shared_.expert_counts = expert_counts_.get();
  }
  shared_.switch_seconds = &switch_seconds_;
  shared_.on_finished = [this](const SemiPdRequest& r) { forget(r); };
  shared_.on_first_token = [this](double s) { observe_ttft(s); };
  shared_.on_prefill_step = [this](double core_s, int32_t n) { observe_prefill_step(core_s, n); };
  shared_.on_hand_off = std::move(deps.on_hand_off);
  const SemiPdCoreSets sets = semi_pd_core_sets(split_, cores_);
  prefill_ =
      std::make_unique<SemiPdWorker>(SemiPdRole::kPrefill, &shared_, config_.isa, sets.prefill);
  decode_ = std::make_unique<SemiPdWorker>(SemiPdRole::kDecode, &shared_, config_.isa, sets.decode);
  prefill_->start(decode_.get());
  decode_->start(prefill_.get());
  window_.split = split_;
  window_start_ns_ = now_ns();
}

SemiPdEngine::~SemiPdEngine() {
  prefill_->stop();
  decode_->stop();
  prefill_->join();  // both threads end before either's leftovers go: each may push to the other
  decode_->join();
  prefill_->abort_left();
  decode_->abort_left();
  prefill_.reset();
  decode_.reset();
}

Result<RequestKey> SemiPdEngine::submit(GenerationRequest request,
                                        std::shared_ptr<OutputSink> sink) {
  if (draining_.load()) return Status::unavailable("the server is shutting down");
  const int64_t n_vocab = model_.hparams().n_vocab;
  KEEL_TRY(
      check_request(request, {n_vocab, tokenizer_ != nullptr, config_.scheduler.max_model_len}));
  KEEL_TRY(check_supported(request));
  const int64_t total = static_cast<int64_t>(request.prompt_tokens.size()) + request.max_tokens;
  if ((total + config_.block_size - 1) / config_.block_size > blocks_.num_blocks()) {
    return Status::out_of_range("the request needs more KV blocks than the whole pool holds");
  }
  KEEL_TRY(check_waiting(prefill_->num_waiting(), config_.scheduler.max_waiting));
  auto r = std::make_unique<SemiPdRequest>();
  r->key = next_key_.fetch_add(1);
  r->arrival_ns = now_ns();
  r->sampler = std::make_unique<sampling::Sampler>(request.sampling, static_cast<int32_t>(n_vocab));
  r->sampler->set_prompt(request.prompt_tokens);
  if (!request.stop_strings.empty()) {
    r->stops = std::make_unique<StopStringDetector>(*tokenizer_, request.stop_strings);
  }
  r->tokens = request.prompt_tokens;
  r->request = std::move(request);
  r->sink = std::move(sink);
  r->cancelled = std::make_shared<std::atomic<bool>>(false);
  prompt_tokens_total_.fetch_add(static_cast<int64_t>(r->tokens.size()));
  const RequestKey key = r->key;
  {
    MutexLock lock(mu_);
    live_.emplace(key, r->cancelled);
    ++window_.num_arrivals;
  }
  prefill_->push(std::move(r));
  return key;
}

void SemiPdEngine::abort(RequestKey key) {
  {
    MutexLock lock(mu_);
    if (key < 0) {
      for (auto& [k, flag] : live_) flag->store(true);
    } else if (const auto it = live_.find(key); it != live_.end()) {
      it->second->store(true);
    }
  }
  prefill_->wake();
  decode_->wake();
}

void SemiPdEngine::forget(const SemiPdRequest& r) {
  generation_tokens_total_.fetch_add(r.num_generated);
  MutexLock lock(mu_);
  live_.erase(r.key);
  if (r.num_generated >= 2) {
    window_.tpot_seconds.push_back(seconds_between(r.first_token_ns, r.last_token_ns) /
                                   (r.num_generated - 1));
  }
}

void SemiPdEngine::observe_ttft(double seconds) {
  MutexLock lock(mu_);
  window_.ttft_seconds.push_back(seconds);
}

void SemiPdEngine::observe_prefill_step(double core_seconds, int32_t completed) {
  MutexLock lock(mu_);
  window_.prefill_busy_core_s += core_seconds;
  window_.num_prefills += completed;
}

void SemiPdEngine::note_decision(const std::string& reason, std::optional<double> predicted_ttft_s,
                                 std::optional<double> predicted_tpot_s) {
  MutexLock lock(mu_);
  ++decisions_[reason];
  predicted_ttft_s_ = predicted_ttft_s;
  predicted_tpot_s_ = predicted_tpot_s;
}

Status SemiPdEngine::set_split(const SemiPdSplit& split) {
  KEEL_TRY(split.validate(static_cast<int32_t>(cores_.size())));
  SemiPdCoreSets sets;
  {
    MutexLock lock(mu_);
    if (split == split_) return {};
    split_ = split;
    ++num_switches_;
    window_.split_changed = true;
    sets = semi_pd_core_sets(split, cores_);
  }
  KEEL_LOG_INFO("semi-PD: re-split to {},{} (prefill, decode cores)", split.prefill, split.decode);
  prefill_->set_cores(std::move(sets.prefill));
  decode_->set_cores(std::move(sets.decode));
  return {};
}

SemiPdSplit SemiPdEngine::split() const {
  MutexLock lock(mu_);
  return split_;
}

SemiPdWindow SemiPdEngine::take_window() {
  MutexLock lock(mu_);
  SemiPdWindow w = std::move(window_);
  window_ = SemiPdWindow{};
  w.split = split_;
  window_.split = split_;
  const int64_t now = now_ns();
  w.duration_s = seconds_between(window_start_ns_, now);
  window_start_ns_ = now;
  w.num_prefill_waiting = prefill_->num_waiting();
  w.num_decode_running = decode_->num_running();
  return w;
}

EngineStats SemiPdEngine::stats() const {
  EngineStats s;
  s.num_running = prefill_->num_running() + decode_->num_running();
  s.num_waiting = prefill_->num_waiting() + decode_->num_waiting();
  {
    MutexLock lock(mu_);
    s.num_tracked = static_cast<int32_t>(live_.size());
  }
  s.kv_blocks_total = blocks_.num_blocks();
  s.kv_blocks_used = blocks_.num_allocated();
  s.kv_usage = s.kv_blocks_total > 0
                   ? static_cast<float>(s.kv_blocks_used) / static_cast<float>(s.kv_blocks_total)
                   : 0.0f;
  s.kv_capacity_tokens = s.kv_blocks_total * config_.block_size;
  s.prompt_tokens_total = prompt_tokens_total_.load();
  s.generation_tokens_total = generation_tokens_total_.load();
  s.num_preemptions_total = decode_->num_preemptions();
  s.steps_total = prefill_->num_steps() + decode_->num_steps();
  return s;
}

MetricsSnapshot SemiPdEngine::metrics() const {
  MetricsSnapshot m = metrics_.snapshot();
  SemiPdMetrics p;
  p.switch_seconds = switch_seconds_.snapshot();
  p.prefill_threads = prefill_->num_threads();
  p.decode_threads = decode_->num_threads();
  {
    MutexLock lock(mu_);
    p.split_prefill = split_.prefill;
    p.split_decode = split_.decode;
    p.num_switches = num_switches_;
    p.decisions = decisions_;
    p.predicted_ttft_s = predicted_ttft_s_;
    p.predicted_tpot_s = predicted_tpot_s_;
  }
  m.semi_pd = p;
  if (expert_counts_ != nullptr) {
    m.moe_expert_tokens =
        ExpertTokens{static_cast<int32_t>(expert_counts_->n_layer()),
                     static_cast<int32_t>(expert_counts_->n_expert()), expert_counts_->snapshot()};
  }
  return m;
}

void SemiPdEngine::drain(std::chrono::milliseconds timeout) {
  draining_.store(true);
  const auto live = [this] {
    MutexLock lock(mu_);
    return live_.size();
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (live() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (live() == 0) return;
  KEEL_LOG_WARN("drain timeout: cancelling {} in-flight requests", live());
  abort(-1);
  const auto hard_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (live() > 0 && std::chrono::steady_clock::now() < hard_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace keel::engine
