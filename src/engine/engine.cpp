// Engine: submit and admission, and the engine-thread step cycle with schedule-ahead; start-up is
// in engine_start.cpp, finish rules in engine_finish.cpp, stats in engine_stats.cpp. See engine.h
// for the cycle.
#include "engine/engine.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/log.h"
#include "engine/pipeline_checks.h"
#include "engine/request_checks.h"
#include "engine/resumed_request.h"
#include "engine/steady_time.h"
#include "engine/step_batch.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_registry.h"
#include "kv/block_file.h"

namespace keel::engine {

Result<RequestKey> Engine::submit(GenerationRequest request, std::shared_ptr<OutputSink> sink) {
  if (draining_.load() || stop_.load()) {
    return Status::unavailable("the server is shutting down");
  }
  KEEL_TRY(
      check_request(request, {model_.hparams().n_vocab, tokenizer_ != nullptr, max_model_len_}));
  if (!request.grammar.empty()) {
    if (tokenizer_ == nullptr) {
      return Status::invalid_argument("a grammar needs an engine with a tokenizer");
    }
    KEEL_TRY(grammar::parse_gbnf(request.grammar).status());  // pure: safe from any thread
  }
  KEEL_TRY(validate_resumed(request, config_.eog_token_ids, tokenizer_));
  if (pipeline_tail_ != nullptr) KEEL_TRY(check_pipeline_request(request, config_));
  if (request.speculative.has_value()) {
    KEEL_TRY(request.speculative->validate());
    if (request.speculative->method == SpecMethod::kDraftHead && draft_head_ == nullptr) {
      return Status::invalid_argument("speculative.method draft-head: " + draft_head_missing_);
    }
    if (request.speculative->method == SpecMethod::kDraftModel && draft_model_ == nullptr) {
      return Status::invalid_argument(
          "speculative.method draft-model: the server has no draft model (--draft-model FILE)");
    }
  }
  KEEL_TRY(early_exit_.check(request));
  KEEL_TRY(kv::validate_pic_chunks(request.pic_chunks,
                                   static_cast<int32_t>(request.prompt_tokens.size())));
  if (request.sparse.has_value()) {
    if (request.sparse->budget == 0) request.sparse->budget = config_.sparse.budget;
    KEEL_TRY(make_sparse_sequence(*request.sparse, config_.sparse_tuning, config_.block_size, 1)
                 .status());
  }
  // Reads only configuration fixed at construction: safe from any thread.
  KEEL_TRY(scheduler_.validate_request(request.prompt_tokens.size(), request.max_new_tokens()));
  KEEL_ASSIGN_OR_RETURN(auto lora, resolve_lora(request));
  KEEL_TRY(check_waiting(num_waiting_.load(), config_.scheduler.max_waiting));
  int64_t cache_blocks = 0;
  if (!request.retain_as.empty()) {
    if (request.retain_ms <= 0) return Status::invalid_argument("a context cache needs a ttl > 0");
    cache_blocks = (static_cast<int64_t>(request.prompt_tokens.size()) + config_.block_size - 1) /
                   config_.block_size;
    const int64_t cap = num_blocks_ / 2;
    // Both are refusals a retry cannot fix (OutOfRange → 400): the cache is larger than the quota
    // itself, or the quota is held by caches that stay until deleted or expired.
    if (cache_blocks > cap) {
      return Status::out_of_range("this context cache needs " + std::to_string(cache_blocks) +
                                  " KV blocks, but context caches may hold at most " +
                                  std::to_string(cap) + " (half the pool)");
    }
    int64_t held = cache_blocks_reserved_.load();
    do {
      if (held + cache_blocks > cap) {
        return Status::out_of_range("context caches may hold at most " + std::to_string(cap) +
                                    " KV blocks (half the pool); " + std::to_string(held) +
                                    " are held and this one needs " + std::to_string(cache_blocks) +
                                    "; delete a context cache or wait for one to expire");
      }
    } while (!cache_blocks_reserved_.compare_exchange_weak(held, held + cache_blocks));
  }
  const RequestKey key = next_key_.fetch_add(1);
  num_waiting_.fetch_add(1);
  num_active_.fetch_add(1);
  {
    MutexLock lock(mu_);
    inbox_.push_back(
        Submit{key, std::move(request), std::move(sink), now_ns(), cache_blocks, std::move(lora)});
  }
  wake_.notify_all();
  return key;
}

void Engine::abort(RequestKey key) {
  {
    MutexLock lock(mu_);
    inbox_.push_back(Abort{key});
  }
  wake_.notify_all();
}

void Engine::drain(std::chrono::milliseconds timeout) {
  draining_.store(true);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (num_active_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (num_active_.load() == 0) return;
  KEEL_LOG_WARN("drain timeout: cancelling {} in-flight requests", num_active_.load());
  {
    MutexLock lock(mu_);
    // Key -1: abort everything the engine thread knows of (each gets FinishReason::kAbort).
    inbox_.push_back(Abort{-1});
  }
  wake_.notify_all();
  const auto hard_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (num_active_.load() > 0 && std::chrono::steady_clock::now() < hard_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool Engine::idle() const { return active_.empty() && !executor_->busy(); }

void Engine::process_inbox(bool wait) {
  std::deque<Message> batch;
  {
    UniqueLock lock(mu_);
    const auto ready = [this] {
      mu_.assert_held();
      return stop_.load() || !inbox_.empty();
    };
    const std::optional<int64_t> deadline = next_deadline_ns();
    if (wait && !deadline) {
      wake_.wait(lock.native(), ready);
    } else if (wait) {
      wake_.wait_for(lock.native(),
                     std::chrono::nanoseconds(std::max<int64_t>(0, *deadline - clock_.now_ns())),
                     ready);
    }
    batch.swap(inbox_);
  }
  expire_caches();
  expire_kv_pins();
  for (Message& m : batch) {
    if (auto* s = std::get_if<Submit>(&m)) {
      admit(std::move(*s));
    } else if (auto* r = std::get_if<ReleasePin>(&m)) {
      unpin(r->pin);
    } else if (auto* rb = std::get_if<ReadBlock>(&m)) {
      serve_block_read(*rb);
    } else if (auto* rk = std::get_if<ReleaseKvPin>(&m)) {
      kv_.release_pin(rk->key);
    } else {
      const RequestKey key = std::get<Abort>(m).key;
      if (key >= 0) {
        cancel(key);
      } else {
        std::vector<RequestKey> all;
        for (const auto& [k, a] : active_) all.push_back(k);
        for (RequestKey k : all) cancel(k);
      }
    }
  }
}

void Engine::admit(Submit s) {
  EngineRequest a;
  a.arrival_ns = s.arrival_ns;
  a.sink = std::move(s.sink);
  a.sampler = std::make_unique<sampling::Sampler>(s.request.sampling,
                                                  static_cast<int32_t>(model_.hparams().n_vocab));
  a.sampler->set_prompt(original_prompt(s.request));
  if (!s.request.grammar.empty()) {
    if (!grammars_) {
      grammars_ =
          std::make_unique<grammar::GrammarRegistry>(std::make_shared<const grammar::TokenTrie>(
              grammar::TokenTrie::from_tokenizer(*tokenizer_)));
    }
    auto constraint = grammars_->make(s.request.grammar, s.request.max_tokens);
    KEEL_CHECK(constraint.ok());  // submit() parsed the grammar
    a.sampler->set_constraint(std::move(constraint).value());
  }
  a.sampler->resume(resumed_span(s.request));  // counted as output; the draw counter moves on
  a.pic.variant = s.request.pic_link.value_or(config_.pic_link);
  a.request = std::move(s.request);
  a.cache_blocks = s.cache_blocks;
  a.lora = std::move(s.lora);
  a.sched.key = s.key;
  EngineRequest& r = active_.emplace(s.key, std::move(a)).first->second;
  early_exit_.admit(r.request, &r.exit);
  const GenerationRequest& q = r.request;
  const auto prompt_len = static_cast<int32_t>(q.prompt_tokens.size());
  Result<std::unique_ptr<SparseSequence>> sparse = make_sparse_sequence(
      q.sparse.value_or(config_.sparse), config_.sparse_tuning, config_.block_size, prompt_len);
  KEEL_CHECK(sparse.ok());  // submit() and EngineConfig::validate() checked the parameters
  r.sparse = std::move(sparse).value();
  if (!q.stop_strings.empty()) {
    r.stops = std::make_unique<StopStringDetector>(*tokenizer_, q.stop_strings);
    KEEL_CHECK(!r.stops->resume(resumed_span(q)).has_value());  // submit() refused a match
  }
  if (q.pic_chunks.empty() || r.pic.variant.mode == kv::PicMode::kFull ||
      !config_.enable_prefix_cache || r.sparse != nullptr || r.lora != nullptr) {
    enqueue(r, q.max_new_tokens(), extra_key(r));
    const SpeculativeParams& spec = q.speculative.value_or(config_.speculative);
    if (spec.enabled() && r.sparse == nullptr) scheduler_.set_speculation(s.key, spec);
    if (r.sparse != nullptr) {
      scheduler_.set_exact_limit(s.key, prompt_len);
      ++counters_.sparse_requests;
    }
    return;
  }
  admit_pic(r);
}

void Engine::enqueue(EngineRequest& r, int32_t max_tokens, const kv::BlockHash& extra_key,
                     PicState pic) {
  r.sched.tokens = r.request.prompt_tokens;
  r.sched.num_prompt_tokens = r.sched.num_tokens();
  r.sched.max_tokens = max_tokens;
  r.sched.extra_key = extra_key;
  r.sched.tenant = r.request.tenant;
  r.sched.tenant_weight = r.request.tenant_weight;
  r.sched.program = r.request.program;
  r.sched.pic = std::move(pic);
  scheduler_.add(&r.sched);
}

void Engine::apply_block_work(StepPlan& plan) {
  // Demotions read blocks that the copies and promotions may overwrite: they go first. (No step
  // is in flight here.)
  const size_t block_bytes = storage_.layout().block_bytes();
  for (const kv::EvictedCachedBlock& e : plan.demotions) {  // copied out now, stored by transfer_
    const std::byte* bytes = storage_.block(e.block);
    transfer_->demote(e.hash, std::vector<std::byte>(bytes, bytes + block_bytes));
  }
  for (const auto& [src, dst] : plan.copies) storage_.copy_block(src, dst);
  if (pipeline_tail_ != nullptr) {  // mirrored to the later stages with the next step
    pipeline_copies_.insert(pipeline_copies_.end(), plan.copies.begin(), plan.copies.end());
  }
  for (const Promotion& p : plan.promotions) {
    std::memcpy(storage_.block(p.block), p.payload.data(), block_bytes);
  }
  run_links(plan);
  plan.demotions.clear();
  plan.copies.clear();
  plan.promotions.clear();
}

void Engine::add_to_step(const ScheduledSeq& s, EngineRequest& a, StepInput* in) {
  if (a.num_cached_tokens < 0 && !a.pic.internal) {  // first time scheduled: its prefix hit
    a.num_cached_tokens = a.sched.num_cached_tokens;
    num_waiting_.fetch_sub(1);
    metrics_.request_queue_time_seconds.observe(seconds_between(a.arrival_ns, now_ns()));
  }
  ++a.in_flight;
  add_scheduled_seq(in, s, a.lora.get());
  if (a.sparse != nullptr) {
    const bool decode = s.num_tokens == 1 && s.positions.empty();
    in->sparse.back() =
        bind_sparse_step(*a.sparse, a.sched.num_preemptions, decode ? s.start_pos : -1,
                         config_.block_size, &in->batch.seqs.back());
  }
  if (!s.samples) return;
  const bool head = a.sched.spec.method == SpecMethod::kDraftHead;
  std::vector<int32_t> drafts(s.tokens.end() - s.num_drafts, s.tokens.end());
  StepInput::Sample::EarlyExit ee = early_exit_.sample(a.exit, drafts);
  StepInput::Sample& sample = in->samples.emplace_back();
  sample.key = s.key;
  sample.sampler = a.sampler.get();
  sample.drafts = std::move(drafts);
  sample.head_k = head ? a.sched.spec.k : 0;
  sample.early_exit = std::move(ee);
  if (a.sched.spec.method == SpecMethod::kDraftModel) {  // the draft model follows the tokens
    sample.model_k = a.sched.spec.k;
    sample.known_tokens = a.sched.tokens;
  }
}

bool Engine::launch(StepPlan& plan) {
  // Drop sequences whose request finished or was aborted after the plan was made (the scheduler's
  // resolve_plan() did so already; this also covers aborts the engine applied since).
  std::erase_if(plan.seqs, [this](const ScheduledSeq& s) {
    auto it = active_.find(s.key);
    return it == active_.end() || it->second.finished;
  });
  // The plan's block work runs even when no seq is left: a promotion belongs to a request that
  // may compute in a later plan.
  apply_block_work(plan);
  StepInput in;
  if (plan.probe.has_value()) {
    const auto it = active_.find(plan.probe->key);
    if (it != active_.end() && !it->second.finished) add_probe(&in, *plan.probe);
  }
  if (plan.seqs.empty() && in.probe.empty()) return false;
  for (const ScheduledSeq& s : plan.seqs) add_to_step(s, active_.at(s.key), &in);
  in.block_copies = std::exchange(pipeline_copies_, {});
  executor_->launch(std::move(in));
  return true;
}

// Learns the step's cost and sizes the prompt tokens the next steps that decode may add.
void Engine::update_prefill_budget(const StepPlan& plan, double seconds) {
  int32_t prefill = 0, decodes = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    if (s.is_decode()) {
      ++decodes;
    } else {
      prefill += s.num_tokens;
    }
  }
  step_costs_.observe(prefill, decodes, seconds);
  if (config_.step_time_target_s < 0) return;
  const int32_t d = std::max(decodes, 1);
  const double target = config_.step_time_target_s > 0
                            ? config_.step_time_target_s
                            : std::max(EngineConfig::kMinStepTargetSeconds,
                                       EngineConfig::kAutoStepFactor * step_costs_.predict(0, d));
  scheduler_.set_prefill_budget(step_costs_.prefill_budget(
      d, target, EngineConfig::kMinPrefillChunk, config_.scheduler.max_batched_tokens));
}

// The engine thread's block tables (kv) become batch tables (model) as they are: one hole value.
static_assert(kv::kNoBlock == model::kReleasedBlock);

void Engine::release_sparse_pages(const StepPlan& plan) {
  for (const ScheduledSeq& s : plan.seqs) {
    const auto it = active_.find(s.key);
    if (it == active_.end() || it->second.sparse == nullptr) continue;
    EngineRequest& a = it->second;
    const bool valid = !a.finished && a.sched.num_preemptions == a.sparse->epoch;
    const std::vector<int32_t> pages =
        take_released_pages(*a.sparse, valid, kv_.num_held_blocks(s.key));
    counters_.sparse_max_pages_held =
        std::max<int64_t>(counters_.sparse_max_pages_held, a.sparse->max_pages_held);
    if (pages.empty()) continue;
    scheduler_.release_pages(s.key, pages);
    counters_.sparse_pages_released += static_cast<int64_t>(pages.size());
  }
}

void Engine::apply_exits(StepOutput& out) {
  for (StepOutput::Exit& x : out.exits) {
    const auto it = active_.find(x.key);
    if (it != active_.end()) {
      EarlyExitHook::on_exit(&it->second.exit, x, &metrics_.early_exit_layers);
    }
  }
  for (const StepOutput::Proposal& p : out.proposals) {
    const auto it = active_.find(p.key);
    if (it != active_.end()) EarlyExitHook::on_proposal(&it->second.exit, p);
  }
}

void Engine::apply(const StepPlan& plan, StepOutput& out) {
  if (out.status.ok() && plan.num_tokens() >= 8) {  // prefill-sized: feeds the tier cost model
    const double s = out.forward_seconds / plan.num_tokens();
    prefill_seconds_per_token_ =
        prefill_seconds_per_token_ <= 0 ? s : 0.8 * prefill_seconds_per_token_ + 0.2 * s;
    scheduler_.set_prefill_seconds_per_token(prefill_seconds_per_token_);
    prefill_seconds_per_token_published_.store(prefill_seconds_per_token_,
                                               std::memory_order_relaxed);
  }
  if (out.status.ok()) update_prefill_budget(plan, out.forward_seconds);
  for (const ScheduledSeq& s : plan.seqs) {
    auto it = active_.find(s.key);
    if (it != active_.end()) --it->second.in_flight;
  }
  if (out.probe_key != 0 || plan.probe.has_value()) {
    // An unfinished probe (failed step) selects nothing: the request goes on as naive.
    scheduler_.apply_probe(
        plan.probe.has_value() ? plan.probe->key : out.probe_key,
        out.status.ok() ? std::span<const float>(out.deviation) : std::span<const float>());
  }
  if (!out.status.ok()) {
    // Finish every request of the step first, so update() skips them (no tokens to apply).
    KEEL_LOG_ERROR("forward pass failed: {}", out.status.to_string());
    for (const ScheduledSeq& s : plan.seqs) {
      auto it = active_.find(s.key);
      if (it == active_.end() || it->second.finished) continue;
      TokenEvent ev;
      ev.error = out.status.to_string();
      finish(s.key, it->second, FinishReason::kError, std::move(ev));
    }
    scheduler_.update(plan, {});
    return;
  }
  std::vector<SeqResult> results;
  for (const StepOutput::Token& t : out.tokens) results.push_back({t.key, t.token});
  scheduler_.update(plan, results);
  apply_exits(out);  // before the proposals' drafts move to the scheduler
  for (StepOutput::Proposal& p : out.proposals) {
    scheduler_.propose_drafts(p.key, std::move(p.drafts));
  }
  counters_.spec_verify_steps += out.num_verified;
  counters_.spec_drafted_tokens += out.num_drafted;
  counters_.spec_accepted_tokens += out.num_accepted;
  counters_.spec_emitted_tokens += out.num_verified + out.num_accepted;
  tap_published_blocks();  // before the token events: a finished prefill's blocks are out
  release_sparse_pages(plan);
  ++counters_.steps_total;
  const int64_t t = now_ns();
  for (StepOutput::Token& tok : out.tokens) emit_token(tok, t);
  // A request finished (aborted) while a chunk of it that samples nothing was in flight is
  // released here, now that the step no longer uses its blocks.
  for (const ScheduledSeq& s : plan.seqs) release_if_done(s.key);
}

void Engine::emit_token(StepOutput::Token& tok, int64_t t) {
  auto it = active_.find(tok.key);
  if (it == active_.end()) return;
  EngineRequest& a = it->second;
  if (a.finished) {  // aborted while the step ran: its token is discarded
    release_if_done(tok.key);
    return;
  }
  if (a.pic.internal) {  // a compiled PIC chunk: its sample is not needed
    finish_compile(tok.key, a, FinishReason::kLength);
    return;
  }
  ++a.num_generated;
  ++counters_.generation_tokens_total;
  if (a.first_token_ns == 0) {
    a.first_token_ns = t;
    counters_.prompt_tokens_total += a.request.num_original_prompt_tokens();
    metrics_.time_to_first_token_seconds.observe(seconds_between(a.arrival_ns, t));
  } else {
    metrics_.inter_token_latency_seconds.observe(seconds_between(a.last_token_ns, t));
  }
  a.last_token_ns = t;
  TokenEvent ev;
  ev.tokens.push_back(tok.token);
  if (tok.logprobs) ev.logprobs.push_back(std::move(*tok.logprobs));
  if (std::optional<FinishReason> reason = finish_reason(a, tok.token, &ev)) {
    finish(tok.key, a, *reason, std::move(ev));
  } else {
    ev.num_prompt_tokens = a.request.num_original_prompt_tokens();
    ev.num_cached_tokens = usage_cached_tokens(a.request, a.num_cached_tokens);
    a.sink->on_event(std::move(ev));
  }
}

std::optional<StepPlan> Engine::schedule_step() {
  StepPlan plan = scheduler_.schedule();
  if (launch(plan)) return plan;
  scheduler_.update(plan, {});  // every plan goes back through update(), in order
  return std::nullopt;
}

std::optional<StepPlan> Engine::launch_ahead(std::optional<StepPlan> next) {
  if (!next) return std::nullopt;
  scheduler_.resolve_plan(&*next);  // drops finished requests, fills the tokens just sampled
  scheduler_.extend_plan(&*next);   // admits requests that arrived while the step computed
  if (launch(*next)) return next;
  scheduler_.update(*next, {});
  return std::nullopt;
}

void Engine::cancel_all() {
  std::vector<RequestKey> all;
  for (const auto& [k, a] : active_) all.push_back(k);
  for (RequestKey k : all) cancel(k);
}

void Engine::end_step() {
  emit_cache_events();
  publish_stats();
}

void Engine::run() {
  // Step N: schedule (or take the plan made ahead) → execute on the executor thread → update.
  // With schedule-ahead, plan N+1 is made while N executes and launched right after update(N).
  // Every plan schedule() makes goes back through scheduler_.update(), in order — also plans that
  // end up empty (nothing to do, or every request finished before launch).
  std::optional<StepPlan> step;
  while (!stop_.load() || !idle()) {
    if (stop_.load() && !active_.empty() && !step) cancel_all();
    process_inbox(/*wait=*/!step && active_.empty() && !stop_.load());
    if (!step) step = schedule_step();  // schedule
    if (!step) {
      end_step();
      if (!active_.empty()) {
        // Requests exist but none could run this step (e.g. waiting for blocks); retry shortly.
        yield_kv_pin();
        UniqueLock lock(mu_);
        wake_.wait_for(lock.native(), std::chrono::milliseconds(1));
      }
      continue;
    }
    std::optional<StepPlan> ahead;
    if (config_.schedule_ahead) {
      process_inbox(false);
      ahead = scheduler_.schedule();  // schedule N+1 while N executes
    }
    StepOutput out = executor_->wait();  // execute
    apply(*step, out);                   // update
    process_inbox(false);
    step = launch_ahead(std::move(ahead));
    end_step();
  }
  emit_cache_events();
}

void Engine::emit_cache_events() {
  tap_published_blocks();
  if (!cache_events_) return;
  if (tiers_ != nullptr) {  // T1/T2 gains and drops, logged on whichever thread made them
    std::vector<kv::CacheEvent> tier = tiers_->take_events();
    pending_cache_events_.insert(pending_cache_events_.end(), std::make_move_iterator(tier.begin()),
                                 std::make_move_iterator(tier.end()));
  }
  if (pending_cache_events_.empty()) return;
  cache_events_(std::exchange(pending_cache_events_, {}));
}

}  // namespace keel::engine
